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
//	insert_format = "json_each_row" # json_each_row | string (row_binary: not yet, see below)
//	string_format = "json_each_row" # for string: json_each_row | csv | tsv
//	timeout_seconds = 30
//	max_retries = 3
//	retry_delay = 1                # seconds
//	verbose_logging = false
//	id_column = ""                 # Ferry: add the Iggy message id to each JSON row under this column
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
// insert_format = "row_binary" (upstream's RowBinaryWithDefaults after
// reading the table's columns) is refused at load with a message saying
// it is not built yet; json_each_row inserts the same rows.
package clickhouse
