package postgres

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// SinkSpec is the postgres sink's plugin_config. Keys without a "Ferry"
// note are upstream's (libiggy_connector_postgres_sink).
var SinkSpec = connector.NewSpec(append(connectionFields(10),
	connector.NewStringField("target_table").Require().WithExample("iggy_messages").
		WithDoc(`"table" or "schema.table"`),
	connector.NewIntField("batch_size").Between(1, 5000).WithDefault(1000).
		WithDoc("most rows per INSERT (upstream's default is 100)"),
	connector.NewBoolField("auto_create_table").WithDefault(false).WithDoc("create the table when it does not exist"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("write iggy_offset, iggy_timestamp, iggy_stream, iggy_topic and iggy_partition_id"),
	connector.NewBoolField("include_checksum").WithDefault(true).WithDoc("write iggy_checksum"),
	connector.NewBoolField("include_origin_timestamp").WithDefault(true).WithDoc("write iggy_origin_timestamp"),
	connector.NewEnumField("payload_format", "bytea", "json", "text").
		WithAliases(map[string]string{"raw": "bytea", "jsonb": "json"}).WithDefault("bytea").
		WithDoc("the payload column's type: bytea, json (jsonb) or text"),
	connector.NewBoolField("verbose_logging").WithDefault(false).WithDoc("log each batch"),
	connector.NewIntField("max_retries").Between(0, math.MaxUint32).WithDefault(3).
		WithDoc("retries of a failed INSERT inside one Consume"),
	connector.NewDurationField("retry_delay").WithDefault(time.Second).WithDoc("wait between those retries"),
	connector.NewStringField("target_schema").
		WithDoc("Ferry: qualifies target_table, which is then taken whole, dots included"),
	connector.NewStringMapField("field_mappings").WithExample(map[string]string{"user_id": "user.id"}).
		WithDoc(`Ferry: columns filled from JSON payload fields: column = "path" (gjson syntax)`),
	connector.NewMapField("field_types", connector.NewStringField("").WithCheck(checkSQLType)).
		WithDoc("Ferry: SQL types of the mapped columns for auto_create_table; default jsonb"),
	connector.NewBoolField("include_payload").WithDefault(true).WithDoc("Ferry: write the payload column"),
	connector.NewEnumField("dedupe_by", "id", "offset").WithDefault("id").
		WithDoc("Ferry: the unique key that makes replays harmless: the message id, or (stream, topic, partition, offset)"),
	connector.NewEnumField("insert_method", "copy", "values").WithDefault("copy").
		WithDoc("Ferry: copy (COPY into a temporary table, then INSERT ... ON CONFLICT DO NOTHING) or values (multi-row INSERT)"),
	connector.NewBoolField("upsert_by_key").WithDefault(false).
		WithDoc(`Ferry: one row per message key (the "key" header, docs/keys.md): INSERT ... ON CONFLICT (key_column) DO UPDATE, the higher iggy_offset winning; a deletion marker deletes the row`),
	connector.NewStringField("key_column").WithDefault("key").
		WithDoc("Ferry: the text column that holds the key with upsert_by_key, unique (the primary key with auto_create_table)"),
)...).Lint(lintConnection).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	mappings, types := s.StringMap("field_mappings"), s.StringMap("field_types")
	for col, path := range mappings {
		if col == "" || path == "" {
			fail("field_mappings", "has an empty column name or path (%q = %q)", col, path)
		}
	}
	for col := range types {
		if _, ok := mappings[col]; !ok {
			fail("field_types."+col, "names no column of field_mappings")
		}
	}
	if !s.Bool("include_payload") && len(mappings) == 0 {
		fail("include_payload", "is false and field_mappings is empty: nothing would be written")
	}
	if s.String("dedupe_by") == "offset" && !s.Bool("include_metadata") {
		fail("dedupe_by", `"offset" needs include_metadata = true`)
	}
	lintUpsert(s, fail) // sink_upsert.go
})

type sinkPayload int

const (
	payloadBytea sinkPayload = iota
	payloadJSON
	payloadText
)

// sinkSettings is a validated SinkConfig with defaults applied.
type sinkSettings struct {
	table           []string // identifier parts
	batchSize       int
	autoCreate      bool
	meta, checksum  bool
	origin, payload bool
	format          sinkPayload
	mappings        []mapping
	dedupeByOffset  bool
	copy            bool
	verbose         bool
	maxRetries      int
	retryDelay      time.Duration
	// upsert writes one row per key, in keyColumn (sink_upsert.go).
	upsert    bool
	keyColumn string
}

type mapping struct {
	column, path, sqlType string
}

// sqlType accepts type names such as "bigint", "numeric(10, 2)",
// "timestamp with time zone" and "text[]": letters, digits, spaces, one
// optional (n[, m]) and [] suffixes.
var sqlType = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_ ]*(\(\s*\d+\s*(,\s*\d+\s*)?\))?(\s*\[\])*$`)

func checkSQLType(v any) error {
	if !sqlType.MatchString(v.(string)) {
		return fmt.Errorf("expected a type name such as bigint, text or numeric(10, 2), got %q", v)
	}
	return nil
}

// sinkSettingsFrom is the sink's settings from its parsed spec.
func sinkSettingsFrom(set *connector.Settings) *sinkSettings {
	s := &sinkSettings{batchSize: set.Int("batch_size"), autoCreate: set.Bool("auto_create_table"),
		meta: set.Bool("include_metadata"), checksum: set.Bool("include_checksum"),
		origin: set.Bool("include_origin_timestamp"), payload: set.Bool("include_payload"),
		format:         map[string]sinkPayload{"bytea": payloadBytea, "json": payloadJSON, "text": payloadText}[set.String("payload_format")],
		dedupeByOffset: set.String("dedupe_by") == "offset", copy: set.String("insert_method") == "copy",
		verbose: set.Bool("verbose_logging"), maxRetries: set.Int("max_retries"), retryDelay: set.Duration("retry_delay"),
		upsert: set.Bool("upsert_by_key"), keyColumn: set.String("key_column")}
	if schema := set.String("target_schema"); schema != "" {
		s.table = []string{schema, set.String("target_table")}
	} else {
		s.table = tableIdent(set.String("target_table"))
	}
	mappings, types := set.StringMap("field_mappings"), set.StringMap("field_types")
	cols := make([]string, 0, len(mappings))
	for col := range mappings {
		cols = append(cols, col)
	}
	sort.Strings(cols)
	for _, col := range cols {
		s.mappings = append(s.mappings, mapping{column: col, path: mappings[col], sqlType: firstNonEmpty(types[col], "jsonb")})
	}
	return s
}
