// Package live lets a Go program treat an Iggy topic as live data, on
// Ferry's own client (package iggy): a topic as a live stream of messages,
// a topic partition as a live keyed map, and a keyed target that publishes
// only what changed and a deletion marker for what disappeared. It owns
// the offset bookkeeping, the readiness signals, the compaction of a
// partition into a map, and the target's small durable state; it never
// creates or deletes streams or topics (consumer groups it creates when
// missing).
//
// # Handles
//
// Connect dials a server from an Iggy connection string and returns a
// Handle with a consumer side and a producer side; its ID is the server
// address, never the credentials. FromClient wraps a client the program
// built.
//
//	h, err := live.Connect(ctx, "iggy://iggy:iggy@127.0.0.1:8090")
//
// # A topic as a live stream
//
// Handle.Stream reads all partitions of a topic through a named consumer
// group. Messages come from Next, NextBatch, the Messages iterator, or
// the Payloads iterator (payload bytes only). The group's offset is
// stored only for messages marked processed (Message.Done, Batch.Done)
// and never past one that is not: a restart resumes after the last
// processed message. Ready is closed once everything that was in the
// topic at the start has been processed.
//
//	s, err := h.Stream(ctx, iggy.NamedID("shop"), iggy.NamedID("orders"), "billing")
//	for m, err := range s.Messages(ctx) {
//		if err != nil {
//			return err
//		}
//		bill(m.Payload)
//		m.Done()
//	}
//
// Options and their defaults: WithBatchLength (100 messages a poll),
// WithPollInterval (300ms after an empty poll), WithRetryInterval (0:
// the first failed poll ends the read), WithInitRetries (0: a missing
// stream or topic fails at once) and WithInitRetryInterval (1s),
// WithAllowReplay (off: offsets never move backwards and a message is not
// delivered twice by one Stream).
//
// # A topic as a live keyed map
//
// Handle.Map reads one partition (WithPartition, default 0) from its
// start. A key function picks each message's key (ok false skips it);
// WithDeletion marks deletions. Next first presents the partition as it
// was at the start, compacted: one Upsert per live key, latest value,
// deleted keys gone; then every change as an Upsert or Delete event. Get,
// Len and All read the map.
//
// # A keyed target
//
// Handle.Target publishes to one partition. Each round the program
// declares the keys it wants (Declare for string keys, DeclareBytes for
// binary ones; the two never collide) and calls Apply, which sends the
// values that changed since they were last published and, for keys
// published before and not declared now, a deletion marker whose payload
// WithDeletionValue makes (without it, a deletion is ErrNoDeletionValue).
// What was published is kept in a Store (WithStateFile: a file replaced
// atomically; or any Store), so a restarted program sends only real
// changes. Drain sends deletions for everything and closes; Close alone
// abandons the target and sends nothing.
//
// Keys travel in the user header KeyHeader ("key": a string value for a
// string key, raw bytes for a binary one), deletion markers also carry
// DeletedHeader ("deleted" = true). StringKey, BytesKey and IsDeleted read
// them, so a Map on the target's partition mirrors what was declared:
//
//	m, err := h.Map(ctx, stream, topic, live.StringKey, live.WithDeletion(live.IsDeleted))
//
// KeyHeader and DeletedHeader are iggy.KeyHeader and iggy.DeletedHeader:
// Ferry's one key convention (package iggy's "Message keys and deletion
// markers", and docs/keys.md), which ferry message send --key, the
// sources' key_field and the keyed sinks (PostgreSQL upsert_by_key,
// MongoDB id_from = "key", Redis keys mode) share, so a Map can read any
// of their topics and a Target can feed any of those sinks.
package live
