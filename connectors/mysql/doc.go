// Package mysql owns Ferry's MySQL/MariaDB connectors (issue 15): the
// sink "mysql" (alias "mariadb"), which writes messages to a table, and
// the polling source "mysql", which reads a table's new rows by a
// tracking column. Both use github.com/go-sql-driver/mysql v1.10.1 over
// database/sql. There is no upstream Iggy connector for MySQL, so every
// key is Ferry's, named as the PostgreSQL connectors name them (dsn or
// connection_string, host, port, user or username, password, database,
// table, batch_size, tracking_column, ...).
//
// Tested against MariaDB 10.11 (Debian's 10.11.14); see
// internal/mysqltest. MySQL proper was not tested.
//
// Binlog change data capture is not built: only polling.
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
// # Source
//
// The source polls each table of tables in turn: SELECT * ... WHERE
// (tracking_column, primary_key_column) is after the last row read,
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
package mysql
