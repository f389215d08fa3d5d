// Package connectortest is what connector authors import in their tests,
// and what every Ferry connector's tests use:
//
//   - Start runs the real runtime from TOML snippets on an embedded broker
//     (on a free loopback port, state in a temporary directory), stopped
//     when the test ends; Eventually waits for a condition with a generous
//     liveness bound (never a timing assertion).
//   - Source and Sink are conformance suites: they drive a connector
//     directly, the way the runtime does, and check what the runtime
//     relies on — Poll returns when its context ends; a source resumed
//     from a saved state neither skips nor repeats beyond one batch; a
//     batch replayed after a crash carries the same message ids (for
//     sources that say so); Ack and Nack in poll order are accepted; a
//     sink writes what it is given, writes a batch received twice once
//     (for sinks that say so), names only messages of the batch in
//     MessageErrors, and returns when its context ends.
//
// A connector's test supplies what only it knows: how to build it, how to
// add records to its external system (for a source) and how to read what
// the external system holds (for a sink). See the examples.
package connectortest
