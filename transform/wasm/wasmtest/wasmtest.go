// Package wasmtest builds the Go guest module of Ferry's WebAssembly
// tests (transform/wasm/testdata/goguest) with the standard toolchain,
// once per test binary, for the tests of packages wasm, transform,
// runtime and cmd/ferry.
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

var (
	once  sync.Once
	built string
	err   error
)

// GoGuest returns the path of the guest module, building it on first use
// (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared). The module is
// kept in the system's temporary directory under a hash of its sources
// and the Go version, so test binaries built from the same sources share
// it; the tests never write it anywhere else.
//
// It also keeps wasm's compiled code in a directory there
// (wasm.CacheDirEnv), unless the environment names one: compiling the
// guest takes long under the race detector, and the test packages share
// the result.
func GoGuest(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if os.Getenv(wasm.CacheDirEnv) == "" {
			os.Setenv(wasm.CacheDirEnv, filepath.Join(os.TempDir(), "ferry-wasmtest-compiled"))
		}
		built, err = build()
	})
	if err != nil {
		t.Fatalf("build the wasm guest: %v", err)
	}
	return built
}

func build() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("no caller")
	}
	root := filepath.Dir(filepath.Dir(file)) // transform/wasm
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version())
	for _, dir := range []string{"testdata/goguest", "guest", "abi"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			return "", err
		}
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
			h.Write(b)
		}
	}
	dir := filepath.Join(os.TempDir(), "ferry-wasmtest-"+hex.EncodeToString(h.Sum(nil))[:16])
	out := filepath.Join(dir, "goguest.wasm")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "build-*.wasm")
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
	cmd.Dir = filepath.Join(root, "testdata", "goguest")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", cmd, err, b)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", err
	}
	return out, nil
}
