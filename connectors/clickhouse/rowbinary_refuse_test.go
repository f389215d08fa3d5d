package clickhouse

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/chtest"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// A message whose field does not fit its column is dead-lettered with a
// reason naming the field and the column's type; the others are inserted.
func TestRowBinaryDeadLettersWhatDoesNotFit(t *testing.T) {
	t.Parallel()
	db := chtest.Database(t)
	query(t, "CREATE TABLE "+db+".t (n UInt8, s FixedString(3), d Date, tag String DEFAULT 'none') ENGINE = MergeTree ORDER BY n")
	s := rowBinarySink(t, db, "t", nil)
	payloads := []string{
		`{"n":1,"s":"a","d":"2024-01-01"}`,
		`{"n":"six","s":"b","d":"2024-01-01"}`,            // not an integer
		`{"n":300,"s":"c","d":"2024-01-01"}`,              // out of range
		`{"n":4,"s":"long","d":"2024-01-01"}`,             // too long for FixedString(3)
		`{"n":5,"d":"2024-01-01"}`,                        // missing, no DEFAULT
		`{"n":6,"s":"f","d":"2024-13-01"}`,                // no such date
		`{"n":7,"s":null,"d":"2024-01-01"}`,               // null, not Nullable
		`[1,2]`,                                           // no object
		`{"n":9,"s":"i","d":"2024-01-01"} {"n":10}`,       // two values
		`{"n":11,"s":"k","d":"2024-01-01","tag":"given"}`, // a DEFAULT given: a second INSERT
	}
	want := map[int][]string{
		1: {`field "n"`, `"six"`, "UInt8", "not an integer"},
		2: {`field "n"`, "300", "UInt8"},
		3: {`field "s"`, "FixedString(3)", "longer than 3"},
		4: {`field "s" is missing`, "FixedString(3)", "no DEFAULT"},
		5: {`field "d"`, "Date", "YYYY-MM-DD"},
		6: {`field "s"`, "FixedString(3)", "null"},
		7: {"not a JSON object"},
		8: {"data after the object"},
	}
	var msgs []connector.Message
	for _, p := range payloads {
		msgs = append(msgs, connector.Message{ID: uuid.New(), Payload: []byte(p)})
	}
	err := s.Consume(context.Background(), &connector.SinkBatch{Messages: msgs})
	var me connector.MessageErrors
	require.True(t, errors.As(err, &me), "%v", err)
	require.Len(t, me, len(want), "%v", me)
	for i, parts := range want {
		require.Error(t, me[i], "message %d", i)
		require.True(t, connector.IsPermanent(me[i]), "message %d: %v", i, me[i])
		for _, p := range parts {
			require.Contains(t, me[i].Error(), p, "message %d", i)
		}
	}
	require.Equal(t, []string{"1\tnone", "11\tgiven"}, lines(query(t, "SELECT n, tag FROM "+db+".t ORDER BY n FORMAT TSV")))
}

// Open refuses, naming the column or the key, a table row_binary cannot
// write: an unsupported type, no such table, an id_column of the wrong
// type or missing.
func TestRowBinaryOpenRefusesWhatItCannotWrite(t *testing.T) {
	t.Parallel()
	db := chtest.Database(t)
	query(t, "CREATE TABLE "+db+".tup (n UInt8, pair Tuple(UInt8, String)) ENGINE = Memory")
	query(t, "CREATE TABLE "+db+".ok (n UInt8, id UInt64) ENGINE = Memory")
	for _, tc := range []struct {
		table, idColumn string
		want            []string
	}{
		{"tup", "", []string{"column pair", "Tuple(UInt8, String)", "row_binary writes"}},
		{"missing", "", []string{"not found"}},
		{"ok", "id", []string{`id_column "id"`, "UInt64", "UUID, String or FixedString(36)"}},
		{"ok", "iggy_id", []string{`id_column "iggy_id"`, "no such"}},
	} {
		s, err := New(cfg(map[string]any{"url": chtest.URL(t), "database": db, "table": tc.table,
			"insert_format": "row_binary", "id_column": tc.idColumn}))
		require.NoError(t, err)
		err = s.Open(context.Background())
		require.Error(t, err, "%+v", tc)
		for _, w := range tc.want {
			require.ErrorContains(t, err, w, "%+v", tc)
		}
	}
}

// Hostile payloads are data: quotes, backticks, NULs and SQL in values
// and keys arrive as they were; keys naming no column are ignored;
// numbers too large, deep nesting and floods of digits are refused
// without harm.
func TestRowBinaryHostilePayloads(t *testing.T) {
	t.Parallel()
	db := chtest.Database(t)
	query(t, "CREATE TABLE "+db+".t (k UInt32, s String, dec Decimal(9, 2), a Array(String)) ENGINE = MergeTree ORDER BY k")
	s := rowBinarySink(t, db, "t", nil)
	hostile := []string{`'); DROP DATABASE ` + db + `; --`, "\u0000", `\'`, "`", "\n", "\xff\xfe", strings.Repeat("é", 10000)}
	var msgs []connector.Message
	for i, h := range hostile {
		p, err := json.Marshal(map[string]any{"k": i, "s": h, "dec": "1.5", "a": []string{h}, "`; DROP TABLE t; --": h})
		require.NoError(t, err)
		msgs = append(msgs, connector.Message{ID: uuid.New(), Payload: p})
	}
	refused := []string{
		`{"k":100,"s":"x","dec":"1e999999999","a":[]}`,
		`{"k":101,"s":"x","dec":"` + strings.Repeat("9", 100000) + `","a":[]}`,
		`{"k":1e999999999,"s":"x","dec":"1","a":[]}`,
		`{"k":102,"s":"x","dec":"1","a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
		`{"k":103,"s":"x","dec":"1","a":[[]]}`,
		`{"k":104,"s":{"nested":1},"dec":"1","a":[]}`,
		`{"k":105,"s":"x","dec":"NaN","a":[]}`,
		`{"k":106,"s":"x","dec":"-+1","a":[]}`,
		`{"k":107,"s":"x","dec":"1.","a":["\u0000",5,true,null]}`,
	}
	for _, p := range refused {
		msgs = append(msgs, connector.Message{ID: uuid.New(), Payload: []byte(p)})
	}
	err := s.Consume(context.Background(), &connector.SinkBatch{Messages: msgs})
	var me connector.MessageErrors
	require.True(t, errors.As(err, &me), "%v", err)
	require.Len(t, me, len(refused))
	for i := range refused {
		require.Error(t, me[len(hostile)+i], "refused %d", i)
	}
	out := query(t, "SELECT s, a[1] = s AS same FROM "+db+".t ORDER BY k FORMAT JSONEachRow")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, rows, len(hostile))
	for i, r := range rows {
		var got struct {
			S    string `json:"s"`
			Same int    `json:"same"`
		}
		require.NoError(t, json.Unmarshal([]byte(r), &got), r)
		want := strings.ToValidUTF8(hostile[i], "\uFFFD") // as encoding/json decodes it
		if hostile[i] == "\xff\xfe" {
			want = "\uFFFD\uFFFD"
		}
		require.Equal(t, want, got.S, "row %d", i)
	}
}

// FuzzEncodeRow: no JSON makes the encoder panic, and a row it writes
// is exactly as long as its columns say (checked by a decoder of the
// same columns).
func FuzzEncodeRow(f *testing.F) {
	cols := fuzzColumns(f)
	for _, seed := range []string{`{}`, `{"i":1,"s":"x","n":null,"a":[1,2],"d":"2024-01-01","dt":0,"u":"61f0c404-5cb3-11e7-907b-a6006ad3dba0","dec":"1.25","e":"a","f":1.5,"fs":"ab"}`,
		`{"i":"1e3"}`, `[]`, `null`, `{"a":[[[]]]}`, `{"dec":"-0.005"}`, `{"u":"{61f0c404-5cb3-11e7-907b-a6006ad3dba0}"}`, `{"i":-0}`, "{\"s\":\"\xff\"}"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		row, omit, err := encodeRow(nil, cols, &connector.Message{Payload: p})
		if err != nil {
			return
		}
		require.True(t, json.Valid(p), "wrote a row of invalid JSON %q", p)
		rest := row
		for i, c := range cols {
			if omit[i] == 0 {
				rest = skipValue(t, rest, c.typ)
			}
		}
		require.Empty(t, rest, "bytes after the row's last column")
	})
}

// skipValue reads one RowBinary value of type typ off b, as the server
// would, and returns what follows.
func skipValue(t *testing.T, b []byte, typ *chType) []byte {
	t.Helper()
	take := func(n int) []byte {
		require.GreaterOrEqual(t, len(b), n, "row ends inside a %s", typ.name)
		return b[n:]
	}
	switch typ.kind {
	case kNullable:
		null := len(b) > 0 && b[0] == 1
		require.True(t, len(b) > 0 && b[0] <= 1, "bad null flag of a %s", typ.name)
		if b = b[1:]; null {
			return b
		}
		return skipValue(t, b, typ.elem)
	case kArray, kString:
		n, k := binary.Uvarint(b)
		require.Positive(t, k, "bad length of a %s", typ.name)
		b = b[k:]
		if typ.kind == kString {
			require.LessOrEqual(t, n, uint64(len(b)), "row ends inside a %s", typ.name)
			return b[n:]
		}
		for range n {
			b = skipValue(t, b, typ.elem)
		}
		return b
	case kInt, kEnum:
		return take(typ.bits / 8)
	case kDecimal:
		return take(typ.bits / 8)
	case kFloat32, kDateTime:
		return take(4)
	case kFloat64:
		return take(8)
	case kDate:
		return take(2)
	case kUUID:
		return take(16)
	case kFixedString:
		return take(typ.size)
	}
	t.Fatalf("no skip for %s", typ.name)
	return nil
}

// FuzzParseType: no type text makes the parser panic.
func FuzzParseType(f *testing.F) {
	for _, seed := range []string{"Enum8('a\\'' = 1)", "Nullable(Array(LowCardinality(String)))", "Decimal(38, 10)", "DateTime('UTC')", "FixedString(0)", "Enum16(", "Array("} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) { _, _ = parseType(s) })
}

func fuzzColumns(tb testing.TB) []column {
	var cols []column
	for _, c := range []struct{ name, typ string }{{"i", "Int16"}, {"s", "String"}, {"n", "Nullable(UInt64)"}, {"a", "Array(Array(Int8))"},
		{"d", "Date"}, {"dt", "DateTime('Asia/Tokyo')"}, {"u", "UUID"}, {"dec", "Decimal(38, 4)"}, {"e", "Enum8('a' = 1, 'b' = -1)"},
		{"f", "Float32"}, {"fs", "FixedString(3)"}, {"lc", "LowCardinality(Nullable(String))"}, {"d64", "Decimal(12, 2)"}} {
		typ, err := parseType(c.typ)
		require.NoError(tb, err, c.typ)
		// Every column but the Nullable ones has a DEFAULT, so that most
		// fuzzed objects make a row.
		cols = append(cols, column{name: c.name, typ: typ, hasDefault: typ.kind != kNullable})
	}
	return cols
}
