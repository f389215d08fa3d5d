// Package mongodb is the `mongodb` sink and source, on the official Go
// driver (go.mongodb.org/mongo-driver/v2).
//
// # Sink
//
// The sink reads upstream's MongoDB sink configuration
// (libiggy_connector_mongodb_sink) unchanged:
//
//	connection_uri = "mongodb://localhost:27017"  # required; a secret: never logged or shown
//	database = "iggy_messages"                    # required
//	collection = "messages"                       # required
//	max_pool_size = 0               # 0: the driver's default
//	auto_create_collection = false  # create the collection at start when missing
//	batch_size = 100                # documents per insertMany
//	include_metadata = true         # iggy_offset, iggy_timestamp, iggy_stream, iggy_topic, iggy_partition_id
//	id_from = "message"             # Ferry; or "key": _id is the message key, one document per key, the latest offset winning (docs/keys.md)
//	include_checksum = true         # iggy_checksum
//	include_origin_timestamp = true # iggy_origin_timestamp
//	payload_format = "binary"       # binary | json (an embedded document) | string (alias text)
//	verbose_logging = false
//	max_retries = 3                 # attempts of an insert that failed transiently
//	retry_delay = "1s"              # the n-th retry waits n × retry_delay
//	max_document_size = "16MiB"     # Ferry: larger documents are refused before sending
//
// Each message is one document whose _id is upstream's
// "stream:topic:partition:message id" (the id as a decimal u128), then
// the metadata fields upstream writes and `payload`. Documents go in
// unordered insertMany calls, and Consume returns only when MongoDB
// acknowledged every one, so the runtime commits the Iggy offset only
// for written messages (upstream does too, but stops a batch at its
// first bad payload). A duplicate-key error on the _id is a message an
// earlier delivery wrote and counts as written, so a batch delivered
// again after a crash or an outage adds nothing: the effect is
// exactly-once per message id. Two different messages with the same id
// in one partition (ids set by a producer) keep only the first.
//
// A document the sink or the server refuses is a permanent error of that
// message with the reason, so the runtime dead-letters it and its
// neighbours are written: a payload that is not JSON (json) or UTF-8
// (string), a key BSON cannot hold (NUL), nesting deeper than 180
// levels, a document above max_document_size or the server's
// maxBsonObjectSize, and every write error the server returns for the
// document (a unique index other than _id, a validator, a field name the
// server refuses). Unlike upstream, any other duplicate key is not taken
// for a replay: the sink looks the _ids up and dead-letters those not
// there. Network errors, timeouts, server selection failures and the
// server's "shutting down / not primary" codes are retried max_retries
// times and then Unavailable, so nothing is dead-lettered while the
// server is away and the runtime restarts the sink with backoff.
//
// JSON payloads become BSON as upstream's serde_json does: key order
// kept (a repeated key keeps its first place and last value), integers
// that fit as Int64, other numbers as Double. Keys are never read as
// Extended JSON or operators: {"$oid": ...} is a key named "$oid" (which
// the server may refuse). An unknown payload_format is a load error
// naming the key (upstream falls back to binary with a warning).
//
// # Source
//
// The source (Ferry's; upstream has none) reads a collection in
// ascending order of tracking_field, ties in _id order:
//
//	connection_uri = "mongodb://localhost:27017"  # required, secret
//	database = "shop"                             # required
//	collection = "events"                         # required
//	tracking_field = "_id"          # a field or dotted path whose values only grow
//	batch_size = 100
//	poll_interval = "1s"            # wait after a query that found nothing
//	payload_field = ""              # "" sends the whole document
//	schema = "json"                 # json (relaxed Extended JSON) | text | raw (need payload_field)
//	delete_after_read = false       # delete a batch's documents once it is in Iggy
//	processed_field = ""            # or: skip documents with this field true, set it once in Iggy
//	include_metadata = true         # mongodb_database, mongodb_collection, mongodb_id headers
//	max_pool_size = 0
//
// The query is a BSON filter built here ({field: {$gt: v}} or {field: v,
// _id: {$gt: id}}) sorted by {field: 1, _id: 1}; the field names come
// from the configuration only as keys, and a name starting with $ is
// refused at load. The state saved with each batch is the last
// (tracking value, _id) in canonical Extended JSON, so a restart resumes
// right after the last batch in Iggy. Documents whose tracking value is
// missing or null, or of another BSON type than the others, are not
// read, and so are documents inserted later with a lower value than one
// already read (use an ObjectId _id, a counter or an insert time).
// Delivery is at-least-once: a kill between sending a batch to Iggy and
// saving its state sends that batch (and the one read ahead) again, with
// the same message ids (a hash of database, collection and _id), so an
// Iggy-side or sink-side deduplication removes the repeats. Deleting or
// marking happens in Ack, after the state is saved: a kill in between
// leaves that batch's documents in place (behind the saved position, so
// not read again).
//
// # Servers
//
// Tested against FerretDB v1.24.2 with its SQLite backend (the MongoDB
// wire protocol; no MongoDB server can be installed on Ferry's test
// machines), with mongo-driver v2.10.0. Where a real MongoDB (5.0 and
// later) behaves otherwise: FerretDB refuses field names starting with $
// or holding a dot anywhere in a document (MongoDB takes them below the
// top level), nested arrays and NUL in strings, so such payloads are
// dead-lettered on FerretDB and written on MongoDB; its SQLite backend
// fails a whole insert ("malformed JSON") over a top-level key holding a
// double quote (seen in the source's tests; the sink writes no top-level
// key from a message, and such an error is not Unavailable, so the
// runtime would isolate the message); it does not enforce maxBsonObjectSize or the nesting limit on insert
// (the sink's own checks do), ignores writeConcern, and its
// duplicate-key message does not name the index. The sink uses no
// command FerretDB lacks (insert, find, hello, ping, listCollections,
// create; the source also delete and update).
package mongodb
