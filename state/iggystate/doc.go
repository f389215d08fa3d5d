// Package iggystate is a state.Store kept in an Iggy topic, so that every
// process running the same configuration against one Iggy server reads
// the same source state (the runtime config's state.storage = "iggy").
//
// # Layout
//
// One topic (default ferry/state) with one partition holds the state of
// every key. Each Save appends one message: its KeyHeader is
// "<key>@<epoch>" and its payload a versioned binary envelope (envelope.go:
// format version, flags, epoch, sequence, key, data, CRC-32C). Open
// creates the topic when it is missing: compacted (iggy.TopicCompact) on
// Ferry's broker, which then keeps only the latest message per key and
// epoch; an ordinary topic on a server that refuses the option (an
// upstream Iggy server), which grows by one message per Save, and Open
// reads all of it. Do not give that topic a message expiry: a key not
// saved within it (a stopped source) would lose its state. Rewriting the
// live state and dropping old segments on such servers is not done yet.
//
// A store reads the topic to its end at Open and again at the start of
// every Load, Save, Delete and Claim (one poll when nothing is new), so
// it sees what other processes wrote. For a key it returns the latest
// record of the highest epoch. Version is "<epoch>:<sequence>"; the
// sequence grows with every save of the key at that epoch, deletions
// included, so a version is never reused.
//
// # Epochs and fencing
//
// Each key is written at an epoch: 0 unless set with SetEpoch or Claim,
// which is what one process without leases gets. With scale-out the
// epoch is the key's lease epoch (package lease), higher for every new
// holder. Save refuses with state.ErrConflict when the key already has a
// record at a higher epoch (a newer holder has written: the caller has
// lost its lease and must stop; the error also matches ErrFenced), or
// when the current version is not the expected one. Because the message key carries the epoch, compaction
// never lets an old holder's late record replace the newer epoch's: it
// only replaces records of its own epoch, and Load prefers the higher
// epoch whatever the offsets. Claim writes the key's current state again
// at the new epoch, fencing the old holder before the new one's first
// Save. The first record of a new epoch is sent in one batch with
// deletion markers ("<key>@<old epoch>", iggy.DeletedHeader) for the
// older epochs, so compaction removes them.
//
// # Guarantees
//
// A Save that returned nil is in the server's log (see package iggy on
// what an acknowledgement promises): a writer process killed at any
// moment loses no Save that returned (TestSurvivesKill). There is one writer per
// key and epoch; the lease provides that. Within one process the store's
// calls are serialised, so concurrent Saves on one version have exactly
// one winner. A holder that saves at an old epoch while a newer holder has
// not yet written (before Claim) succeeds, and its record is then
// shadowed by the newer epoch's: the newer holder re-reads from the state
// it loaded, so messages are repeated, not lost.
//
// Limits: a key's epoch knowledge lasts as long as its records: after a
// Delete, once compaction has dropped the deletion markers (the topic's
// tombstone retention, default 24h), a writer at an older epoch is no
// longer refused for that key. Deleting the lease topics restarts the
// epochs at 1; then delete the state topic too, or Claim refuses.
package iggystate
