// Package guest is the guest side of Ferry's WebAssembly user-defined
// aggregate ABI (package udaf/abi) for modules written in Go
// (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared). Importing it
// exports udaf_init, udaf_add, udaf_add_all (Add of many inputs in one
// call), udaf_merge and udaf_emit, and ferry_alloc
// through package transform/wasm/guest, whose Log a module may use too.
// A module registers its aggregate once:
//
//	func init() {
//		guest.Register(guest.Aggregate{Init: ..., Add: ..., Merge: ..., Emit: ...})
//	}
//
//	func main() {}
//
// The slices a function is given alias the call's buffer and are valid
// only during the call; what it returns is kept until the next call. An
// error a function returns reaches the host as the call's error, its
// message cut at 1 KiB; a panic traps the instance (the host discards
// it). examples/udaf/top3 is a complete module.
//
// Its exports exist only when GOOS is wasip1; Register and Aggregate
// exist everywhere, so an aggregate can be tested with go test natively.
package guest

// Aggregate is a user-defined aggregate. Every function is required. The
// host keeps states as opaque bytes; Merge must be associative, and the
// host may merge states of one group built from disjoint parts of its
// input in any grouping.
type Aggregate struct {
	// Init returns a group's empty state.
	Init func() ([]byte, error)
	// Add returns state with the input, a message's JSON payload, added.
	Add func(state, input []byte) ([]byte, error)
	// Merge returns the state of the inputs of a and b together.
	Merge func(a, b []byte) ([]byte, error)
	// Emit returns the output value of state as JSON.
	Emit func(state []byte) ([]byte, error)
}

var registered *Aggregate

// Register makes a the module's aggregate. It panics when called twice or
// with a function missing: a module's init is the place to call it.
func Register(a Aggregate) {
	if registered != nil {
		panic("udaf/guest: Register called twice")
	}
	if a.Init == nil || a.Add == nil || a.Merge == nil || a.Emit == nil {
		panic("udaf/guest: Register needs Init, Add, Merge and Emit")
	}
	registered = &a
}
