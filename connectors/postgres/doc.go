// Package postgres is the `postgres` source and sink: PostgreSQL rows and
// changes into Iggy topics, and topics into PostgreSQL tables. A connector
// file's path may be "postgres" or upstream's library name
// (libiggy_connector_postgres_source, libiggy_connector_postgres_sink), and
// upstream's plugin_config keys work unchanged; keys marked Ferry are
// additions.
//
// # Connection (source and sink)
//
//	connection_string = "postgres://user@host:5432/db"   # or the fields:
//	host, port, user (or username), password, database (or dbname), sslmode
//	max_connections = 10
//
// Fields that are set override the connection string's parts, so the
// password can come from IGGY_CONNECTORS_SOURCE_<KEY>_PLUGIN_CONFIG_PASSWORD
// (or ..._SINK_...). Passwords never appear in logs or errors. Sessions
// set DateStyle=ISO, IntervalStyle=iso_8601, bytea_output=hex.
//
// # Source, polling mode (mode = "polling", the default)
//
//	tables = ["users"]            # or custom_query = "SELECT ... $offset ... $limit"
//	tracking_column = "id"        # an increasing column: a sequence or a timestamp
//	primary_key_column = "id"     # breaks ties of tracking values (default tracking_column)
//	initial_offset = "0"          # read rows with tracking values above it
//	batch_size = 1000             # rows per table per poll
//	poll_interval = "10s"         # pause when a poll caught up (a full batch polls again at once)
//	delete_after_read = false     # or processed_column = "is_processed"
//	payload_column, payload_format = "bytea"|"text"|"json_direct"
//	include_metadata = true, snake_case_columns = false
//	max_retries = 3, retry_delay = "1s"   # for the deletes/marks done on Ack
//
// Each row becomes a JSON message {table_name, operation_type: "SELECT",
// timestamp, data, old_data: null} (include_metadata = false sends data
// alone), or, with payload_column, that column's bytes (schema raw, text
// or json). Values map as package pgjson says: exact numbers, RFC 3339
// timestamps, base64 bytea, embedded json/jsonb, nested arrays.
//
// The state is the last tracking value per table (and the last key when
// primary_key_column differs): rows are read in (tracking, key) order
// after it, so a restart resumes with no gap, and only a batch sent but
// not yet saved when the process died is read again. Deleting or marking
// rows happens only in Ack, after the batch is in Iggy and the state is
// saved (if the process dies between the two, those rows were delivered
// and stay, and are not read again). Polling cannot see a row whose
// tracking value is below one
// already read (a transaction that commits late with an earlier id or
// timestamp): use CDC when that matters. Rows whose tracking value is
// NULL are never read. custom_query's placeholders are bound as
// parameters ($table becomes the quoted table name; '$offset' and '$now'
// in quotes, as upstream's examples write them, work too); a custom query
// that uses $offset needs initial_offset.
//
// # Source, CDC mode (mode = "cdc")
//
//	tables = ["users", "orders"]  # published; empty means FOR ALL TABLES
//	publication = "iggy_pub"      # Ferry; created if missing, configured tables added to it
//	replication_slot = "iggy_slot" # created if missing (pgoutput); one per connector
//	snapshot = "initial"          # Ferry; or "never"
//	replica_identity_full = false # Ferry; true sets REPLICA IDENTITY FULL on published tables
//	capture_operations = ["INSERT", "UPDATE", "DELETE"]   # and "TRUNCATE"
//	batch_size = 1000
//
// The server needs wal_level = logical, and the user the REPLICATION
// attribute (and ownership of the tables to create the publication or set
// the replica identity). Each change is a JSON message {table_name,
// schema, operation_type, timestamp (the commit time), lsn (the change's),
// data (the new row, null for DELETE), old_data (the old row)}. Without
// REPLICA IDENTITY FULL, PostgreSQL sends an old row only for DELETE and
// for an UPDATE that changes the key, and then only the key columns; set
// replica_identity_full = true for whole before images. An unchanged
// TOASTed value of an UPDATE is left out of data unless the old row has it.
// The message id of a change is the u128 (transaction LSN << 64 | change
// number): a replayed change keeps its id.
//
// The state is the end LSN of the last transaction delivered, plus how many
// changes of a larger-than-a-batch transaction were delivered; a restart
// streams from there and skips those. The slot's confirmed position moves
// only when a batch is acknowledged (after it is in Iggy and the state is
// saved): standby status updates report the acknowledged LSN and never
// more, so a crash replays and never skips. Keepalive positions outside a
// transaction become state-only batches, so an acknowledged slot can move
// past WAL with nothing published (a quiet table on a busy server does not
// pin WAL forever).
//
// The initial snapshot: when the source creates the slot, it exports the
// slot's snapshot and reads every published table in it (REPEATABLE READ,
// pages in primary-key order, ctid order for tables without one); the
// stream starts at the slot's consistent point, so the snapshot and the
// stream meet with neither a gap nor an overlap. Snapshot rows are
// messages with operation_type "SNAPSHOT" and the consistent point as lsn.
// When the snapshot must be taken without the exported one (a restart in
// the middle of it, or a slot that exists with no saved state), a new
// snapshot continues after the last row delivered and the stream still
// starts at the slot's position: rows changed meanwhile may be read in
// their newer state and their changes still follow, so consumers see
// every change at least once and end in the right state. PostgreSQL
// 15's publication row filters and column lists are not applied to the
// snapshot. Decommissioning a connector should drop its slot
// (SELECT pg_drop_replication_slot('iggy_slot')): a slot keeps WAL.
//
// # Sink
//
//	target_table = "iggy_messages"   # "schema.table", or target_schema (Ferry)
//	auto_create_table = false
//	payload_format = "bytea"         # or "json" (jsonb) or "text"
//	include_metadata = true, include_checksum = true, include_origin_timestamp = true
//	batch_size = 1000                # rows per INSERT (upstream's default is 100)
//	field_mappings = { user_id = "user.id" }     # Ferry: JSON fields to columns
//	field_types = { user_id = "bigint" }         # Ferry: their types for auto_create_table (default jsonb)
//	include_payload = true           # Ferry
//	dedupe_by = "id"                 # Ferry; or "offset" (stream, topic, partition, offset)
//	insert_method = "copy"           # Ferry; or "values" (multi-row INSERT)
//	upsert_by_key = false, key_column = "key"  # Ferry: one row per message key, the latest offset winning (docs/keys.md)
//	max_retries = 3, retry_delay = "1s"
//
// The table is upstream's: id NUMERIC(39,0) PRIMARY KEY (the message id
// as a u128), iggy_offset, iggy_timestamp, iggy_stream, iggy_topic,
// iggy_partition_id, iggy_checksum, iggy_origin_timestamp, payload,
// created_at; mapped fields add their columns and are converted by
// PostgreSQL (jsonb_populate_record). Each Consume is one transaction: the
// messages are COPYed into a per-connection temporary table and moved
// with INSERT ... SELECT ... ON CONFLICT DO NOTHING (or, with
// insert_method = "values", multi-row INSERTs), so a batch replayed after
// a crash adds nothing twice: at-least-once delivery from Iggy gives each
// message one row. Open warns when the table has no unique index on the
// dedupe columns. Messages PostgreSQL rejects (bad JSON, a failed check)
// are reported per message as permanent failures (the runtime's dead
// letter path) and the rest is written. Identifiers are quoted; message
// contents only ever travel as parameters or COPY data.
package postgres
