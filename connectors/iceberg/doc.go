// Package iceberg is the `iceberg` sink: it appends the JSON messages of
// Iggy topics to Apache Iceberg tables with iceberg-go (v0.7.0), one
// snapshot per table per batch. It reads upstream's Iceberg sink
// configuration (libiggy_connector_iceberg_sink):
//
//	tables = ["nyc.users"]          # required; "<namespace>.<table>", must exist
//	catalog_type = "rest"           # required: rest | glue (refused) | Ferry's sql | Ferry's hadoop
//	warehouse = "warehouse"         # required
//	uri = "http://localhost:8181"   # rest: the catalog; sql: a postgres:// DSN
//	dynamic_routing = false
//	dynamic_route_field = ""        # with dynamic_routing: the field naming the table
//	store_url = "http://localhost:9000"
//	store_access_key_id = "admin"
//	store_secret_access_key = "…"   # a secret
//	store_region = "us-east-1"
//	store_class = "s3"              # required: s3 | Ferry's fs (gcs, azdls, oss: refused)
//
// and Ferry's keys: store_path_style (true), credential and token (rest,
// secrets), catalog_name ("ferry", sql), commit_retries (20), timeout
// ("60s"). Upstream requires every key; Ferry defaults the ones a
// configuration can do without (uri stays required for rest and sql).
//
// Catalogs. catalog_type "rest" is iceberg-go's REST catalog (uri, the
// warehouse name, the store_* keys as s3.* properties); no REST catalog
// server runs in Ferry's tests, so it is built but untested here. "glue"
// is refused at load (the AWS Glue SDK is not linked). Ferry adds "sql":
// iceberg-go's SQL catalog (the JDBC-catalog tables iceberg_tables and
// iceberg_namespace_properties, created if missing) in the PostgreSQL
// database uri names, through pgx's database/sql driver; SQLite is not
// offered because no SQLite driver module is in this build (PostgreSQL
// is also the one that survives a crash with concurrent writers). And
// "hadoop": the catalog kept in the warehouse directory (local
// filesystem only, store_class = "fs"). For sql and hadoop, warehouse is
// a location: s3://bucket/path, file:///path, or a bare name taken as a
// bucket (s3) or a directory (fs).
//
// Rows. A payload must be a JSON object: its top-level fields map to
// the table's columns by name, unknown fields are ignored and missing
// optional columns are null, as upstream's Arrow JSON reader does. A
// payload that is not an object, lacks a required column, or holds a
// value of the wrong type is a permanent error with the reason (the
// runtime dead-letters it) while the rest of the batch is written;
// upstream fails the whole batch instead. With dynamic_routing, a
// message without the field, or naming a table that is not a plain name
// or does not exist, is dead-lettered the same way (upstream skips it).
// Tables are never created (upstream does not create them either): a
// static table that does not exist fails Open naming it (upstream skips
// it and writes nowhere).
//
// Delivery is exactly-once per table. Each commit stores, in the
// snapshot summary, the batch's last Iggy offset under
// "ferry.iggy-offset.<connector key>/<stream>/<topic>/<partition>" and
// carries the other partitions' offsets forward. Before appending, the
// sink reloads the table, reads those offsets (from the nearest snapshot
// that has them, so other writers' snapshots in between do not hide
// them) and drops the messages at or below the stored offset; so a batch
// delivered again after a crash between the commit and the runtime's
// offset commit adds nothing. The commit is pinned to the snapshot it
// was planned on: a concurrent commit fails it, and the sink reloads and
// plans again (commit_retries times). Renaming the connector key loses
// the stored offsets (a replay then repeats rows once). With several
// tables, each is exactly-once on its own; a record one table rejects
// is dead-lettered though another may hold it. An expired snapshot
// history with no Ferry snapshot left means no stored offsets.
//
// Tested against iceberg-go v0.7.0's SQL catalog on PostgreSQL
// (internal/pgtest: the test server or a private cluster for the
// outage test) with file:// warehouses, and its hadoop catalog; reads
// back with iceberg-go scans. The S3 warehouse (iceberg-go's gocloud s3
// backend with upstream's store_* keys) has a test on the shared
// versitygw server (internal/s3test, FERRY_TEST_S3_URL); it was skipped
// where this was written, which had no versitygw binary. The REST
// catalog is untested: no REST catalog server runs in Ferry's tests.
package iceberg
