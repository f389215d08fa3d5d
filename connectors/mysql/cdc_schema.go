package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"vitess.io/vitess/go/mysql/binlog"
)

// schemaCache holds the columns of tables as information_schema reports
// them, for TABLE_MAP events without column names (binlog_row_metadata
// MINIMAL or NO_LOG). An entry is read again after a QUERY event (DDL)
// on its database, and when a TABLE_MAP's column count differs from it.
type schemaCache struct {
	db     *sql.DB
	tables map[[2]string][]infoColumn
}

// infoColumn is one row of information_schema.COLUMNS.
type infoColumn struct {
	name, dataType, columnType string
	charset                    sql.NullString
}

func newSchemaCache(db *sql.DB) *schemaCache {
	return &schemaCache{db: db, tables: map[[2]string][]infoColumn{}}
}

// forget drops the cached tables of database (all when "").
func (s *schemaCache) forget(database string) {
	for k := range s.tables {
		if database == "" || k[0] == database {
			delete(s.tables, k)
		}
	}
}

func (s *schemaCache) read(ctx context.Context, database, table string) ([]infoColumn, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, database, table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s.%s: %w", database, table, err)
	}
	defer rows.Close()
	var out []infoColumn
	for rows.Next() {
		var c infoColumn
		if err := rows.Scan(&c.name, &c.dataType, &c.columnType, &c.charset); err != nil {
			return nil, fmt.Errorf("columns of %s.%s: %w", database, table, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("columns of %s.%s: %w", database, table, err)
	}
	return out, nil
}

// columns returns the columns of a TABLE_MAP with binlog types and
// metadata, named by the event's optional metadata when it has names,
// else by information_schema.
func (s *schemaCache) columns(ctx context.Context, database, table string, types []byte, metas []uint16, opt *tableMeta) ([]column, error) {
	cols := make([]column, len(types))
	for i, t := range types {
		cols[i] = column{typ: t, rt: realType(t, metas[i]), meta: metas[i]}
	}
	if opt != nil && opt.names != nil {
		for i := range cols {
			c := &cols[i]
			c.name, c.unsigned, c.enum, c.set = opt.names[i], opt.unsigned[i], opt.enums[i], opt.sets[i]
			c.binary = opt.binary[i] || (!opt.hasChars && isBlobType(c.rt))
			c.prepare("")
		}
		return cols, nil
	}
	key := [2]string{database, table}
	info, ok := s.tables[key]
	if !ok || len(info) != len(types) {
		var err error
		if info, err = s.read(ctx, database, table); err != nil {
			return nil, err
		}
		s.tables[key] = info
	}
	if len(info) != len(types) {
		return nil, fmt.Errorf("table %s.%s: the binlog event has %d columns, information_schema %d (the table changed since the event); "+
			"set binlog_row_metadata=FULL on the server so that events name their columns", database, table, len(types), len(info))
	}
	for i := range cols {
		c, ic := &cols[i], info[i]
		c.name = ic.name
		c.unsigned = strings.Contains(ic.columnType, "unsigned")
		c.binary = ic.charset.String == "binary" || (!ic.charset.Valid && (isBlobType(c.rt) || isCharacter(c.rt)))
		if opt != nil && opt.hasChars {
			c.binary = opt.binary[i]
		}
		if opt != nil && opt.hasSign {
			c.unsigned = opt.unsigned[i]
		}
		switch c.rt {
		case binlog.TypeEnum:
			c.enum = typeValues(ic.columnType, "enum(")
		case binlog.TypeSet:
			c.set = typeValues(ic.columnType, "set(")
		}
		c.prepare(ic.columnType)
	}
	return cols, nil
}

func isBlobType(rt byte) bool {
	switch rt {
	case binlog.TypeBlob, binlog.TypeTinyBlob, binlog.TypeMediumBlob, binlog.TypeLongBlob:
		return true
	}
	return false
}

// typeValues parses the names of enum('a','b”c') or set(...).
func typeValues(columnType, prefix string) []string {
	if !strings.HasPrefix(strings.ToLower(columnType), prefix) || !strings.HasSuffix(columnType, ")") {
		return nil
	}
	s := columnType[len(prefix) : len(columnType)-1]
	var out []string
	for len(s) > 0 {
		if s[0] != '\'' {
			return nil
		}
		var b strings.Builder
		i := 1
		for ; i < len(s); i++ {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			b.WriteByte(s[i])
		}
		out = append(out, b.String())
		s = strings.TrimPrefix(s[min(i+1, len(s)):], ",")
	}
	return out
}
