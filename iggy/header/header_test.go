package header_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy/header"
)

func TestGetAndSet(t *testing.T) {
	t.Parallel()
	hs := []header.Header{{Key: header.BinaryKey([]byte("a")), Value: header.StringValue("binary")}}
	_, ok := header.Get(hs, "a")
	require.False(t, ok, "a binary key is not the string key of the same bytes")

	hs = header.Set(hs, "a", header.StringValue("1"))
	hs = header.Set(hs, "a", header.Uint64Value(2))
	require.Len(t, hs, 2)
	v, ok := header.Get(hs, "a")
	require.True(t, ok)
	require.Equal(t, header.KindUint64, v.Kind)
	require.Equal(t, "2", v.String())
	require.True(t, hs[1].Key.Is("a"))
	require.False(t, hs[0].Key.Is("a"))
}

func TestValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		v    header.Value
		want string
	}{
		{header.StringValue("x"), "x"},
		{header.RawValue([]byte{0xab}), "ab"},
		{header.BoolValue(true), "true"},
		{header.Int64Value(-3), "-3"},
		{header.Uint8Value(7), "7"},
		{header.Uint32Value(8), "8"},
		{header.Float64Value(1.5), "1.5"},
		{header.Value{Kind: header.KindUint64, Data: []byte{1}}, "uint64(01)"},
	}
	for i, c := range cases {
		require.Equal(t, c.want, c.v.String(), "case %d", i)
	}
	s, ok := header.StringValue("x").Text()
	require.True(t, ok)
	require.Equal(t, "x", s)
	_, ok = header.RawValue([]byte("x")).Text()
	require.False(t, ok)
	require.True(t, header.BoolValue(true).Bool())
	require.False(t, header.BoolValue(false).Bool())
	require.Equal(t, "6b", header.BinaryKey([]byte("k")).String())
}

func TestClone(t *testing.T) {
	t.Parallel()
	buf := []byte("kv")
	hs := []header.Header{{Key: header.Key{Kind: header.KindString, Data: buf[:1]}, Value: header.RawValue(buf[1:])}}
	c := header.Clone(hs)
	require.Equal(t, hs, c)
	buf[0], buf[1] = 'x', 'y'
	require.Equal(t, "k", string(c[0].Key.Data), "the clone does not alias the original")
	require.Equal(t, "v", string(c[0].Value.Data))
	require.Nil(t, header.Clone(nil))
}
