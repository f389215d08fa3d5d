package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// typeCases are PostgreSQL values and the JSON the source makes of them,
// the same in polling and CDC mode.
var typeCases = []struct {
	sqlType, literal, want string
}{
	{"boolean", "true", `true`},
	{"smallint", "-32768", `-32768`},
	{"integer", "2147483647", `2147483647`},
	{"bigint", "9223372036854775807", `9223372036854775807`},
	{"numeric", "12345678901234567890123456789.123456789", `12345678901234567890123456789.123456789`},
	{"numeric(10,2)", "1.5", `1.50`},
	{"numeric", "'NaN'", `"NaN"`},
	{"real", "1.5", `1.5`},
	{"double precision", "0.1", `0.1`},
	{"double precision", "'Infinity'", `"Infinity"`},
	{"text", `'it''s "quoted"' || chr(10)`, `"it's \"quoted\"\n"`},
	{"varchar(5)", "'abc'", `"abc"`},
	{"char(3)", "'ab'", `"ab "`},
	{"bytea", `'\x00ff'::bytea`, `"AP8="`},
	{"uuid", "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`},
	{"timestamptz", "'2024-01-15 12:30:00.123456+02'", `"2024-01-15T10:30:00.123456Z"`},
	{"timestamp", "'2024-01-15 10:30:00'", `"2024-01-15T10:30:00"`},
	{"date", "'2024-01-15'", `"2024-01-15"`},
	{"time", "'10:30:00.5'", `"10:30:00.5"`},
	{"interval", "'1 day 2 hours'", `"P1DT2H"`},
	{"jsonb", `'{"b": [1, 12345678901234567890], "a": null}'`, `{"a":null,"b":[1,12345678901234567890]}`},
	{"json", `'{"z": 1,  "a": 2}'`, `{"z":1,"a":2}`},
	{"integer[]", "'{{1,2},{3,NULL}}'", `[[1,2],[3,null]]`},
	{"text[]", `ARRAY['a b', 'NULL', NULL, 'c"d']`, `["a b","NULL",null,"c\"d"]`},
	{"numeric[]", "'{1.10,2}'", `[1.10,2]`},
	{"mood", "'happy'", `"happy"`},
	{"mood[]", "'{happy,sad}'", `["happy","sad"]`},
	{"posint", "42", `42`},
	{"inet", "'10.0.0.1/8'", `"10.0.0.1/8"`},
	{"integer", "NULL", `null`},
}

// typeTable creates table "types" with one column per case and one row.
func typeTable(t *testing.T, db *testDB) {
	db.exec(`CREATE TYPE mood AS ENUM ('happy', 'sad')`)
	db.exec(`CREATE DOMAIN posint AS integer CHECK (VALUE > 0)`)
	cols := []string{"id integer PRIMARY KEY"}
	for i, c := range typeCases {
		cols = append(cols, fmt.Sprintf("c%d %s", i, c.sqlType))
	}
	db.exec("CREATE TABLE types (" + strings.Join(cols, ", ") + ")")
}

func insertTypes(db *testDB) {
	vals := []string{"1"}
	for _, c := range typeCases {
		vals = append(vals, c.literal)
	}
	db.exec("INSERT INTO types VALUES (" + strings.Join(vals, ", ") + ")")
}

func checkTypes(t *testing.T, data json.RawMessage) {
	t.Helper()
	var got map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &got))
	for i, c := range typeCases {
		require.JSONEq(t, c.want, string(got[fmt.Sprintf("c%d", i)]), "case %d: %s %s", i, c.sqlType, c.literal)
		if strings.HasPrefix(c.sqlType, "numeric") || c.sqlType == "jsonb" {
			require.Contains(t, string(data), c.want, "case %d: %s keeps every digit", i, c.sqlType)
		}
	}
}

func TestTypeMappingPolling(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	typeTable(t, db)
	insertTypes(db)
	s := openSource(t, map[string]any{"connection_string": db.dsn, "tables": []any{"types"}, "poll_interval": "10ms"}, nil)
	b := poll(t, s)
	require.Len(t, b.Messages, 1)
	r := decode(t, b.Messages[0])
	require.Equal(t, "SELECT", r.Op)
	checkTypes(t, r.Data)
}

func TestTypeMappingCDC(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	typeTable(t, db)
	s := openSource(t, map[string]any{"connection_string": db.dsn, "mode": "cdc", "tables": []any{"types"}, "snapshot": "never"}, nil)
	insertTypes(db)
	b := pollChanges(t, s)
	require.Len(t, b.Messages, 1)
	r := decode(t, b.Messages[0])
	require.Equal(t, "INSERT", r.Op)
	checkTypes(t, r.Data)
}
