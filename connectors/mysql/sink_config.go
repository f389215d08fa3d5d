package mysql

import (
	"sort"

	"github.com/ferryhq/ferry/connector"
)

// SinkSpec is the mysql sink's plugin_config; there is no upstream Iggy
// connector for MySQL, so every key is Ferry's.
var SinkSpec = connector.NewSpec(append(connectionFields(),
	connector.NewStringField("table").Require().WithCheck(checkTable).WithExample("iggy_messages").
		WithDoc(`"table" or "database.table"; any characters but NUL (quoted with backticks)`),
	connector.NewIntField("batch_size").Between(1, 10000).WithDefault(1000).WithDoc("most rows per INSERT"),
	connector.NewBoolField("auto_create_table").WithDefault(false).WithDoc("create the table (InnoDB) when it does not exist"),
	connector.NewStringField("id_column").WithDefault("id").WithCheck(checkIdent).
		WithDoc("the column holding the message id as a UUID (CHAR(36)); its unique key makes a replay harmless"),
	connector.NewStringField("payload_column").WithDefault("payload").WithCheck(checkIdent).WithDoc("the payload's column"),
	connector.NewBoolField("include_payload").WithDefault(true).WithDoc("write the payload column"),
	connector.NewEnumField("payload_format", "binary", "text", "json").
		WithAliases(map[string]string{"bytes": "binary", "blob": "binary"}).WithDefault("binary").
		WithDoc("the payload column's type for auto_create_table and how it is sent: binary (LONGBLOB), text (LONGTEXT, must be UTF-8) or json (JSON, must be valid JSON)"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("write iggy_stream, iggy_topic, iggy_partition, iggy_offset and iggy_timestamp"),
	connector.NewStringMapField("columns").WithExample(map[string]string{"user_id": "user.id"}).
		WithDoc(`columns filled from JSON payload fields: column = "path" (gjson syntax); a missing field is NULL`),
	connector.NewEnumField("on_duplicate", "ignore", "update").WithDefault("ignore").
		WithDoc("a message id already in the table: ignore keeps the row (INSERT ... ON DUPLICATE KEY UPDATE id = id), update overwrites it"),
	connector.NewBoolField("verbose_logging").WithDefault(false).WithDoc("log each batch"),
)...).Lint(lintConnection).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	for col, path := range s.StringMap("columns") {
		if _, err := ident(col); err != nil {
			fail("columns", "column name %v", err)
		}
		if path == "" {
			fail("columns."+col, "has an empty path")
		}
	}
	if !s.Bool("include_payload") && len(s.StringMap("columns")) == 0 {
		fail("include_payload", "is false and columns is empty: nothing would be written")
	}
})

type payloadFormat int

const (
	formatBinary payloadFormat = iota
	formatText
	formatJSON
)

type mapping struct{ column, path string }

type sinkSettings struct {
	table, tableRaw   string
	batchSize         int
	autoCreate        bool
	idCol, payloadCol string
	payload, meta     bool
	format            payloadFormat
	mappings          []mapping
	update, verbose   bool
}

func sinkSettingsFrom(s *connector.Settings) *sinkSettings {
	t, _ := tableName(s.String("table"))
	out := &sinkSettings{table: t, tableRaw: s.String("table"), batchSize: s.Int("batch_size"),
		autoCreate: s.Bool("auto_create_table"), idCol: s.String("id_column"), payloadCol: s.String("payload_column"),
		payload: s.Bool("include_payload"), meta: s.Bool("include_metadata"),
		format: map[string]payloadFormat{"binary": formatBinary, "text": formatText, "json": formatJSON}[s.String("payload_format")],
		update: s.String("on_duplicate") == "update", verbose: s.Bool("verbose_logging")}
	m := s.StringMap("columns")
	cols := make([]string, 0, len(m))
	for c := range m {
		cols = append(cols, c)
	}
	sort.Strings(cols)
	for _, c := range cols {
		out.mappings = append(out.mappings, mapping{c, m[c]})
	}
	return out
}
