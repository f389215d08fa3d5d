// Package redis is the `redis` sink and source (on
// github.com/redis/go-redis/v9). Upstream Iggy has no Redis connector:
// the keys are Ferry's, named as Redpanda Connect's redis inputs and
// outputs name them.
//
// # Sink
//
//	url = "redis://localhost:6379/0"   # a secret (it may hold a password); rediss:// for TLS
//	mode = "streams"                   # streams | lists | pubsub | keys
//	stream = "iggy:{stream}:{topic}:{partition}"  # streams: the stream
//	entry_id = "offset"                # streams: offset | auto
//	body_key = "body"                  # streams: the field holding the payload
//	include_metadata = true            # streams: iggy_stream, iggy_topic, iggy_partition, iggy_offset, iggy_id fields
//	include_headers = true             # streams: each user header as a field "header:<key>"
//	max_length = 0                     # streams: XADD MAXLEN ~ N; 0 = never trim
//	key = "iggy:{stream}:{topic}"      # lists: the list; keys: the key, must use {key} (default "{key}")
//	channel = "iggy:{stream}:{topic}"  # pubsub: the channel
//	ttl = "0s"                         # keys: expiry of each key set; 0 = never
//	timeout = "30s"                    # connect, read and write
//
// Names are templates of {stream}, {topic} and {partition}, filled from
// the batch, never from a payload; only keys mode's key may use {key},
// the message key. Every name and value goes to Redis as an argument of
// its own (RESP bulk strings), never spliced into a command or script.
//
// Consume returns only when Redis answered every write of the batch, so
// the runtime commits the Iggy offset only for what Redis took. Redis
// acknowledges a write once it is in memory (and in the append-only file
// per the server's appendfsync); what survives a Redis crash is Redis's
// persistence setting, not Ferry's.
//
// Streams, entry_id = "offset" (the default): each message is the entry
// <offset+1>-<partition>, added by a Lua script that adds the batch's
// entries in order, stops at the first that fails, and skips an entry
// whose id is equal to or smaller than the stream's last id (Redis's
// "equal or smaller than the target stream top item") as already
// written. That rule is exact because the stream template must use
// {stream}, {topic} and {partition}: one stream takes one partition's
// messages in offset order, and a batch never leaves a gap (the script
// stops at its first failure). So a batch replayed after a crash or an
// outage adds nothing, even for entries since trimmed or deleted.
// Writing other entries with larger ids into such a stream makes Ferry
// skip its own messages below them: leave these streams to Ferry.
// entry_id = "auto" lets Redis pick ids (*), allows any template, and a
// replayed batch adds its entries again (at-least-once).
//
// Lists: one RPUSH of the whole batch (atomic). A batch replayed (a crash
// or an outage after Redis took it and before the offset was committed)
// is appended again: up to one batch (batch_length) of duplicates per
// crash, in order, after the first copy.
//
// Pub/sub: PUBLISH, pipelined. Fire-and-forget: Redis keeps nothing, a
// subscriber that is not connected at that moment never sees the message,
// and a replayed batch is published again.
//
// Keys: the key is the message key, the "key" user header (a string or
// raw value, as package live's Target and iggy.KeyHeader define it); SET
// with the payload (PX ttl when ttl is set), pipelined in offset order. A
// deletion marker (the "deleted" header, bool true, as live's Target
// sends) DELetes the key. A replay sets the same values in the same order,
// so the end state is the same (a ttl starts again). A message without a
// key is refused for good (dead-lettered) and its neighbours are written.
//
// Errors: a refused or lost connection, a timeout, and answers of a
// server that will take the write later (LOADING, BUSY, READONLY, OOM,
// MASTERDOWN, MISCONF, ...) are Unavailable: nothing is dead-lettered and
// the runtime restarts the sink with backoff. Any other answer of Redis
// (WRONGTYPE, for one) is a permanent error of the messages it concerns,
// with Redis's text.
//
// # Source
//
//	url = "redis://localhost:6379/0"
//	mode = "streams"             # streams | lists
//	stream = "orders"            # streams: required
//	consumer_group = "ferry"
//	client_id = "ferry"          # this consumer; keep it across restarts
//	create_streams = true        # XGROUP CREATE ... MKSTREAM when missing
//	start_from_oldest = true     # a new group starts at 0 (false: $)
//	body_key = "body"            # the payload field; without it, the entry's fields as a JSON object
//	min_idle_time = "0s"         # > 0: XAUTOCLAIM entries other consumers left pending this long
//	key = "jobs"                 # lists: required
//	processing_key = ""          # lists: default <key>:processing
//	batch_size = 100
//	block = "1s"                 # XREADGROUP BLOCK / BLMOVE timeout
//	schema = "json"              # json | text | raw
//	timeout = "30s"
//
// Streams: XREADGROUP as client_id; after a restart this consumer's own
// pending entries are read again first (from id 0), then new ones (>).
// A batch is acknowledged (XACK) only in Ack, after it is in Iggy and
// the runtime saved its state. The Iggy message id is the entry id
// (milliseconds and sequence as two big-endian uint64s), so an entry
// read again keeps its id; the entry's other fields become headers
// (those that fit Iggy's 1..255 bytes), with redis_stream_id. A kill
// between Iggy and XACK repeats at most the batches in flight (one being
// sent, one read ahead), and so does a Redis outage: the read fails, the
// runtime restarts the source with backoff until Redis answers, and the
// entries whose XACK was lost with the server are read again, same ids.
//
// Lists: items move to the processing list (BLMOVE, then LMOVE for the
// rest of the batch) and are removed from it (LREM) in Ack. At Open the
// items already in the processing list are delivered first: a kill
// before Ack, or a Redis outage that loses the LREM, repeats them (at
// most two batches); none is lost. Items have no id (Iggy assigns one),
// so a repeat is not recognisable by id. One source per processing list.
//
// Iggy refuses empty payloads (and so could not even dead-letter one): a
// stream entry whose body field is empty, and an empty list item, are
// passed over with a warning, acknowledged (XACK) or removed from the
// processing list at once. An entry without the body field is a JSON
// object of its fields; JSON strings are UTF-8, so bytes of a field name
// or value that are not become U+FFFD there: put binary data in the body
// field, which is sent byte for byte.
//
// Tested against Redis 7.0 (Debian 12's redis-server 7.0.15).
package redis
