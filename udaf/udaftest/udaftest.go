// Package udaftest builds the WebAssembly aggregates of Ferry's tests
// with the standard toolchain (GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared), once per test binary and source: the example
// top-3 (examples/udaf/top3), for package udaf and the derive connector,
// and the misbehaving module of package udaf's tests (udaf/testdata/faulty).
package udaftest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/transform/wasm"
)

// Top3 returns the path of examples/udaf/top3 built: per group the three
// highest "score" values of inputs {"id": ..., "score": ...} with their
// ids, emitted as [{"id":...,"score":...}], highest first, equal scores
// by id.
func Top3(t testing.TB) string { return build(t, "examples/udaf/top3") }

// Faulty returns the path of udaf/testdata/faulty built: a count whose
// inputs containing "trap", "spin", "grow" or "fail" trap, loop, exhaust
// memory or return an error.
func Faulty(t testing.TB) string { return build(t, "udaf/testdata/faulty") }

type result struct {
	once sync.Once
	path string
	err  error
}

var builds sync.Map // source directory → *result

// build builds the module of dir (relative to the repository) on first
// use. It is kept in the system's temporary directory under a hash of its
// sources, the SDK's and the Go version, so test binaries share it; it
// also keeps wasm's compiled code there (wasm.CacheDirEnv) unless the
// environment names a directory, since compiling a Go module takes long
// under the race detector.
func build(t testing.TB, dir string) string {
	t.Helper()
	r, _ := builds.LoadOrStore(dir, &result{})
	res := r.(*result)
	res.once.Do(func() {
		if os.Getenv(wasm.CacheDirEnv) == "" {
			os.Setenv(wasm.CacheDirEnv, filepath.Join(os.TempDir(), "ferry-wasmtest-compiled"))
		}
		res.path, res.err = compile(dir)
	})
	if res.err != nil {
		t.Fatalf("build the wasm aggregate %s: %v", dir, res.err)
	}
	return res.path
}

func compile(dir string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("no caller")
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(file))) // the repository
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), dir)
	for _, d := range []string{dir, "udaf/guest", "udaf/abi", "transform/wasm/guest", "transform/wasm/abi"} {
		files, err := filepath.Glob(filepath.Join(root, d, "*.go"))
		if err != nil {
			return "", err
		}
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s %d\n", f[len(root):], len(b))
			h.Write(b)
		}
	}
	cache := filepath.Join(os.TempDir(), "ferry-udaftest-"+hex.EncodeToString(h.Sum(nil))[:16])
	out := filepath.Join(cache, filepath.Base(dir)+".wasm")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(cache, "build-*.wasm")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", tmp.Name(), ".")
	cmd.Dir = filepath.Join(root, dir)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", cmd, err, b)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}
