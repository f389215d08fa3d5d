// Package clickhouse is the `clickhouse` sink: it inserts the messages of
// Iggy topics into a ClickHouse table over ClickHouse's HTTP interface
// (net/http; no driver is needed for HTTP inserts, and the HTTP interface
// is the one every server version has). It reads upstream's ClickHouse
// sink configuration (libiggy_connector_clickhouse_sink):
//
//	url = "http://localhost:8123"  # required
//	table = "events"               # required
//	database = "default"
//	username = "default"
//	password = ""                  # a secret
//	insert_format = "json_each_row" # json_each_row | row_binary | string
//	string_format = "json_each_row" # for string: json_each_row | csv | tsv
//	timeout_seconds = 30
//	max_retries = 3
//	retry_delay = 1                # seconds
//	verbose_logging = false
//	id_column = ""                 # Ferry: add the Iggy message id to each row under this column
//
// One batch is one INSERT, so it is applied whole or not at all, and the
// runtime commits the Iggy offset only after ClickHouse answered 200. The
// database and table must be plain identifiers (letters, digits, _) and
// are quoted; payloads travel only in the request body, never in the
// query. A row ClickHouse cannot parse fails the INSERT with "(at row
// N)": that message is a permanent error with ClickHouse's text (the
// runtime dead-letters it) and the others are retried; a server that is
// down or answers 502-504 is Unavailable, so nothing is dead-lettered.
//
// Delivery is at-least-once: a batch delivered again after a crash before
// its offset was committed is inserted again. For an exactly-once effect,
// set id_column and make the table a ReplacingMergeTree ordered by that
// column (rows with the same id collapse), or a ReplicatedMergeTree,
// whose block deduplication drops a repeated batch (Ferry sends a batch
// again with the same rows in the same order). insert_deduplication_token
// is not used: the servers tested (18.16, Debian 12's) do not have it.
//
// # row_binary
//
// With insert_format = "row_binary" Open reads the table's columns from
// system.columns (the query holds only the validated identifiers) and
// Consume encodes each JSON object payload as one RowBinary row, field by
// column name (fields naming no column are ignored), sending
// INSERT INTO `db`.`table` (columns) FORMAT RowBinary. Types written:
// Int8-64, UInt8-64 (a JSON integer, a whole float such as 1e3, or the
// number in a string), Float32/64 (a number or numeric string), String
// (a string; a number or boolean as its JSON text), FixedString(N) (at
// most N bytes, zero-padded), UUID (its text), Date ("YYYY-MM-DD" or a
// day number), DateTime and DateTime('zone') (Unix seconds, RFC 3339, or
// "YYYY-MM-DD[ hh:mm:ss]" read in the column's zone, UTC if none;
// fractions dropped), Decimal(P, S) (a number or string in plain
// notation, exact: more fractional digits than S do not fit), Enum8/16
// (a name or a value), and Nullable(T), Array(T), LowCardinality(T) of
// those. Another type (Tuple, Map, Nested, AggregateFunction, and the
// types 18.16 does not have: DateTime64, Bool, Date32, IPv4/6) fails
// Open naming the column. A field that is missing or null takes the
// column's DEFAULT if it has one (left out of the INSERT's column list:
// upstream sends RowBinaryWithDefaults, which 18.16 does not have; the
// effect is the same), NULL if it is Nullable, and otherwise, like a
// value that does not fit its type, dead-letters the message with a
// reason naming the field and the column's type; the rest of the batch
// is inserted. MATERIALIZED and ALIAS columns are never written. A batch
// whose messages leave out different DEFAULT columns is sent as one
// INSERT per set of columns, in a fixed order, so a failure after the
// first can insert that first part again when the batch is redelivered
// (at-least-once, as above). With id_column, that column (UUID, String
// or FixedString(36)) takes the message id, whatever the payload says.
// The columns are read again at each Open: after an ALTER, an INSERT
// that fails restarts the sink, which reads them anew.
//
// Tested against Debian's ClickHouse 18.16.1 (RowBinary there needs no
// setting; LowCardinality columns need allow_experimental_low_cardinality_type
// to be created). On it row_binary is not faster than json_each_row: the
// sink's decoding of each JSON payload costs more than the server saves
// (see bench_test.go).
package clickhouse
