// Package derive is Ferry's derive sink: it reads input topics, keeps a
// keyed aggregation of them, and writes the aggregation to an output
// topic as a changelog — per key (and window) its latest value, and
// deletion markers when a group disappears. `ferry derive create` manages
// derive sinks through the runtime API; GET /views/{name}/{key} answers
// point lookups from the current state (connector.Viewer).
//
//	type = "sink"
//	key = "derive-orders_per_user"
//	path = "derive"
//	[[streams]]
//	stream = "shop"
//	topics = ["orders"]
//	schema = "json"
//	on_error = "dead_letter"          # for late = "dead_letter" and unreadable input
//	[plugin_config]
//	to = "shop/orders_per_user"
//	input = "events"                  # or "changelog": the input is a keyed table (below)
//	group_by = "user"                 # or "key", the message's key header
//	aggregates = ["count(*)", "sum(amount)", "avg(amount)", "max(amount)", "distinct_count(sku)", "latest(status)"]
//	window = "1m"                     # tumbling; hop = "30s" for hopping windows
//	allowed_lateness = "30s"
//	event_time = "ts"                 # RFC 3339 or Unix ms; default the origin timestamp
//	filter = 'status = "paid" and amount > 0'
//	late = "drop"                     # or "dead_letter"
//	retract = false                   # a deletion marker when a window closes
//	udaf = "/srv/aggs/top3.wasm"      # optional, package udaf's ABI
//	address = "127.0.0.1:8090"        # the Iggy server written to (default the embedded broker's)
//
// Groups: by the key header (a string, or raw bytes taken as they are)
// or a JSON field (a string as it is, any other value as its JSON text),
// 1 to 200 bytes. With a window, the group is (key, window) and its
// changelog key is "KEY@WINDOW_START" (RFC 3339, ms, UTC). An event
// belongs to the windows [start, start+window) holding its event time,
// every hop. The watermark is the highest event time applied (over all
// input partitions); a window is open while end + allowed_lateness is
// above it. An event whose windows are all closed is late: dropped
// (counted) or, with late = "dead_letter", returned to the runtime as a
// Permanent message error, which the stream's on_error dead-letters.
// Closed windows leave the state (after their last update, or their
// deletion marker with retract).
//
// Changelog input (input = "changelog"): each input topic is a keyed
// table, as docs/keys.md defines it — the latest message of each key
// header is the key's row, a deletion marker deletes it — and the
// aggregation is over the rows, not the messages: each key counts once,
// in the group of its latest value. A new value of a key retracts its
// previous row from that row's group (which may not be the new one) and
// adds the new row; a deletion marker retracts it; so do a value the
// filter does not keep and a value that cannot be read (not JSON, no
// group field, a number field that is not a number; reported as an
// error, so the stream's on_error dead-letters it, and the key no longer
// counts anywhere). A group whose last row leaves gets a deletion marker
// on the output (none for a group made, or made again after its deletion
// marker, and emptied within one batch: the output has nothing to
// delete). Every message needs a key header; a string key and a binary
// key of the same bytes are two rows, and so are one key in two input
// topics (the topic is part of the row's identity; the partition is not,
// so partitions added to the input move nothing).
//
// count, sum and avg are kept as totals that take a row back; min and
// max keep a count of the group's rows per distinct value (a new extreme
// is searched among them when the current one leaves); distinct_count a
// count of rows per distinct value; latest takes the row updated last
// (latest(F): the last one having F), and searches the group's rows when
// that one leaves. A sum that took back values not exact in binary (0.1)
// can differ from a fresh sum in the last bits; integers below 2^53 are
// exact, and a sum whose group has no value left is 0 again.
//
// No window: a row has no event time of its own, and an update would
// have to retract from a window that closed and left the state (a
// configuration error names window). No udaf: a WebAssembly aggregate
// has no inverse of add in its ABI, so nothing could be retracted (a
// configuration error names udaf). Memory and checkpoint: every row of
// the table is kept and saved — its topic, key, group, a sequence number
// and, per aggregate, the value it read (the whole payload for
// latest(*)) — besides, per group, the counts per distinct value of min,
// max and distinct_count, which Open computes again from the rows, as it
// does the counts, extremes and latest values (only the sums are taken
// as saved). So the state grows with the number of keys of the input,
// not of groups. The checkpoint of this mode is format version 2
// (version 1 plus the rows); a state_dir made in one input mode is
// refused in the other.
//
// Group keys must be UTF-8 text (a binary key header that is not is
// refused): the group key is a string header and a JSON string of the
// output and the checkpoint.
//
// Output: after each batch, one message per changed group, in group
// order, to partition xxh32(changelog key) % partitions of the output
// topic (created with one partition when missing; adding partitions
// later moves keys, and with them where the broker deduplicates their
// ids). Payload {key,
// window_start, window_end, one value per aggregate (count, sum_amount,
// avg_amount, ...), udaf}; headers key (the changelog key), window (its
// start) and, on a deletion marker, deleted = true. The id is UUID v5 of
// (connector key, changelog key, version), where version counts the
// group's emitted updates and survives deletion (a tombstone is kept),
// so an update has the same id in every replay. With input = "events",
// a deletion marker on the input (the deleted header, by its key header)
// deletes the groups whose group key is that key (so, grouping by a
// field, it deletes nothing: use input = "changelog" for a keyed table).
//
// Exactly once: Consume skips the messages below each input partition's
// applied offset, applies the rest, then saves one checkpoint file
// (state_dir/checkpoint.json, written to a temporary file, synced and
// renamed: internal/fsx) holding the groups, their versions, the
// watermark, the applied offsets and the batch's outputs; then it sends
// the outputs and returns nil, and the runtime commits the offset. A kill
// before the save leaves the old checkpoint and nothing sent: the batch is
// applied again from the same state. A kill after it leaves the batch
// applied: Open sends its outputs again, and the messages come back as
// skipped. So no input is counted twice. The outputs sent again carry
// the ids they had, and a broker that deduplicates by id (ferry serve
// --dedup-max-entries, broker.Config.Dedup, upstream's
// message_deduplication) keeps one copy; without deduplication the
// output may hold duplicates of the updates of the last batch before a
// restart, with the same ids, and nothing else. The checkpoint also
// keeps the late and unreadable messages of each partition's last batch,
// so a batch delivered again reports them again.
//
// state_dir defaults to the directory the runtime gives the connector
// (connector.Config.StateDir: <[state] path>/data/sink-<key>); it is
// locked while the sink runs.
// A changed aggregates list needs a new state_dir.
//
// Filter language: comparisons FIELD OP LITERAL (OP one of = == != < <=
// > >=; LITERAL a number, a "string", true, false or null), a bare FIELD
// (present and not null or false), joined by and, or, not and
// parentheses; interpreted, never evaluated as code (filter.go).
//
// User-defined aggregates (udaf): a WebAssembly module of package udaf
// (init / add / merge / emit), or any Aggregator; Add gets the message's
// JSON payload, the emitted JSON is the value "udaf". Its states are in
// the checkpoint like the built-ins'.
//
// Tested against the broker of this repository with deduplication on
// (broker/brokertest), in process and under the real runtime with ten
// kill -9s (crash_test.go: counts and sums per key and window equal a
// reference computed from the input; crash_changelog_test.go: a keyed
// table's updates and deletion markers, count, sum, min, max and latest
// per group equal a reference computed from the input's final table),
// with the top-3 example module against its Go reference
// (udaf_test.go); every aggregate under retraction against a brute
// force over seeded random updates and deletions (table_test.go); the
// filter parser, the checkpoint decoder (and the restore of a
// changelog checkpoint) and the apply path of both modes (with the
// table's invariants and a save and restore) are fuzzed.
//
// Left out: the whole state is rewritten at every batch (fine for tens of
// thousands of groups, or of keys with changelog input, whose rows are
// most of a save; a journal would be needed for millions);
// distinct_count keeps every distinct value; with changelog input every
// row is kept; tombstones of deleted unwindowed groups stay in the
// state; Merge of a udaf is not called;
// output to more than one topic.
package derive
