// Package guest is the guest side of Ferry's WebAssembly transform ABI
// for modules written in Go (GOOS=wasip1 GOARCH=wasm, built with
// -buildmode=c-shared). It exports ferry_alloc, wraps the host functions
// and decodes and encodes the layouts of package abi; a module exports
// its transform functions itself:
//
//	//go:wasmexport transform
//	func transform(ptr unsafe.Pointer, n uint32) uint64 {
//		return guest.Handle(ptr, n, func(batch []abi.Message) []abi.Verdict {
//			out := make([]abi.Verdict, len(batch))
//			for i := range batch { ... }
//			return out
//		})
//	}
//
//	func main() {}
//
// Its functions other than Handle exist only when GOOS is wasip1.
package guest
