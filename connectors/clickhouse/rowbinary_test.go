package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/chtest"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// ddl runs a statement with settings (LowCardinality is experimental in
// 18.16 and needs one to be created).
func ddl(t *testing.T, q string, settings url.Values) {
	t.Helper()
	settings.Set("query", q)
	resp, err := http.Post(chtest.URL(t)+"/?"+settings.Encode(), "text/plain", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", q, b)
}

func rowBinarySink(t testing.TB, db, table string, extra map[string]any) *Sink {
	values := map[string]any{"url": chtest.URL(t), "database": db, "table": table, "insert_format": "row_binary", "max_retries": int64(0)}
	for k, v := range extra {
		values[k] = v
	}
	s, err := New(cfg(values))
	require.NoError(t, err)
	require.NoError(t, s.Open(context.Background()))
	return s.(*Sink)
}

// rtColumn is a column of the round-trip table: its type, the JSON given
// in each of the three rows ("" leaves the field out), the expression
// read back, and the JSON read back (ClickHouse's JSONEachRow: 64-bit
// integers quoted).
type rtColumn struct {
	name, typ string
	in        [3]string
	sel       string
	want      [3]string
}

func roundTripColumns() []rtColumn {
	tokyo := func(s string) string {
		loc, err := time.LoadLocation("Asia/Tokyo")
		if err != nil {
			panic(err)
		}
		tm, err := time.ParseInLocation(time.DateTime, s, loc)
		if err != nil {
			panic(err)
		}
		return fmt.Sprint(tm.Unix())
	}
	return []rtColumn{
		{"k", "Int32", [3]string{"1", "2", "3"}, "", [3]string{"1", "2", "3"}},
		{"i8", "Int8", [3]string{"-128", "127", `"5"`}, "", [3]string{"-128", "127", "5"}},
		{"i16", "Int16", [3]string{"-32768", "32767", "1e3"}, "", [3]string{"-32768", "32767", "1000"}},
		{"i32", "Int32", [3]string{"-2147483648", "2147483647", "0"}, "", [3]string{"-2147483648", "2147483647", "0"}},
		{"i64", "Int64", [3]string{"-9223372036854775808", "9223372036854775807", `"-1"`}, "",
			[3]string{`"-9223372036854775808"`, `"9223372036854775807"`, `"-1"`}},
		{"u8", "UInt8", [3]string{"0", "255", "2.0"}, "", [3]string{"0", "255", "2"}},
		{"u16", "UInt16", [3]string{"0", "65535", "7"}, "", [3]string{"0", "65535", "7"}},
		{"u32", "UInt32", [3]string{"0", "4294967295", "7"}, "", [3]string{"0", "4294967295", "7"}},
		{"u64", "UInt64", [3]string{"0", "18446744073709551615", `"18446744073709551614"`}, "",
			[3]string{`"0"`, `"18446744073709551615"`, `"18446744073709551614"`}},
		{"f32", "Float32", [3]string{"-1.5", "3.4028234663852886e38", `"0.25"`}, "toFloat64(f32)",
			[3]string{"-1.5", fmt.Sprint(float64(math.MaxFloat32)), "0.25"}},
		{"f64", "Float64", [3]string{"-1.5", "1.7976931348623157e308", "0.1"}, "",
			[3]string{"-1.5", "1.7976931348623157e308", "0.1"}},
		{"s", "String", [3]string{`""`, `"héllo \"q\" \n\t\\ ` + "`" + `"`, "42"}, "",
			[3]string{`""`, `"héllo \"q\" \n\t\\ ` + "`" + `"`, `"42"`}},
		{"fs", "FixedString(4)", [3]string{`"ab"`, `"abcd"`, `"ñ"`}, "hex(fs)", [3]string{`"61620000"`, `"61626364"`, `"C3B10000"`}},
		{"u", "UUID", [3]string{`"61f0c404-5cb3-11e7-907b-a6006ad3dba0"`, `"00000000-0000-0000-0000-000000000000"`, `"FFFFFFFF-0000-0000-0000-00000000000A"`}, "",
			[3]string{`"61f0c404-5cb3-11e7-907b-a6006ad3dba0"`, `"00000000-0000-0000-0000-000000000000"`, `"ffffffff-0000-0000-0000-00000000000a"`}},
		// Day 0 reads back as 0000-00-00 in 18.16, hence the day number.
		{"d", "Date", [3]string{`"1970-01-01"`, `"2149-06-06"`, "19000"}, "toUInt16(d)", [3]string{"0", "65535", "19000"}},
		{"d2", "Date", [3]string{`"2024-02-29"`, `"1999-12-31"`, "1"}, "", [3]string{`"2024-02-29"`, `"1999-12-31"`, `"1970-01-02"`}},
		// 4102444800 is 2100-01-01: past 2^31, and 18.16 shows DateTimes up to 2105 only.
		{"dt", "DateTime", [3]string{"1", "4102444800", `"2024-05-06T07:08:09+02:00"`}, "",
			[3]string{`"1970-01-01 00:00:01"`, `"2100-01-01 00:00:00"`, `"2024-05-06 05:08:09"`}},
		{"dtz", "DateTime('Asia/Tokyo')", [3]string{`"2024-05-06 07:08:09"`, `"2024-05-06"`, `"2024-05-06T07:08:09.999Z"`}, "toUnixTimestamp(dtz)",
			[3]string{tokyo("2024-05-06 07:08:09"), tokyo("2024-05-06 00:00:00"), fmt.Sprint(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC).Unix())}},
		{"dec32", "Decimal(9, 2)", [3]string{`"-9999999.99"`, "1234567.55", "0.01"}, "toString(dec32)",
			[3]string{`"-9999999.99"`, `"1234567.55"`, `"0.01"`}},
		{"dec64", "Decimal(18, 4)", [3]string{`"99999999999999.9999"`, "-1", `"0.0001"`}, "toString(dec64)",
			[3]string{`"99999999999999.9999"`, `"-1.0000"`, `"0.0001"`}},
		// 18.16's toString garbles wide Decimal128s: compare the bytes
		// with the server's own reading of the text (want is a query).
		{"dec128", "Decimal(38, 10)", [3]string{`"-9999999999999999999999999999.9999999999"`, `"1234567890123456789012345678.0123456789"`, "0"},
			"hex(reinterpretAsString(dec128))", [3]string{
				"SELECT hex(reinterpretAsString(toDecimal128('-9999999999999999999999999999.9999999999', 10)))",
				"SELECT hex(reinterpretAsString(toDecimal128('1234567890123456789012345678.0123456789', 10)))",
				"SELECT hex(reinterpretAsString(toDecimal128('0', 10)))"}},
		{"e8", "Enum8('a' = 1, 'b\\'c' = -2)", [3]string{`"a"`, `"b'c"`, "-2"}, "", [3]string{`"a"`, `"b'c"`, `"b'c"`}},
		{"e16", "Enum16('x' = 1000, 'y' = -1000)", [3]string{`"x"`, "1000", `"y"`}, "", [3]string{`"x"`, `"x"`, `"y"`}},
		{"n", "Nullable(Int32)", [3]string{"null", "", "5"}, "", [3]string{"null", "null", "5"}},
		{"nsd", "Nullable(String) DEFAULT 'nd'", [3]string{"null", "", `"v"`}, "", [3]string{"null", `"nd"`, `"v"`}},
		{"lc", "LowCardinality(String)", [3]string{`"low"`, `""`, `"card"`}, "toString(lc)", [3]string{`"low"`, `""`, `"card"`}},
		{"arr", "Array(Int32)", [3]string{"[]", "[1,-2,3]", `["4"]`}, "", [3]string{"[]", "[1,-2,3]", "[4]"}},
		{"anull", "Array(Nullable(String))", [3]string{`[null,"x"]`, "[]", `["a'b"]`}, "", [3]string{`[null,"x"]`, "[]", `["a'b"]`}},
		{"aa", "Array(Array(UInt8))", [3]string{"[[1],[2,3]]", "[[]]", "[]"}, "", [3]string{"[[1],[2,3]]", "[[]]", "[]"}},
		{"def", "String DEFAULT 'dflt'", [3]string{"", `"given"`, "null"}, "", [3]string{`"dflt"`, `"given"`, `"dflt"`}},
		{"mat", "String MATERIALIZED concat(s, '!')", [3]string{`"ignored"`, "", ""}, "mat", [3]string{`"!"`, `"héllo \"q\" \n\t\\ ` + "`" + `!"`, `"42!"`}},
		{"we`ird \\ col", "String", [3]string{`"w0"`, `"w1"`, `"w2"`}, "", [3]string{`"w0"`, `"w1"`, `"w2"`}},
	}
}

// Every supported type, through the real server and back: extremes,
// numbers given as strings or floats, nulls, DEFAULTs (three sets of
// left-out columns, so three INSERTs), a MATERIALIZED column, a column
// name needing quoting, and the message id in id_column.
func TestRowBinaryRoundTripsEveryType(t *testing.T) {
	t.Parallel()
	db := chtest.Database(t)
	cols := roundTripColumns()
	var defs, sels []string
	for _, c := range cols {
		defs = append(defs, quoteIdent(c.name)+" "+c.typ)
		sel := c.sel
		if sel == "" {
			sel = quoteIdent(c.name)
		}
		sels = append(sels, sel+" AS "+quoteIdent(c.name))
	}
	ddl(t, "CREATE TABLE "+db+".rt (id UUID, "+strings.Join(defs, ", ")+") ENGINE = MergeTree ORDER BY k",
		url.Values{"allow_experimental_low_cardinality_type": {"1"}})
	s := rowBinarySink(t, db, "rt", map[string]any{"id_column": "id"})
	var msgs []connector.Message
	for r := range 3 {
		var fields []string
		for _, c := range cols {
			if c.in[r] != "" {
				fields = append(fields, fmt.Sprintf("%q:%s", c.name, c.in[r]))
			}
		}
		fields = append(fields, `"id":"not the message id"`)
		msgs = append(msgs, connector.Message{ID: uuid.New(), Payload: []byte("{" + strings.Join(fields, ",") + "}")})
	}
	require.NoError(t, s.Consume(context.Background(), &connector.SinkBatch{Messages: msgs}))
	out := query(t, "SELECT toString(id) AS id, "+strings.Join(sels, ", ")+" FROM "+db+".rt ORDER BY k FORMAT JSONEachRow")
	got := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, got, 3, out)
	for r, line := range got {
		var row map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &row), line)
		require.Equal(t, uuid.UUID(msgs[r].ID).String(), row["id"], "row %d: id_column holds the message id", r)
		for _, c := range cols {
			var want any
			if w := c.want[r]; strings.HasPrefix(w, "SELECT ") {
				want = strings.TrimSpace(query(t, w))
			} else {
				require.NoError(t, json.Unmarshal([]byte(w), &want), w)
			}
			require.Equal(t, want, row[c.name], "row %d, column %s %s (given %s)", r, c.name, c.typ, c.in[r])
		}
	}
}
