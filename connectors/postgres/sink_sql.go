package postgres

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// stageTable is the per-connection temporary table of insert_method =
// "copy".
const stageTable = "ferry_sink_stage"

// recColumn carries the mapped fields of a message as one jsonb value.
const recColumn = "ferry_rec"

// sinkColumn is one value written per message.
type sinkColumn struct {
	name    string // in the target table (and the stage)
	sqlType string
	// mapped marks the jsonb record of mapped fields, which is not a
	// target column itself.
	mapped bool
}

// columns lists the values each message gives, in order.
func (s *sinkSettings) columns() []sinkColumn {
	cols := []sinkColumn{{name: "id", sqlType: "numeric"}}
	if s.meta {
		cols = append(cols,
			sinkColumn{name: "iggy_offset", sqlType: "bigint"},
			sinkColumn{name: "iggy_timestamp", sqlType: "timestamptz"},
			sinkColumn{name: "iggy_stream", sqlType: "text"},
			sinkColumn{name: "iggy_topic", sqlType: "text"},
			sinkColumn{name: "iggy_partition_id", sqlType: "integer"})
	}
	if s.checksum {
		cols = append(cols, sinkColumn{name: "iggy_checksum", sqlType: "bigint"})
	}
	if s.origin {
		cols = append(cols, sinkColumn{name: "iggy_origin_timestamp", sqlType: "timestamptz"})
	}
	if s.payload {
		cols = append(cols, sinkColumn{name: "payload", sqlType: s.payloadType()})
	}
	if len(s.mappings) > 0 {
		cols = append(cols, sinkColumn{name: recColumn, sqlType: "jsonb", mapped: true})
	}
	if s.upsert {
		cols = append(cols, sinkColumn{name: s.keyColumn, sqlType: "text"})
	}
	return cols
}

func (s *sinkSettings) payloadType() string {
	switch s.format {
	case payloadJSON:
		return "jsonb"
	case payloadText:
		return "text"
	}
	return "bytea"
}

func (s *sinkSettings) target() string { return pgx.Identifier(s.table).Sanitize() }

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// createTableSQL is upstream's table layout (id numeric(39,0) primary
// key, the iggy_* columns, payload, created_at) plus the mapped columns.
func (s *sinkSettings) createTableSQL() string {
	var defs []string
	idDef := "id NUMERIC(39, 0) PRIMARY KEY"
	if s.dedupeByOffset || s.upsert {
		idDef = "id NUMERIC(39, 0)"
	}
	defs = append(defs, idDef)
	for _, c := range s.columns()[1:] {
		switch {
		case c.mapped:
			for _, m := range s.mappings {
				defs = append(defs, quote(m.column)+" "+m.sqlType)
			}
		case s.upsert && c.name == s.keyColumn:
			defs = append(defs, quote(c.name)+" TEXT PRIMARY KEY")
		case c.sqlType == "timestamptz":
			defs = append(defs, c.name+" TIMESTAMP WITH TIME ZONE")
		default:
			defs = append(defs, c.name+" "+strings.ToUpper(c.sqlType))
		}
	}
	defs = append(defs, "created_at TIMESTAMP WITH TIME ZONE DEFAULT NOW()")
	if s.dedupeByOffset {
		defs = append(defs, "UNIQUE (iggy_stream, iggy_topic, iggy_partition_id, iggy_offset)")
	}
	return "CREATE TABLE IF NOT EXISTS " + s.target() + " (\n  " + strings.Join(defs, ",\n  ") + "\n)"
}

// stageSQL creates the temporary table COPY writes into.
func (s *sinkSettings) stageSQL() string {
	cols := s.columns()
	defs := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = quote(c.name) + " " + c.sqlType
	}
	return fmt.Sprintf("CREATE TEMPORARY TABLE IF NOT EXISTS %s (%s) ON COMMIT DELETE ROWS", stageTable, strings.Join(defs, ", "))
}

// insertSQL is INSERT ... SELECT from source (the stage table or a VALUES
// list, aliased "s" with the columns' names); mapped fields go
// through jsonb_populate_record, so PostgreSQL converts each to its
// column's type. Values only ever arrive as parameters or COPY data.
func (s *sinkSettings) insertSQL(source string) string {
	var targets, exprs []string
	from := source
	for _, c := range s.columns() {
		if c.mapped {
			for _, m := range s.mappings {
				targets = append(targets, quote(m.column))
				exprs = append(exprs, "r."+quote(m.column))
			}
			from += " CROSS JOIN LATERAL jsonb_populate_record(NULL::" + s.target() + ", s." + quote(recColumn) + ") AS r"
			continue
		}
		targets = append(targets, quote(c.name))
		exprs = append(exprs, "s."+quote(c.name))
	}
	if s.upsert {
		return fmt.Sprintf("INSERT INTO %s AS t (%s) SELECT %s FROM %s %s",
			s.target(), strings.Join(targets, ", "), strings.Join(exprs, ", "), from, s.upsertClause(targets))
	}
	return fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s ON CONFLICT DO NOTHING",
		s.target(), strings.Join(targets, ", "), strings.Join(exprs, ", "), from)
}

// valuesSource is "(VALUES ($1::t, ...), ...) AS s(names)" for n rows.
func (s *sinkSettings) valuesSource(n int) string {
	cols := s.columns()
	var b strings.Builder
	b.WriteString("(VALUES ")
	p := 1
	for r := 0; r < n; r++ {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for i, c := range cols {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "$%d::%s", p, c.sqlType)
			p++
		}
		b.WriteByte(')')
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = quote(c.name)
	}
	b.WriteString(") AS s(" + strings.Join(names, ", ") + ")")
	return b.String()
}

// stageSource is the stage table as insertSQL's source.
const stageSource = stageTable + " AS s"

// dedupeColumns are the columns whose unique index makes inserts
// idempotent.
func (s *sinkSettings) dedupeColumns() []string {
	if s.upsert {
		return []string{s.keyColumn}
	}
	if s.dedupeByOffset {
		return []string{"iggy_stream", "iggy_topic", "iggy_partition_id", "iggy_offset"}
	}
	return []string{"id"}
}
