// Package udaf runs user-defined aggregates (UDAFs) written as
// WebAssembly modules, for the derive connector's keyed aggregations: a
// module is loaded once and called to make a group's empty state (Init),
// add a message's JSON payload to a state (Add, or AddAll for many in one
// call), merge two states of one
// group (Merge) and turn a state into the output value, JSON (Emit).
// States are opaque bytes the caller keeps, so it can checkpoint them
// with the input offsets they cover; the module keeps nothing between
// calls that its results depend on.
//
// The ABI (exports, layouts, result codes) is package udaf/abi's; Go
// guests use package udaf/guest, and examples/udaf/top3 is a complete
// module. Modules run on package transform/wasm's engine: wazero, WASI
// preview 1 sandboxed as for transforms (no files, network, environment
// or real clocks), its compilation cache shared with transforms, its
// host functions (log, ...) available.
//
// Guarantees: a Module is safe for concurrent use; calls run in a pool of
// instances, one call per instance at a time, as many instances as calls
// at once (GOMAXPROCS of them kept idle). Every call has a deadline
// (Limits.CallTimeout) and every instance a memory ceiling
// (Limits.Memory). A module that traps, runs past its deadline, exhausts
// its memory or returns what is not a result of the ABI fails the call
// with an error naming the module's file and the call (ErrTrap,
// ErrTimeout, ErrMemoryLimit, ErrOutput), and its instance is discarded;
// an error the aggregate returns is an *abi.GuestError (ErrAggregate) and
// keeps the instance. Emit's output is checked to be JSON.
//
// Tested against: Go-built modules (GOOS=wasip1, Go's toolchain of the
// repository), the top-3 example against a Go reference over random
// inputs split and merged at random, and a misbehaving module for traps,
// endless loops, memory exhaustion and errors; the result decoder is
// fuzzed.
//
// Left out: keyed state host functions for the aggregate itself (the
// state is the bytes passed in and out); limits on a state's size other
// than the module's memory; modules built by other toolchains are
// expected to work through the ABI but are not tested.
package udaf
