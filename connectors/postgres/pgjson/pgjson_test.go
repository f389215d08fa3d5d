package pgjson

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestAppendValue(t *testing.T) {
	t.Parallel()
	types := NewTypes()
	types.AddArray(90001, 25, ',')
	types.AddDomain(90002, oidInt4)
	types.AddDomain(90003, 90002)
	cases := []struct {
		oid  uint32
		text *string
		want string
	}{
		{oidBool, s("t"), `true`},
		{oidBool, s("f"), `false`},
		{oidInt8, s("-9223372036854775808"), `-9223372036854775808`},
		{oidInt4, nil, `null`},
		{oidNumeric, s("123456789012345678901234567890.000000001"), `123456789012345678901234567890.000000001`},
		{oidNumeric, s("NaN"), `"NaN"`},
		{oidNumeric, s("Infinity"), `"Infinity"`},
		{oidFloat8, s("1e+100"), `1e+100`},
		{oidFloat8, s("-Infinity"), `"-Infinity"`},
		{oidFloat4, s("0.1"), `0.1`},
		{oidJSONB, s(`{"a": [1, 12345678901234567890]}`), `{"a":[1,12345678901234567890]}`},
		{oidJSON, s("{\n \"a\" : 1\n}"), `{"a":1}`},
		{oidBytea, s(`\x00ff10`), `"AP8Q"`},
		{oidBytea, s(`\x`), `""`},
		{oidTimestamptz, s("2024-01-15 10:30:00.123456+00"), `"2024-01-15T10:30:00.123456Z"`},
		{oidTimestamptz, s("2024-01-15 12:30:00+02"), `"2024-01-15T10:30:00Z"`},
		{oidTimestamptz, s("2024-01-15 16:00:00+05:30"), `"2024-01-15T10:30:00Z"`},
		{oidTimestamptz, s("1850-01-01 00:00:00+00:53:28"), `"1849-12-31T23:06:32Z"`},
		{oidTimestamptz, s("infinity"), `"infinity"`},
		{oidTimestamptz, s("0044-03-15 12:00:00+00 BC"), `"0044-03-15 12:00:00+00 BC"`},
		{oidTimestamp, s("2024-01-15 10:30:00"), `"2024-01-15T10:30:00"`},
		{oidTimestamp, s("2024-01-15 10:30:00.5"), `"2024-01-15T10:30:00.5"`},
		{oidTimestamp, s("10000-01-01 00:00:00"), `"10000-01-01 00:00:00"`},
		{1082, s("2024-01-15"), `"2024-01-15"`},
		{2950, s("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`},
		{25, s("say \"hi\"\n\x01\xff"), `"say \"hi\"\n\u0001\ufffd"`},
		{1007, s("{1,2,NULL}"), `[1,2,null]`},
		{1007, s("{{1,2},{3,4}}"), `[[1,2],[3,4]]`},
		{1007, s("[0:1]={7,8}"), `[7,8]`},
		{1007, s("{}"), `[]`},
		{1009, s(`{"a b","NULL",NULL,"q\"uote","back\\slash",plain}`), `["a b","NULL",null,"q\"uote","back\\slash","plain"]`},
		{1231, s("{1.50,NaN}"), `[1.50,"NaN"]`},
		{3807, s(`{"{\"a\": 1}","[2]"}`), `[{"a":1},[2]]`},
		{1001, s(`{"\\x01"}`), `["AQ=="]`},
		{1020, s("{(1,1),(0,0);(2,2),(1,1)}"), `["(1,1),(0,0)","(2,2),(1,1)"]`},
		{1007, s("{1,2"), `"{1,2"`},
		{90001, s("{x,y}"), `["x","y"]`},
		{90003, s("42"), `42`},
		{99999, s("anything"), `"anything"`},
	}
	for i, c := range cases {
		var text []byte
		if c.text != nil {
			text = []byte(*c.text)
		}
		got := string(types.AppendValue(nil, c.oid, text))
		require.Equal(t, c.want, got, "case %d: oid %d text %q", i, c.oid, text)
		require.True(t, json.Valid([]byte(got)), "case %d: %s is not JSON", i, got)
	}
}

func s(v string) *string { return &v }

func TestIsNumber(t *testing.T) {
	t.Parallel()
	for i, c := range []struct {
		in   string
		frac bool
		want bool
	}{
		{"0", false, true}, {"-0", false, true}, {"01", false, false}, {"1.5", false, false},
		{"1.5", true, true}, {"1.", true, false}, {".5", true, false}, {"1e5", true, true},
		{"1E-5", true, true}, {"1e", true, false}, {"", true, false}, {"-", true, false}, {"+1", true, false},
	} {
		require.Equal(t, c.want, isNumber([]byte(c.in), c.frac), "case %d: %q", i, c.in)
	}
}

func FuzzAppendValue(f *testing.F) {
	for _, seed := range []string{"{1,2}", `{{"a",NULL},{b,"c\"d"}}`, "[1:2]={x,y}", `\x00ff`, "2024-01-15 10:30:00+00", "1e5", "{", `{"\`, "{{{{{{{{{{{{{{{{{{{{}}}}}}}}}}}}}}}}}}}}"} {
		f.Add(uint32(1009), []byte(seed))
		f.Add(uint32(1007), []byte(seed))
	}
	f.Add(uint32(oidJSONB), []byte(`{"a":1}`))
	f.Add(uint32(oidTimestamp), []byte("2024-01-15 10:30:00.1"))
	types := NewTypes()
	oids := []uint32{oidBool, oidInt8, oidNumeric, oidFloat8, oidJSON, oidJSONB, oidBytea, oidTimestamptz, oidTimestamp, 25, 1007, 1009, 1231, 3807, 1001, 1020, 1185}
	f.Fuzz(func(t *testing.T, oid uint32, text []byte) {
		for _, o := range append(oids, oid) {
			out := types.AppendValue(nil, o, text)
			if !json.Valid(out) {
				t.Fatalf("oid %d text %q: invalid JSON %s", o, text, out)
			}
		}
		var back string
		if err := json.Unmarshal(AppendString(nil, text), &back); err != nil {
			t.Fatal(err)
		}
		if utf8.Valid(text) && back != string(text) {
			t.Fatalf("string %q round-tripped to %q", text, back)
		}
	})
}
