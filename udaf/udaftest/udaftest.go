// Package udaftest builds the WebAssembly aggregates of Ferry's tests
// with the standard toolchain (GOOS=wasip1 GOARCH=wasm go build
// -buildmode=c-shared), once per test binary and source: the example
// top-3 (examples/udaf/top3), for package udaf and the derive connector,
// and the misbehaving module of package udaf's tests (udaf/testdata/faulty).
package udaftest

import (
	"testing"

	"github.com/ferryhq/ferry/transform/wasm/wasmtest"
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

// build builds the module of dir (relative to the repository) with the
// udaf SDK (wasmtest.Build, which caches it by its sources).
func build(t testing.TB, dir string) string {
	t.Helper()
	return wasmtest.Build(t, dir, "udaf/guest", "udaf/abi", "transform/wasm/guest", "transform/wasm/abi")
}
