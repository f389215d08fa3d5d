//go:build wasip1

package guest

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ferryhq/ferry/udaf/abi"

	// ferry_alloc, the allocator the host writes inputs through.
	_ "github.com/ferryhq/ferry/transform/wasm/guest"
)

// out is the last result; it stays referenced until the next call.
var out []byte

var errUnregistered = errors.New("the module registered no aggregate (guest.Register in its init)")

//go:wasmexport udaf_init
func udafInit(_ unsafe.Pointer, _ uint32) uint64 {
	return result(func() ([]byte, error) { return registered.Init() })
}

//go:wasmexport udaf_add
func udafAdd(ptr unsafe.Pointer, n uint32) uint64 {
	return pair(ptr, n, func(a, b []byte) ([]byte, error) { return registered.Add(a, b) })
}

//go:wasmexport udaf_add_all
func udafAddAll(ptr unsafe.Pointer, n uint32) uint64 {
	state, inputs, err := abi.SplitList(input(ptr, n))
	return result(func() ([]byte, error) {
		if err != nil {
			return nil, err
		}
		for i, in := range inputs {
			if state, err = registered.Add(state, in); err != nil {
				return nil, fmt.Errorf("input %d: %w", i, err)
			}
		}
		return state, nil
	})
}

//go:wasmexport udaf_merge
func udafMerge(ptr unsafe.Pointer, n uint32) uint64 {
	return pair(ptr, n, func(a, b []byte) ([]byte, error) { return registered.Merge(a, b) })
}

//go:wasmexport udaf_emit
func udafEmit(ptr unsafe.Pointer, n uint32) uint64 {
	state := input(ptr, n)
	return result(func() ([]byte, error) { return registered.Emit(state) })
}

func input(ptr unsafe.Pointer, n uint32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(ptr), n)
}

func pair(ptr unsafe.Pointer, n uint32, fn func(a, b []byte) ([]byte, error)) uint64 {
	a, b, err := abi.SplitPair(input(ptr, n))
	if err != nil {
		return result(func() ([]byte, error) { return nil, err })
	}
	return result(func() ([]byte, error) { return fn(a, b) })
}

// result runs fn and returns its result as the host expects it.
func result(fn func() ([]byte, error)) uint64 {
	var body []byte
	var err error
	if registered == nil {
		err = errUnregistered
	} else {
		body, err = fn()
	}
	if err != nil {
		out = abi.AppendResult(out[:0], abi.Failed, []byte(err.Error()))
	} else {
		out = abi.AppendResult(out[:0], abi.OK, body)
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(out))))<<32 | uint64(len(out))
}
