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
// See source.go's doc.
//
// Tested against Redis 7.0 (Debian 12's redis-server 7.0.15).
package redis
