//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/ferryhq/ferry/transform/wasm/abi"
)

//go:wasmimport ferry log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport ferry config
func hostConfig(ptr unsafe.Pointer, capacity uint32) uint32

//go:wasmimport ferry counter_add
func hostCounterAdd(ptr unsafe.Pointer, n uint32, delta int64)

//go:wasmimport ferry state_get
func hostStateGet(kptr unsafe.Pointer, klen uint32, vptr unsafe.Pointer, capacity uint32) int32

//go:wasmimport ferry state_put
func hostStatePut(kptr unsafe.Pointer, klen uint32, vptr unsafe.Pointer, vlen uint32)

//go:wasmimport ferry state_delete
func hostStateDelete(kptr unsafe.Pointer, klen uint32)

// in is the batch buffer the host writes into; out the last verdicts.
// Both stay referenced until the next call.
var in, out []byte

//go:wasmexport ferry_alloc
func ferryAlloc(n uint32) unsafe.Pointer {
	if uint32(cap(in)) < n || n == 0 {
		in = make([]byte, max(n, 1))
	}
	in = in[:n]
	return unsafe.Pointer(unsafe.SliceData(in[:cap(in)]))
}

// Handle reads the batch the host wrote at ptr (n bytes), calls fn and
// returns fn's verdicts as the host expects them. fn must return one
// verdict per message. The messages alias the batch buffer: copy what
// must outlive the call. A batch that does not decode panics (a trap).
func Handle(ptr unsafe.Pointer, n uint32, fn func([]abi.Message) []abi.Verdict) uint64 {
	batch, err := abi.DecodeBatch(unsafe.Slice((*byte)(ptr), n))
	if err != nil {
		panic(err)
	}
	vs := fn(batch)
	out = abi.AppendVerdicts(out[:0], vs)
	return abi.Pack(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(out)))), uint32(len(out)))
}

// Log levels.
const (
	Debug = 0
	Info  = 1
	Warn  = 2
	Error = 3
)

// Log writes msg to the runtime's log at level, with the connector's key.
func Log(level int, msg string) {
	b := []byte(msg)
	hostLog(int32(level), ptr(b), uint32(len(b)))
}

// Config returns the transform's config table as JSON ("{}" for none).
func Config() []byte {
	n := hostConfig(nil, 0)
	b := make([]byte, n)
	hostConfig(ptr(b), n)
	return b
}

// Count adds delta to the counter name (1 to 128 bytes).
func Count(name string, delta int64) {
	b := []byte(name)
	hostCounterAdd(ptr(b), uint32(len(b)), delta)
}

// StateGet returns the value of key in the transform's keyed state.
func StateGet(key []byte) ([]byte, bool) {
	buf := make([]byte, 64)
	for {
		n := hostStateGet(ptr(key), uint32(len(key)), ptr(buf), uint32(len(buf)))
		if n < 0 {
			return nil, false
		}
		if int(n) <= len(buf) {
			return buf[:n], true
		}
		buf = make([]byte, n)
	}
}

// StatePut sets key to value in the transform's keyed state.
func StatePut(key, value []byte) {
	hostStatePut(ptr(key), uint32(len(key)), ptr(value), uint32(len(value)))
}

// StateDelete removes key from the transform's keyed state.
func StateDelete(key []byte) { hostStateDelete(ptr(key), uint32(len(key))) }

func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
