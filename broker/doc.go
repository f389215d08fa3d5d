// Package broker is Ferry's embedded Apache Iggy server: it speaks Iggy's
// binary protocol 0.11 over TCP (optionally TLS) so that any client that
// follows the protocol (the official Go SDK, Ferry's own client) works
// against it as against the real server. Tests start one in-process on a
// loopback port (see package brokertest); `ferry serve` runs one.
//
// It owns sessions and request-id deduplication, streams, topics,
// partitions, consumer groups and their assignment, consumer offsets,
// users, permissions and PATs, the metadata file and the offsets
// journals, retention, fault injection (Broker.Control), and Prometheus
// metrics (Broker.MetricsHandler, Config.MetricsAddr; metrics.go). Partition logs belong to package
// broker/storage; frames and payloads to package iggy/wire.
//
// # Behaviour
//
// The broker follows the protocol fact sheet (shared notes,
// iggy-protocol.md); each cmd_*.go file opens with the behaviour of its
// commands, dispatch.go holds the session rules and the dispatch tables.
// Request bodies are decoded as upstream decodes them (wire.DecodeRequest,
// upstream's decode_from): the fields a command needs are read and bytes
// after them ignored; a field that runs past the body or a bad identifier
// is status 3. Options blocks and the send batch run to the end of the
// body, so bytes after them are part of them and fail their checks.
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
//     connection that has not logged in Config.LoginTimeout (30 s) after
//     it connected or logged out is closed, however often it pings. A
//     write to a client that makes no progress for
//     max(1.2 × HeartbeatInterval, 10 s) closes its connection; an evicted
//     stale member's connection is closed even when its client stopped
//     reading.
//   - Connections are capped (see Limits below) and failed logins are
//     slowed; upstream has neither.
//   - A write that fails because the disk is full, read-only or failing
//     (ENOSPC, EDQUOT, EROFS, EIO) answers 4006 CannotSaveMessagesToSegment
//     (sends) or 10006 CannotWriteToFile (metadata, offsets, partition
//     files) instead of 1 (Error); failures.go.
//   - Users (cmd_03x_users.go, authz.go): root (user 0) cannot be
//     deactivated (upstream allows it); deleting or deactivating a user
//     evicts its sessions at once (upstream keeps a deactivated user's
//     sessions); deleting a stream or topic drops every user's
//     permissions on it, so a successor that reuses its id does not
//     inherit them; snapshots need read_servers (upstream: a session).
//     New PATs are URL-safe base64 (upstream: standard, which cannot
//     stand unescaped in a connection string).
//   - Only the latest committed metadata reply of a session is cached for
//     replay; an older repeated request id gets [1][0][59]. Pre-commit
//     denials (a non-zero status) do not consume the request id.
//   - get_snapshot writes compressions 3-6 (bzip2, zstd, lzma, xz) with
//     deflate; update_topic that sets message_expiry or max_topic_size to
//     0 stores the resolved default, not the 0 sentinel.
//   - Purging a stream or topic also forgets its consumer offsets.
//   - Compacted topics, a Ferry extension (compact.go): the topic options
//     ferry.compact (bool) and ferry.compact_tombstone_retention (µs),
//     accepted by create_topic and update_topic, stored in metadata.json
//     and listed in a topic's explicit options only when set, so topics
//     that do not ask for them look exactly as upstream's. Every
//     Config.CompactionInterval (1m) the sealed segments of a compacted
//     topic keep the latest message per key (user header "key", string or
//     raw bytes; keys of the active segment count), deletion markers
//     ("deleted" = true) for the retention (Config.CompactTombstoneRetention,
//     24h) after they were appended, and every message without a key.
//     Offsets stay; a poll at a compacted offset gets the next survivor,
//     and polls, First, timestamps and consumer offsets skip the gaps.
//     Each rewritten segment publishes segment.compacted and counts in the
//     iggy_broker_compaction_* metrics (passes, segments, bytes before and
//     after, messages and deletion markers removed, seconds, keys).
//
// # Limits
//
// Config.MaxConns (default 10000) caps the connections held and
// Config.MaxUnauthConns (default 1000) those that have not logged in. A
// connection that would pass a cap closes the oldest connection that has
// not logged in; when every connection has logged in and MaxConns is
// reached, the new one is closed at once, before anything is read or
// written (the protocol has no reply without a request). So sockets that
// never log in cannot exhaust file descriptors, and a client that logs in
// promptly is never the one closed. Both are logged at warn level at most
// once per 10 s, with counts (admission.go). Keep MaxConns below
// RLIMIT_NOFILE minus what partition logs need (two files per segment,
// one per partition journal). Accept errors such as EMFILE are retried
// after a pause that doubles from 5 ms to 1 s, as net/http's Server does.
//
// Until it first logs in a connection reads and writes its socket
// unbuffered and costs about 12 KiB (two goroutine stacks and its queue);
// its 64 KiB read and write buffers come with the login.
//
// Failed password and token logins back off per remote address and per
// username (login_limit.go): the first 3 failures of a key are free, then
// attempts on it are spaced 100 ms apart, doubling per failure up to 5 s.
// An attempt waits for its keys' next slot before its credentials are
// checked, so a correct password during a backoff is late and then works,
// and clears the keys; slots are reserved on arrival, so parallel
// connections queue instead of guessing together, and no attempt waits
// more than 10 s. The wait delays only that connection's reply. The table
// holds at most 8192 keys, evicting the least recently used; a key
// without a failure for 15 min starts over. Credentials are compared as
// SHA-256 digests in constant time. Failures are logged at debug level,
// and at warn level at most once per address per minute, with the count.
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
// and settles revocations past RebalancingTimeout; a retention loop (which
// also runs compaction) and,
// under FsyncInterval, an fsync loop run beside it. Close stops them all
// and waits.
//
// Bad input never panics the process: decoders return errors, and a
// handler panic is recovered, logged and ends only that connection.
package broker
