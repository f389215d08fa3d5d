// Package state keeps each source connector's resume position (its "state":
// the last id read, a file offset, a replication LSN, ...) so that a
// restarted connector continues exactly where the last acknowledged batch
// ended.
//
// The package owns the Store interface, the opaque Version used for
// optimistic concurrency, the rules for state keys, and two stores:
//
//   - FileStore (the path setting of the runtime config's state table): one
//     append-only journal per directory (state.journal) of checksummed
//     records, replayed into memory at open. A Save appends a record and
//     returns after a data sync that started after its append; concurrent
//     Saves of different keys share one sync (group commit). A torn last
//     record (a crash mid-append, never acknowledged) is cut off at open;
//     damage before the last record is reported as corrupt, naming the file
//     and byte offset, and never read as empty state. The journal is
//     compacted atomically (temp file, fsync, rename, fsync of the
//     directory) when it grows much larger than the live state. The
//     one-file-per-key <key>.state files of earlier builds are migrated into
//     the journal at open.
//   - HTTPStore: state kept by an HTTP service, read with GET and written
//     with a conditional PUT (If-Match / If-None-Match: *) that carries one
//     Idempotency-Key across all retries of a Save.
//
// # Delivery contract
//
// The runtime acknowledges a source batch only after the batch has been sent
// to Iggy and Save has returned without error. Save is all-or-nothing: after
// a crash at any point, Load returns either the previous state or the new
// one, never a mix. A successful Save returns the new Version, which the
// caller passes as the expected version of its next Save; ErrConflict means
// another writer changed the state in between, and the caller must Load again
// before deciding what to do.
//
// Errors are wrapped with context and match the sentinels with errors.Is:
// ErrNotFound (no state yet: start from the beginning), ErrConflict (reload),
// ErrInvalidKey (configuration error), ErrCorrupt (stop and ask the operator),
// ErrTooLarge (the blob exceeds MaxStateSize), ErrNoETag (the HTTP service
// does not implement the protocol), ErrClosed (the store was closed). The
// stores never log.
package state
