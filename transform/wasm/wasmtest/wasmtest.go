// Package wasmtest builds the Go guest modules of Ferry's WebAssembly
// tests with the standard toolchain, once per test binary: the transform
// guest (transform/wasm/testdata/goguest) for packages wasm, transform,
// runtime and cmd/ferry, and any other (Build; package udaftest's).
package wasmtest

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

// GoGuest returns the path of the guest module of the transform tests,
// built on first use (Build).
func GoGuest(t testing.TB) string {
	t.Helper()
	return Build(t, "transform/wasm/testdata/goguest", "transform/wasm/guest", "transform/wasm/abi")
}

type result struct {
	once sync.Once
	path string
	err  error
}

var builds sync.Map // source directory → *result

// Build returns the path of the Go module in dir (relative to the
// repository) built for WebAssembly (GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared), on first use in this test binary. The module is
// kept in the system's temporary directory under a hash of the Go
// version and the sources of dir and deps (the directories of the guest
// SDK it uses), so test binaries built from the same sources share it;
// the tests never write it anywhere else.
//
// It also keeps wasm's compiled code in a directory there
// (wasm.CacheDirEnv), unless the environment names one: compiling a Go
// guest takes long under the race detector, and the test packages share
// the result.
func Build(t testing.TB, dir string, deps ...string) string {
	t.Helper()
	r, _ := builds.LoadOrStore(dir, &result{})
	res := r.(*result)
	res.once.Do(func() {
		if os.Getenv(wasm.CacheDirEnv) == "" {
			os.Setenv(wasm.CacheDirEnv, filepath.Join(os.TempDir(), "ferry-wasmtest-compiled"))
		}
		res.path, res.err = compile(dir, deps)
	})
	if res.err != nil {
		t.Fatalf("build the wasm module %s: %v", dir, res.err)
	}
	return res.path
}

func compile(dir string, deps []string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("no caller")
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(file)))) // the repository
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), dir)
	for _, d := range append([]string{dir}, deps...) {
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
	cache := filepath.Join(os.TempDir(), "ferry-wasmtest-"+hex.EncodeToString(h.Sum(nil))[:16])
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
