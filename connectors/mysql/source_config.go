package mysql

import (
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// SourceSpec is the mysql source's plugin_config (polling and CDC); every
// key is Ferry's, named as the postgres source names them.
var SourceSpec = connector.NewSpec(append(append(connectionFields(),
	connector.NewEnumField("mode", "polling", "cdc").WithDefault("polling").
		WithDoc("polling: query tables by a tracking column; cdc: read row changes from the binary log (MariaDB)"),
	connector.NewListField("tables", connector.NewStringField("").WithCheck(checkTable)).WithExample([]string{"users"}).
		WithDoc(`tables to read: "table" or "database.table"; cdc: empty means every table of the database`),
	connector.NewStringField("table").WithCheck(checkTable).WithDoc("one more table, a shorthand for tables = [table]"),
	connector.NewStringField("tracking_column").WithDefault("id").WithCheck(checkIdent).
		WithDoc("a column whose values grow with each new row (an AUTO_INCREMENT id, an insert time); rows are read in its order"),
	connector.NewStringField("primary_key_column").WithCheck(checkIdent).
		WithDoc("a unique column that breaks ties of tracking values and makes message ids; default tracking_column"),
	connector.NewIntField("batch_size").Between(1, 100000).WithDefault(1000).WithDoc("most rows per poll"),
	connector.NewDurationField("poll_interval").WithDefault(10*time.Second).WithDoc("wait when a poll found no new row"),
	connector.NewBoolField("delete_after_read").WithDefault(false).WithDoc("delete rows once they are in Iggy"),
	connector.NewStringField("processed_column").WithCheck(checkIdent).
		WithDoc("a boolean column set to 1 once a row is in Iggy; rows where it is 1 are not read"),
	connector.NewStringField("payload_column").WithCheck(checkIdent).
		WithDoc("send this column's value as the payload instead of a JSON record of the row"),
	connector.NewStringField("initial_offset").AcceptNumbers().
		WithDoc("the first run reads rows whose tracking value is above it"),
	connector.NewStringField("custom_query").
		WithDoc("replaces the generated query; $table becomes the quoted table name, $offset, $key, $limit, $now and $now_unix are bound as parameters"),
), cdcFields()...)...).Lint(lintConnection).Lint(lintCDC).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	if s.String("mode") == "cdc" {
		return
	}
	tables := len(s.Strings("tables"))
	if s.String("table") != "" {
		tables++
	}
	query := s.String("custom_query")
	uses := placeholders(query)
	afterRead := s.Bool("delete_after_read") || s.String("processed_column") != ""
	switch {
	case tables == 0 && query == "":
		fail("tables", "required key is missing (or set table, or custom_query)")
	case query == "":
	case strings.TrimSpace(query) == "":
		fail("custom_query", "is blank")
	case uses["$table"] && tables == 0:
		fail("custom_query", "uses $table but tables is empty")
	case !uses["$table"] && tables > 1:
		fail("custom_query", "has no $table, so it would run once per table and read the same rows each time: use $table, or name one table")
	case uses["$offset"] && !s.Has("initial_offset"):
		fail("initial_offset", "required when custom_query uses $offset (it is the value before the first row)")
	case uses["$key"] && !uses["$offset"]:
		fail("custom_query", "uses $key without $offset: $key breaks ties of the tracking value $offset")
	case afterRead && tables == 0:
		fail("custom_query", "with delete_after_read or processed_column needs tables (or table) to name the table")
	}
	if s.Bool("delete_after_read") && s.String("processed_column") != "" {
		fail("processed_column", "cannot be set with delete_after_read = true")
	}
})

type sourceSettings struct {
	tables        []string // as given
	tracking, pk  string   // quoted
	batchSize     int
	pollInterval  time.Duration
	deleteAfter   bool
	processed     string // quoted, or ""
	payloadColumn string // as given, or ""
	initialOffset *string
	customQuery   string          // custom_query as given, or ""
	uses          map[string]bool // the placeholders custom_query uses
}

func sourceSettingsFrom(s *connector.Settings) *sourceSettings {
	q := func(n string) string { v, _ := ident(n); return v }
	out := &sourceSettings{tables: s.Strings("tables"), tracking: q(s.String("tracking_column")),
		batchSize: s.Int("batch_size"), pollInterval: s.Duration("poll_interval"),
		deleteAfter: s.Bool("delete_after_read"), payloadColumn: s.String("payload_column")}
	if t := s.String("table"); t != "" {
		out.tables = append(out.tables, t)
	}
	if s.Has("initial_offset") {
		v := s.String("initial_offset")
		out.initialOffset = &v
	}
	if out.customQuery = s.String("custom_query"); out.customQuery != "" {
		out.uses = placeholders(out.customQuery)
		if len(out.tables) == 0 {
			out.tables = []string{""} // the query names its tables itself
		}
	}
	out.pk = out.tracking
	if p := s.String("primary_key_column"); p != "" {
		out.pk = q(p)
	}
	if p := s.String("processed_column"); p != "" {
		out.processed = q(p)
	}
	return out
}
