// Package broker is Ferry's embedded Apache Iggy server: it speaks Iggy's
// binary protocol 0.11 over TCP (optionally TLS) so that any client that
// follows the protocol (the official Go SDK, Ferry's own client) works
// against it as against the real server. Tests start one in-process on a
// loopback port (see package brokertest); `ferry serve` runs one.
//
// It owns sessions and request-id deduplication, streams, topics,
// partitions, consumer groups and their assignment, consumer offsets,
// PATs, the metadata file and the offsets journals, retention, and fault
// injection (Broker.Control). Partition logs belong to package
// broker/storage; frames and payloads to package iggy/wire.
//
// # Behaviour
//
// The broker follows the protocol fact sheet (shared notes,
// iggy-protocol.md); each cmd_*.go file opens with the behaviour of its
// commands, dispatch.go holds the session rules and the dispatch tables.
// Deviations from the upstream server, all deliberate:
//
//   - A send whose batch fails its checks (checksums, layout, reserved
//     bytes) is answered with the check's status (3, 4009, 4027, 4039,
//     4101) instead of being dropped silently, so a client fails at once
//     instead of waiting out its 30 s timeout. Likewise an undecodable
//     join/leave body is answered status 3.
//   - A send whose frames' offset_delta values are not 0, 1, 2, ... (each
//     frame's index, as producers write them) is refused with status 3.
//     Upstream stores any deltas; polls would then label messages with
//     wrong (even repeated) offsets and group consumers would re-deliver
//     them forever.
//   - Before a session is bound, a frame larger than 64 KiB closes the
//     connection (upstream allows 64 MiB from the first byte), and a
//     connection that sends nothing for Config.LoginTimeout (30 s) is
//     closed. A write to a client that makes no progress for
//     max(1.2 × HeartbeatInterval, 10 s) closes its connection; an evicted
//     stale member's connection is closed even when its client stopped
//     reading.
//   - Users other than root are not implemented: codes 31-37 answer
//     status 5 (FeatureUnavailable). Root is user 0 with Config's
//     credentials.
//   - Only the latest committed metadata reply of a session is cached for
//     replay; an older repeated request id gets [1][0][59]. Pre-commit
//     denials (a non-zero status) do not consume the request id.
//   - get_snapshot writes compressions 3-6 (bzip2, zstd, lzma, xz) with
//     deflate; update_topic that sets message_expiry or max_topic_size to
//     0 stores the resolved default, not the 0 sentinel.
//   - Purging a stream or topic also forgets its consumer offsets.
//
// # Durability
//
// With Config.DataDir set, every partition log is a storage.OpenFile log
// with the topic's segment_size, fsynced on every append when the topic
// has enforce_fsync or the policy is FsyncAlways. metadata.json is
// rewritten atomically (temp file, fsync, rename, directory fsync) before
// any metadata reply leaves. Consumer offsets go to a per-partition
// journal, one write(2) per change before the reply, so an acknowledged
// offset survives a killed process; see persist.go for the format and the
// fsync rules, metadata.go for the directory layout. On Start everything
// is recovered; partitions recover through storage. Without DataDir
// everything lives in memory (storage.NewMemory).
//
// # Concurrency
//
// Each connection has a reader goroutine, which handles its requests one
// at a time in arrival order (so replies keep request order), and a writer
// goroutine. Model state is guarded by mutexes whose order and scope are
// written down in locksordering.txt: sends and polls of different
// partitions do not contend beyond a read lock on the model. A janitor
// evicts stale group members (1.2 × HeartbeatInterval without a request)
// and settles revocations past RebalancingTimeout; a retention loop and,
// under FsyncInterval, an fsync loop run beside it. Close stops them all
// and waits.
//
// Bad input never panics the process: decoders return errors, and a
// handler panic is recovered, logged and ends only that connection.
package broker
