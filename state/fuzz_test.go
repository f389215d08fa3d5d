package state

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeFile feeds arbitrary bytes to the state file decoder: it must
// never panic, and whatever it accepts must be the canonical encoding of
// what it returns. Seeds: testdata/fuzz/FuzzDecodeFile and the f.Add calls.
func FuzzDecodeFile(f *testing.F) {
	f.Add(encodeFile(1, nil))
	f.Add(encodeFile(42, []byte("last_id=1234")))
	f.Add(encodeFile(1<<63, bytes.Repeat([]byte{0xff}, 300)))
	f.Add(encodeFile(3, []byte("x"))[:fileHeaderSize-1])
	f.Add([]byte(fileMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, data, err := decodeFile(b)
		if err != nil {
			require.Nil(t, data)
			return
		}
		require.NotZero(t, v)
		require.Equal(t, b, encodeFile(v, data), "accepted bytes are not the canonical encoding")
	})
}

// FuzzFileRoundTrip checks that every valid state encodes and decodes back
// to itself.
func FuzzFileRoundTrip(f *testing.F) {
	f.Add(uint64(1), []byte{})
	f.Add(uint64(7), []byte("lsn=0/16B3748"))
	f.Add(^uint64(0), bytes.Repeat([]byte{0, 1, 2}, 100))
	f.Fuzz(func(t *testing.T, v uint64, data []byte) {
		if v == 0 {
			v = 1
		}
		got, gotData, err := decodeFile(encodeFile(v, data))
		require.NoError(t, err)
		require.Equal(t, v, got)
		require.Equal(t, len(data), len(gotData))
		require.True(t, bytes.Equal(data, gotData))
	})
}

func TestDecodeFileErrors(t *testing.T) {
	t.Parallel()
	over := encodeFile(1, nil)
	over[16], over[17], over[18], over[19] = 0, 0, 0, 0x10 // 256 MiB
	zeroVersion := encodeFile(0, []byte("x"))              // checksum valid, version 0
	flags := encodeFile(1, nil)
	flags[6] = 1
	tests := []struct {
		in   []byte
		want string
	}{
		{nil, "truncated: 0 bytes, the header alone is 24"},
		{over, "exceeds the limit"},
		{zeroVersion, "state version 0"},
		{flags, "reserved flags set"},
	}
	for i, tc := range tests {
		_, _, err := decodeFile(tc.in)
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}
