package postgres

import (
	"strings"
	"time"
	"unicode"

	"github.com/ferryhq/ferry/connectors/postgres/pgjson"
	"github.com/jackc/pgx/v5"
)

// column is one column of a row being encoded.
type column struct {
	name string // the JSON key
	oid  uint32
}

// appendObject appends {"name": value, ...} for the row's text values;
// columns with an empty name are left out.
func appendObject(dst []byte, types *pgjson.Types, cols []column, raw [][]byte) []byte {
	dst = append(dst, '{')
	first := true
	for i, c := range cols {
		if c.name == "" {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendObjectField(dst, types, c, raw[i])
	}
	return append(dst, '}')
}

// appendObjectField appends "name":value.
func appendObjectField(dst []byte, types *pgjson.Types, c column, v []byte) []byte {
	dst = pgjson.AppendStringS(dst, c.name)
	dst = append(dst, ':')
	return types.AppendValue(dst, c.oid, v)
}

// envelope is upstream's DatabaseRecord, extended for CDC with the
// schema, LSN and commit time.
type envelope struct {
	table, schema, op string
	ts                time.Time
	lsn               string // CDC only
	data, oldData     []byte // JSON; nil is null
}

func (e *envelope) append(dst []byte) []byte {
	dst = append(dst, `{"table_name":`...)
	dst = pgjson.AppendStringS(dst, e.table)
	if e.schema != "" {
		dst = append(dst, `,"schema":`...)
		dst = pgjson.AppendStringS(dst, e.schema)
	}
	dst = append(dst, `,"operation_type":`...)
	dst = pgjson.AppendStringS(dst, e.op)
	dst = append(dst, `,"timestamp":"`...)
	dst = e.ts.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, '"')
	if e.lsn != "" {
		dst = append(dst, `,"lsn":"`...)
		dst = append(dst, e.lsn...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"data":`...)
	dst = appendRaw(dst, e.data)
	dst = append(dst, `,"old_data":`...)
	dst = appendRaw(dst, e.oldData)
	return append(dst, '}')
}

func appendRaw(dst, v []byte) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	return append(dst, v...)
}

// toSnakeCase turns "userId", "UserID" and "User Name" into "user_id",
// "user_id" and "user_name".
func toSnakeCase(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case r == ' ' || r == '-':
			b.WriteByte('_')
		case unicode.IsUpper(r):
			if i > 0 && rs[i-1] != '_' && rs[i-1] != ' ' && rs[i-1] != '-' &&
				(unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
					(i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// tableIdent parses "schema.table" or "table" into a quotable identifier.
func tableIdent(name string) pgx.Identifier {
	if schema, table, ok := strings.Cut(name, "."); ok {
		return pgx.Identifier{schema, table}
	}
	return pgx.Identifier{name}
}
