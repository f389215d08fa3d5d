package abi_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ferryhq/ferry/udaf/abi"
	"github.com/stretchr/testify/require"
)

func TestPairRoundTrip(t *testing.T) {
	for _, tc := range [][2]string{{"", ""}, {"state", ""}, {"", `{"x":1}`}, {"a\x00b", "c"}} {
		a, b, err := abi.SplitPair(abi.AppendPair(nil, []byte(tc[0]), []byte(tc[1])))
		require.NoError(t, err)
		require.Equal(t, tc[0], string(a))
		require.Equal(t, tc[1], string(b))
	}
	_, _, err := abi.SplitPair([]byte{1, 0})
	require.EqualError(t, err, "a pair of 2 bytes, shorter than its 4-byte length")
	_, _, err = abi.SplitPair([]byte{9, 0, 0, 0, 'x'})
	require.EqualError(t, err, "a pair's first part of 9 bytes in 1 bytes")
}

func TestListRoundTrip(t *testing.T) {
	for _, inputs := range [][][]byte{nil, {{}}, {[]byte("a"), {}, []byte(`{"x":1}`)}} {
		p := abi.AppendList(nil, []byte("st"), inputs)
		require.Len(t, p, abi.ListSize([]byte("st"), inputs))
		st, got, err := abi.SplitList(p)
		require.NoError(t, err)
		require.Equal(t, "st", string(st))
		require.Len(t, got, len(inputs))
		for i := range inputs {
			require.Equal(t, string(inputs[i]), string(got[i]))
		}
	}
	_, _, err := abi.SplitList(append(abi.AppendList(nil, nil, [][]byte{[]byte("a")}), 7, 0, 0, 0, 'x'))
	require.EqualError(t, err, "the list's input 1: a pair's first part of 7 bytes in 1 bytes")
}

func TestDecodeResult(t *testing.T) {
	body, err := abi.DecodeResult(abi.AppendResult(nil, abi.OK, []byte("state")))
	require.NoError(t, err)
	require.Equal(t, "state", string(body))

	_, err = abi.DecodeResult(abi.AppendResult(nil, abi.Failed, []byte("bad\n  input\xff")))
	var g *abi.GuestError
	require.True(t, errors.As(err, &g))
	require.Equal(t, "bad input\uFFFD", g.Message)

	_, err = abi.DecodeResult(abi.AppendResult(nil, abi.Failed, []byte(strings.Repeat("é", 1000))))
	require.True(t, errors.As(err, &g))
	require.LessOrEqual(t, len(g.Message), abi.MaxMessage+len("\uFFFD"))
	require.True(t, utf8.ValidString(g.Message))

	_, err = abi.DecodeResult(abi.AppendResult(nil, abi.Failed, nil))
	require.EqualError(t, err, "no message")
	for in, want := range map[string]string{
		"":         "a result of 0 bytes, shorter than its 2-byte head",
		"\x01":     "a result of 1 bytes, shorter than its 2-byte head",
		"\x02\x00": "a result of layout version 2, want 1",
		"\x01\x07": "a result with the unknown code 7",
	} {
		_, err := abi.DecodeResult([]byte(in))
		require.EqualError(t, err, want)
	}
}

// FuzzDecodeResult: whatever a module returns decodes to a body, a guest
// error of valid UTF-8 within MaxMessage, or an error; never a panic.
func FuzzDecodeResult(f *testing.F) {
	f.Add(abi.AppendResult(nil, abi.OK, []byte("state")))
	f.Add(abi.AppendResult(nil, abi.Failed, []byte("a message")))
	f.Add(abi.AppendResult(nil, abi.Failed, []byte("\xff\xfe")))
	f.Add([]byte{})
	f.Add([]byte{2, 0})
	f.Add([]byte{1, 9, 'x'})
	f.Fuzz(func(t *testing.T, p []byte) {
		body, err := abi.DecodeResult(p)
		var g *abi.GuestError
		switch {
		case err == nil:
			if len(p) < 2 || p[0] != abi.Version || p[1] != abi.OK || string(body) != string(p[2:]) {
				t.Fatalf("%q decoded to the body %q", p, body)
			}
		case errors.As(err, &g):
			if !utf8.ValidString(g.Message) || len(g.Message) > 3*abi.MaxMessage || g.Message == "" {
				t.Fatalf("%q: guest message %q", p, g.Message)
			}
		}
	})
}

// FuzzSplitPair: a split pair appends back to its input.
func FuzzSplitPair(f *testing.F) {
	f.Add(abi.AppendPair(nil, []byte("a"), []byte("b")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, p []byte) {
		a, b, err := abi.SplitPair(p)
		if err != nil {
			return
		}
		if got := abi.AppendPair(nil, a, b); string(got) != string(p) {
			t.Fatalf("%q split to %q, %q", p, a, b)
		}
	})
}

// FuzzSplitList: a split list appends back to its input.
func FuzzSplitList(f *testing.F) {
	f.Add(abi.AppendList(nil, []byte("s"), [][]byte{[]byte("a"), nil}))
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, p []byte) {
		st, inputs, err := abi.SplitList(p)
		if err != nil {
			return
		}
		if got := abi.AppendList(nil, st, inputs); string(got) != string(p) {
			t.Fatalf("%q split to %q, %q", p, st, inputs)
		}
	})
}
