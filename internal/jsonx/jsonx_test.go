package jsonx

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var docs = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-0.5e+10`, `"a\"b\\c\u00e9\ud83d\ude00"`,
	` {"a" : 1 , "b":[1,2,{"c":null}], "d":{"e":"f"}} `,
	`{"big": 123456789012345678901234567890, "neg": -1.25E-3}`,
	`{"ключ":"значение","emoji":"😀"}`,
	`{"a":1,"a":2}`,
}

var bad = []string{
	``, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `01`, `1.`, `1e`, `-`, `"abc`, "\"a\x01\"",
	`"\x"`, `"\u12"`, `tru`, `{"a":1}x`, `{a:1}`, `[1 2]`, `nul`,
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for i, d := range docs {
		require.NoError(t, Check([]byte(d)), "case %d: %s", i, d)
		require.True(t, json.Valid([]byte(d)), "case %d", i)
	}
	for i, d := range bad {
		require.Error(t, Check([]byte(d)), "case %d: %q", i, d)
		require.False(t, json.Valid([]byte(d)), "case %d", i)
	}
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	require.ErrorContains(t, Check([]byte(deep)), "nested deeper")
}

func TestScanObject(t *testing.T) {
	t.Parallel()
	ms, err := ScanObject([]byte(` {"a" : 1 , "b\"q":[1, 2], "c":{"d":"e"}} `), nil)
	require.NoError(t, err)
	require.Len(t, ms, 3)
	require.Equal(t, "a", string(ms[0].Key))
	require.Equal(t, "1", string(ms[0].Value))
	require.True(t, ms[1].Escaped)
	require.True(t, ms[1].KeyIs(`b"q`))
	require.Equal(t, `[1, 2]`, string(ms[1].Value))
	require.Equal(t, `{"d":"e"}`, string(ms[2].Value))

	_, err = ScanObject([]byte(`[1]`), nil)
	require.ErrorIs(t, err, ErrNotObject)
	for i, d := range []string{`{"a":1`, `{"a":1}}`, `{"a" 1}`, `{"a":[}`} {
		_, err := ScanObject([]byte(d), nil)
		require.Error(t, err, "case %d: %s", i, d)
	}
}

func TestParseAppendEqual(t *testing.T) {
	t.Parallel()
	for i, d := range docs {
		v, err := Parse([]byte(d))
		require.NoError(t, err, "case %d", i)
		out := v.Append(nil)
		var a, b any
		require.NoError(t, json.Unmarshal([]byte(d), &a), "case %d", i)
		require.NoError(t, json.Unmarshal(out, &b), "case %d: %s", i, out)
		require.Equal(t, a, b, "case %d", i)
	}
	v, err := Parse([]byte(`{"big": 123456789012345678901234567890}`))
	require.NoError(t, err)
	require.Equal(t, `{"big":123456789012345678901234567890}`, string(v.Append(nil)), "big integers keep every digit")

	require.True(t, EqualRaw([]byte(`{"a":1,"b":[true,"x"]}`), []byte(`{"b":[true,"\u0078"],"a":1.0}`)))
	require.False(t, EqualRaw([]byte(`123456789012345678901234567890`), []byte(`123456789012345678901234567891`)))
	require.False(t, EqualRaw([]byte(`"1"`), []byte(`1`)))
}

func TestStrings(t *testing.T) {
	t.Parallel()
	for i, s := range []string{"", "plain", "quote\" back\\ nl\n tab\t ctl\x01", "ünïcødé 😀", "\u2028", "bad\xffutf8"} {
		lit := AppendString(nil, s)
		require.True(t, json.Valid(lit), "case %d: %s", i, lit)
		var want string
		require.NoError(t, json.Unmarshal(lit, &want))
		got, err := Unquote(lit)
		require.NoError(t, err, "case %d", i)
		require.Equal(t, want, got, "case %d", i)
	}
	got, err := Unquote([]byte(`"\ud83d\ude00 \ud83d x"`))
	require.NoError(t, err)
	require.Equal(t, "😀 \ufffd x", got)
}
