// Package influxdb is the `influxdb` sink and the `influxdb` source, with
// upstream's configuration keys (libiggy_connector_influxdb_sink and
// libiggy_connector_influxdb_source, version = "v2"). Tested against
// InfluxDB 1.8.10 (built from the Go module proxy), through its
// v2-compatible /api/v2/write and /api/v2/query (Flux) endpoints; no 2.x
// server can be had here, so 1.8 stands in for it (its bucket is
// "database" or "database/retention_policy", its token "user:password",
// or anything with authentication off). Upstream's version = "v3"
// (InfluxDB 3's /api/v3) is refused at load: it is not built yet.
//
// No client library: the write API is line protocol in an HTTP body and
// the query API is Flux in, annotated CSV out, which net/http and
// encoding/csv do in a few hundred lines; the official client
// (influxdb-client-go) would add a module and its own batching, retries
// and goroutines, which the runtime already has and which would hide
// which point InfluxDB refused. Line protocol is escaped by hand in
// lineproto.go, to the rules of the server's parser; names it cannot
// carry unchanged are refused rather than mangled, and a fuzz test and a
// round trip through the real server check the escaping.
//
// # Sink
//
// Each message becomes one point, as upstream writes it:
//
//	<measurement>,stream=S,topic=T,partition=P,offset=O[,<tags>] message_id="<uuid>",iggy_checksum=Cu,iggy_origin_timestamp=Uu,payload_json="<compact JSON>"[,<fields>] <time>
//
// (include_* choose the metadata; payload_format json, text or base64
// names the payload field). Ferry adds tags, fields and timestamp_field,
// which take values from a JSON payload's keys, include_offset_tag,
// include_payload, and integer_type: InfluxDB 1.x has no unsigned
// integers, so on a server without /api/v2/setup (1.x) the iggy_*
// integers are written signed (bit for bit).
//
// Delivery is at-least-once with an idempotent effect: the runtime
// commits the Iggy offset only after every request of the batch was
// answered 204, and a batch written again after a crash or an outage
// overwrites the same points, because a point is identified by its
// measurement, tags and time, and both are taken from the message: the
// time is the message's Iggy timestamp (or timestamp_field), never the
// time of writing (upstream uses "now" for a zero timestamp; Ferry has
// none, and refuses a message without one), and the offset tag (with the
// stream, topic and partition tags) keeps messages apart. Turning those
// tags off, or precision = "s" with timestamp_field values that collide,
// merges points: that is InfluxDB's rule.
//
// A point InfluxDB refuses (400: a field type conflict, a line it cannot
// parse, a partial write) is found by halving the request until it stands
// alone; it is a permanent error with InfluxDB's reason, which the
// runtime dead-letters, and the others are written. A server that is down
// or answers 429/5xx is retried max_retries times, then Unavailable: the
// runtime keeps the batch and restarts the sink with backoff.
//
// # Source
//
// The source runs upstream's Flux query template on /api/v2/query, with
// $cursor (an RFC 3339 time) and $limit substituted; the query must use
// range(start: time(v: "$cursor")), which includes the cursor's time, and
// sort by _time, so that limit() cuts the answer in time order.
//
// A query is not a snapshot: InfluxDB reads each series at its own moment
// while it answers, so one query can see a point of one series and miss
// an earlier point of another series written before it (seen on 1.8: a
// query held h1 and h2 at a time but not h0, written first). So a query
// emits only rows up to the horizon, the latest time an earlier query
// saw (a query that saw later rows is followed by another at once): a
// point written before that row was visible when this query began. And
// rows at the cursor's time are told apart by what they hold, never by
// their place among the rows of that time, which can differ between two
// queries.
//
// Its state is upstream's (the last time emitted, the rows emitted at it
// as cursor_row_count) with Ferry's cursor_row_ids: a key for each row
// emitted at that time, a hash of its cells but result, table, _start and
// _stop (the cells a query's range changes). The next query starts at
// that time again and skips the rows with those keys, so rows sharing a
// time are never skipped nor repeated across batches, however many there
// are ($limit is batch_size plus the rows to skip, without upstream's
// cap, so a dense time cannot get stuck). A state without
// cursor_row_ids (upstream's) skips cursor_row_count rows of that time
// by place, once. Each batch carries its state; the runtime saves it
// after the batch is in Iggy, so a crash replays at most the batches not
// yet saved, with the same message ids: an id is the row's time in
// nanoseconds and its key (rows holding the same cells at one time are
// told apart by how many came before).
//
// The limit is the order of writing: every point is read if points are
// written in time order (each at or after the times written before it,
// as a clock gives). A point written after a query saw a later time may
// be missed if the cursor moves past its time first; a point at the
// cursor's time is still read; one before the cursor never is. A point
// at the cursor's time that was emitted and is written again with other
// cells is a new row, emitted again.
//
// Rows are emitted as upstream's envelope, {"measurement", "field",
// "timestamp", "value", "row"}, or, with payload_column, that column in
// payload_format.
package influxdb
