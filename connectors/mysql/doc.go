// Package mysql owns Ferry's MySQL/MariaDB connectors (issue 15): the
// sink "mysql" (alias "mariadb"), which writes messages to a table, and
// the source "mysql", which reads a table's new rows by a tracking column
// (mode = "polling", the default) or MariaDB's row changes from the
// binary log (mode = "cdc"). SQL goes through
// github.com/go-sql-driver/mysql v1.10.1 over database/sql; the binlog
// protocol through vitess.io/vitess/go/mysql v0.24.4 (see CDC mode). There is no upstream Iggy connector for MySQL, so every
// key is Ferry's, named as the PostgreSQL connectors name them (dsn or
// connection_string, host, port, user or username, password, database,
// table, batch_size, tracking_column, ...).
//
// Tested against MariaDB 10.11 (Debian's 10.11.14); see
// internal/mysqltest. MySQL proper was not tested.
//
// # Source, CDC mode (mode = "cdc")
//
//	tables = ["users", "shop.orders"]   # empty: every table of the DSN's database
//	snapshot = "initial"                # or "never": stream from the current position only
//	capture_operations = ["INSERT", "UPDATE", "DELETE"]
//	server_id = 1174405121              # default: a random id from 1174405120 up
//	batch_size = 1000
//
// The server must be MariaDB (10.11 tested) with log_bin,
// binlog_format=ROW and binlog_row_image=FULL (Open says which is
// missing); binlog_row_metadata=FULL is recommended, and log_bin_compress
// must be OFF (compressed events are refused with an error, never
// skipped). The user needs REPLICATION SLAVE and SELECT on the tables
// (tests ran as root; the consistent snapshot takes no lock). The polling keys (tracking_column,
// delete_after_read, ...) are refused in this mode.
//
// Each row change is a JSON message in the postgres source's shape:
// {table_name, schema (the database), operation_type (INSERT, UPDATE,
// DELETE, or SNAPSHOT), timestamp (the transaction's, seconds, from the
// GTID event), gtid (the transaction's, domain-server-seq), data (the new
// row, null for DELETE), old_data (the old row, for UPDATE and DELETE;
// null for INSERT)}. Values map as the polling source's do: numbers as
// numbers (BIGINT UNSIGNED and DECIMAL exact), binary strings, BLOBs and
// BIT as base64, DATETIME/TIMESTAMP/DATE in RFC 3339 UTC, ENUM and SET by
// name (when the names are known: binlog_row_metadata=FULL, or
// information_schema), MariaDB's JSON (a LONGTEXT) as a string. Text in a
// charset other than UTF-8 is passed as its bytes (invalid sequences
// become U+FFFD in the JSON).
//
// Column names come from the TABLE_MAP event's optional metadata when
// the server writes it (binlog_row_metadata=FULL), so changes read long
// after an ALTER TABLE still carry the columns they were made with. With
// MINIMAL or NO_LOG, names come from information_schema.COLUMNS, read
// again after every QUERY (DDL) event and whenever a TABLE_MAP's column
// count differs; an event older than the table's current shape is then
// refused with an error asking for binlog_row_metadata=FULL, not guessed.
//
// Message ids are the u128 (GTID seq << 64 | domain << 32 | change number
// in its transaction); snapshot rows a UUID v5 of the snapshot's GTID
// position, the table and the row's primary key (its place in the read
// for a table without one). The state (saved by the runtime once a batch
// is in Iggy) is the GTID position of the complete transactions
// delivered, plus the GTID of a partly delivered transaction and how many
// of its changes of captured tables were delivered: a restart resumes the
// binlog dump (@slave_connect_state) after the last delivered change,
// never before the last acknowledged one, never after an unacknowledged
// one, and a replayed change keeps its id, so with deduplication by id
// (ferry serve --dedup-max-entries, or an idempotent sink) each change
// is delivered exactly once. That count depends on tables: change tables
// only between transactions. MariaDB keeps no position for a binlog
// reader: the saved state is the position, and binlogs purged past it
// cannot be read (the dump fails with the server's error). After a lost
// connection the source reconnects from the last batch polled (the
// runtime resends unacknowledged batches itself). A heartbeat each second
// keeps a quiet connection known alive; 15 s of silence reconnects.
//
// The initial snapshot reads each table in a REPEATABLE READ transaction
// WITH CONSISTENT SNAPSHOT, pages in primary-key order; its binlog
// position (binlog_snapshot_file/position, as GTIDs by BINLOG_GTID_POS)
// is where streaming starts, so snapshot and stream meet with neither gap
// nor overlap. Restarted mid-snapshot, a new snapshot continues after the
// last row delivered and streaming still starts at the first snapshot's
// position: rows changed meanwhile may be read in their newer state, and
// their changes follow. A table without a primary key is read again from
// its start after such a restart.
//
// vitess's protocol code is used because github.com/go-sql-driver/mysql
// has no replication protocol and github.com/go-mysql-org/go-mysql cannot
// be fetched here. Its limits found on MariaDB 10.11: it does not read
// the TABLE_MAP's optional metadata beyond collations (Ferry decodes
// names, signedness, charsets and ENUM/SET values itself), does not know
// MariaDB's compressed events, returns ENUM and SET as numbers, trusts
// the lengths inside events (a malformed event panics, turned into an
// error here) and loops forever on a rows event whose images name no
// column (refused here). Tested: the shapes above, ALTER TABLE
// mid-stream, a nacked batch, ten kill -9s of the runtime with large
// transactions (exactly once, commit order), a server halted and
// resumed, hostile names and values. MySQL proper is not supported in CDC
// mode (Open refuses it): its GTIDs differ and it was not tested.
//
// # Sink
//
// Rows are written by multi-row INSERT statements (batch_size rows each,
// fewer when the columns would exceed 65535 placeholders), every value a
// placeholder and every identifier validated (no NUL, at most 64
// characters, no trailing space) and quoted with backticks. Each row
// carries the message id (a UUID in id_column, the table's primary key)
// and the statement ends with ON DUPLICATE KEY UPDATE (id = id, or every
// column with on_duplicate = "update"), so a batch delivered again after
// a crash or an outage adds no row: the table holds each message once.
// The session runs in strict mode (sql_mode STRICT_ALL_TABLES unless the
// DSN sets one), so a value a column cannot hold is refused rather than
// truncated. When a statement is refused for its data, the sink inserts
// that statement's rows one by one and reports the rows the server
// refuses as permanent failures carrying the server's message (the
// runtime dead-letters them); the rest are written. A server that is down
// (connection refused or lost, too many connections, deadlock, shutdown)
// is retried max_retries times and then reported Unavailable: nothing is
// dead-lettered and the runtime delivers the batch again.
//
// # Source, polling mode (mode = "polling", the default)
//
//	tables = ["users", "shop.orders"]   # or table = "users"; or custom_query
//	tracking_column = "id"              # grows with each new row
//	primary_key_column = "id"           # unique; breaks ties of tracking values (default tracking_column)
//	initial_offset = "0"                # the first run reads rows whose tracking value is above it
//	batch_size = 1000, poll_interval = "10s"
//	delete_after_read = false           # or processed_column = "done"
//	payload_column = "body"             # send its value instead of a JSON record
//	custom_query = "SELECT ... WHERE id > $offset ORDER BY id LIMIT $limit"
//
// The source polls each table of tables in turn: SELECT * ... WHERE
// (tracking_column, primary_key_column) is after the last row read (or,
// on the first run, tracking_column > initial_offset when it is set),
// ORDER BY both, LIMIT batch_size. The tracking column must grow with each
// new row (an AUTO_INCREMENT id, or an insert time with ties broken by
// the key); a row inserted later with a smaller value, or updated in
// place, is not read; nor is a row whose transaction commits after a row
// with a greater value was read (concurrent writers with AUTO_INCREMENT
// can do that: poll a column set at commit, or accept the gap). The batch's State is every table's last row, saved
// by the runtime once the batch is in Iggy. A message is a JSON record of
// the row (numbers as numbers, binary columns as base64, the rest as
// strings; MariaDB's JSON columns are LONGTEXT and come as strings), or
// payload_column's value as it is. Its id is a UUID v5 of the table and
// the row's key, so a row read again after a crash between sending and
// saving the state carries the same id: the repeat is a duplicate only a
// consumer that deduplicates by id removes. delete_after_read (DELETE)
// and processed_column (UPDATE ... = 1, and such rows are skipped) act in
// Ack, after the batch is in Iggy; a crash before Ack leaves the rows,
// which the saved position skips anyway.
//
// Tracking and key values are bound as text, which MariaDB converts to
// the column's type for the comparison (BIGINT ids near 2^63 compare
// exactly: tried on 10.11).
//
// # Source, custom query (custom_query set)
//
// custom_query replaces the generated SELECT, with the postgres source's
// placeholders: $table becomes the quoted name of a table of tables (the
// query runs once per table, each with its own position; without $table
// it runs once, and tables may name at most one table); $offset is the
// last row's tracking_column value (initial_offset before the first row,
// so a query with $offset needs initial_offset), $limit is batch_size,
// $now the current UTC time (a DATETIME) and $now_unix its Unix seconds.
// Ferry adds $key, the last row's primary_key_column value (NULL before
// the first row), to break ties of the tracking value as the table mode
// does:
//
//	custom_query = """SELECT e.id, e.at, u.name FROM events e JOIN users u ON u.id = e.user_id
//	  WHERE e.at > $offset OR (e.at = $offset AND e.id > $key) ORDER BY e.at, e.id LIMIT $limit"""
//
// Every placeholder but $table is sent as a ? parameter of a prepared
// statement: no value, saved or configured, ever becomes SQL text.
// Placeholders are whole words ("$offsets" is left alone) outside
// backticks (`$offset` is a column); '$offset' or
// "$offset" in quotes, as upstream's examples write them, is the
// parameter too. The query must order its rows by what $offset (and
// $key) compare, and its result must hold tracking_column (the position
// is the last row's value; rows whose value is NULL leave it unchanged);
// columns are named as the result names them (aliases). A query without
// $offset keeps no position and reads whatever it selects at every poll,
// which suits a query that selects rows not yet processed. Message ids
// are a UUID v5 of the table (empty without tables) and
// primary_key_column's value, which should be unique in the result;
// without that column in the result, ids are left to the runtime.
// delete_after_read and processed_column need tables to name the one
// table they act on (as in postgres): Ack deletes or marks the rows
// whose primary_key_column (a column of that table) holds the batch's
// values; the source adds no filter to a custom query, so with
// processed_column the query must skip marked rows itself (WHERE NOT
// done). custom_query and initial_offset are refused in CDC mode.
package mysql
