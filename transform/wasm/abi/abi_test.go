package abi

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

func sample() []Message {
	return []Message{
		{Payload: []byte(`{"n":1}`), Key: []byte("k"), Timestamp: 1700000000000000,
			Headers: []Header{{KeyKind: 2, Key: []byte("a"), ValueKind: 12, Value: []byte{1, 0, 0, 0, 0, 0, 0, 0}}}},
		{Payload: []byte("raw")},
	}
}

func TestBatchRoundTrip(t *testing.T) {
	t.Parallel()
	in := sample()
	b := AppendBatch(nil, in)
	require.Len(t, b, BatchSize(in))
	out, err := DecodeBatch(b)
	require.NoError(t, err)
	require.Equal(t, in, out)
}

// TestBatchLayout pins the bytes of a one-message batch, as docs/wasm.md
// describes them.
func TestBatchLayout(t *testing.T) {
	t.Parallel()
	b := AppendBatch(nil, []Message{{Payload: []byte("hi"), Key: []byte("k"), Timestamp: 5,
		Headers: []Header{{KeyKind: 2, Key: []byte("h"), ValueKind: 2, Value: []byte("v")}}}})
	want := []byte{
		1, 0, 0, 0, // version
		1, 0, 0, 0, // count
		2, 0, 0, 0, 'h', 'i', // payload
		1, 0, 0, 0, 'k', // key
		5, 0, 0, 0, 0, 0, 0, 0, // timestamp
		1, 0, 0, 0, // headers
		2, 1, 0, 0, 0, 'h', 2, 1, 0, 0, 0, 'v',
	}
	require.Equal(t, want, b)
}

func TestVerdictsRoundTrip(t *testing.T) {
	t.Parallel()
	vs := []Verdict{
		{Action: Keep}, {Action: Drop},
		{Action: Replace, Messages: sample()[:1]},
		{Action: Split, Messages: sample()},
		{Action: Split},
		{Action: Route, Topic: "other"},
		{Action: Fail, Reason: "bad record"},
	}
	b := AppendVerdicts(nil, vs)
	got, err := DecodeVerdicts(b, len(vs))
	require.NoError(t, err)
	require.Equal(t, vs, got)
	_, err = DecodeVerdicts(b, len(vs)+1)
	require.ErrorContains(t, err, "7 verdicts for a batch of 8 messages")
}

func TestBadVerdicts(t *testing.T) {
	t.Parallel()
	hdr := func(n uint32) []byte {
		return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, Version), n)
	}
	for i, tc := range []struct {
		b    []byte
		want string
	}{
		{nil, "bad layout at byte 0: verdicts version: want 4 bytes, 0 left"},
		{[]byte{2, 0, 0, 0, 0, 0, 0, 0}, "verdicts version 2, want 1"},
		{hdr(1), "verdict count 1: 0 bytes left cannot hold them"},
		{append(hdr(1), 9), "verdict 0: bad layout at byte 9: unknown action 9"},
		{append(hdr(1), 2, 0xff, 0xff, 0xff, 0xff), "payload: length 4294967295, 0 bytes left"},
		{append(hdr(1), 3, 0xff, 0xff, 0, 0), "split count 65535"},
		{append(hdr(1), 4, 0, 0, 0, 0), "route to an empty topic"},
		{append(hdr(1), 5, 2, 0, 0, 0, 0xff, 0xfe), "fail reason: not valid UTF-8"},
		{append(hdr(1), 0, 0), "1 bytes after the last verdict"},
	} {
		_, err := DecodeVerdicts(tc.b, 1)
		require.ErrorIs(t, err, ErrLayout, "case %d", i)
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}

func TestPack(t *testing.T) {
	t.Parallel()
	p, n := Unpack(Pack(0xdeadbeef, 42))
	require.Equal(t, uint32(0xdeadbeef), p)
	require.Equal(t, uint32(42), n)
}

// FuzzDecodeVerdicts: whatever bytes a module returns, decoding never
// panics, and what decodes encodes back to the same bytes.
func FuzzDecodeVerdicts(f *testing.F) {
	f.Add(AppendVerdicts(nil, []Verdict{{Action: Keep}}), 1)
	f.Add(AppendVerdicts(nil, []Verdict{{Action: Split, Messages: sample()}, {Action: Fail, Reason: "x"}}), 2)
	f.Add(AppendVerdicts(nil, []Verdict{{Action: Replace, Messages: sample()[:1]}, {Action: Route, Topic: "t"}}), 2)
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff}, 1)
	f.Fuzz(func(t *testing.T, b []byte, want int) {
		vs, err := DecodeVerdicts(b, want)
		if err != nil {
			return
		}
		if len(vs) != want {
			t.Fatalf("%d verdicts, want %d", len(vs), want)
		}
		if again := AppendVerdicts(nil, vs); string(again) != string(b) {
			t.Fatalf("re-encoded differently:\n%x\n%x", b, again)
		}
	})
}

// FuzzDecodeBatch: the guest side's decoder never panics either.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(AppendBatch(nil, sample()))
	f.Add(AppendBatch(nil, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, err := DecodeBatch(b)
		if err != nil {
			return
		}
		if again := AppendBatch(nil, msgs); string(again) != string(b) {
			t.Fatalf("re-encoded differently")
		}
	})
}
