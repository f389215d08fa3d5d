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

// testJournal returns a journal holding recs, in order.
func testJournal(recs ...[]byte) []byte {
	b := journalHeader()
	for _, r := range recs {
		b = append(b, r...)
	}
	return b
}

// FuzzJournal feeds arbitrary bytes to the journal decoder: it must never
// panic; what it accepts must decode again to the same result; the torn
// tail it cuts off must not hold a record; and every live record must be a
// valid put. Seeds: testdata/fuzz/FuzzJournal and the f.Add calls.
func FuzzJournal(f *testing.F) {
	put := func(key string, v uint64, data string) []byte { return encodeRecord(recordPut, key, v, []byte(data)) }
	del := func(key string) []byte { return encodeRecord(recordDelete, key, 0, nil) }
	f.Add(journalHeader())
	f.Add(testJournal(put("a", 1, "x"), put("a", 2, "y"), put("b", 1, "")))
	f.Add(testJournal(put("a", 1, "x"), del("a"), put("a", 1, "z")))
	torn := testJournal(put("a", 1, "x"), put("a", 2, "long enough to tear"))
	f.Add(torn[:len(torn)-5])
	mid := testJournal(put("a", 1, "x"), put("b", 1, "y"))
	mid[journalHeaderSize+recordHeaderSize] ^= 1
	f.Add(mid)
	f.Add([]byte(journalMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		live, end, err := decodeJournal(b)
		if err != nil {
			require.Nil(t, live)
			var je *journalError
			require.ErrorAs(t, err, &je)
			require.GreaterOrEqual(t, je.Offset, int64(0))
			require.Less(t, je.Offset, int64(len(b))+1)
			return
		}
		require.GreaterOrEqual(t, end, journalHeaderSize)
		require.LessOrEqual(t, end, len(b))
		require.Equal(t, -1, nextRecord(b, end+1), "a record after the torn tail")
		again, end2, err := decodeJournal(b[:end])
		require.NoError(t, err)
		require.Equal(t, end, end2)
		require.Equal(t, live, again)
		for key, rec := range live {
			r, n, err := decodeRecord(rec)
			require.NoError(t, err)
			require.Equal(t, len(rec), n)
			require.Equal(t, byte(recordPut), r.kind)
			require.Equal(t, key, r.key)
			require.Equal(t, rec, encodeRecord(r.kind, r.key, r.version, r.data), "accepted bytes are not the canonical encoding")
		}
	})
}

// FuzzRecordRoundTrip checks that every valid record encodes and decodes
// back to itself.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add("src", uint64(1), []byte("offset=1"), false)
	f.Add("k", uint64(0), []byte{}, true)
	f.Fuzz(func(t *testing.T, key string, v uint64, data []byte, del bool) {
		if ValidateKey(key) != nil {
			return
		}
		kind := byte(recordPut)
		if del {
			kind, v, data = recordDelete, 0, nil
		} else if v == 0 {
			v = 1
		}
		rec := encodeRecord(kind, key, v, data)
		r, n, err := decodeRecord(rec)
		require.NoError(t, err)
		require.Equal(t, len(rec), n)
		require.Equal(t, record{kind: kind, key: key, version: v, data: r.data}, r)
		require.True(t, bytes.Equal(data, r.data))
	})
}
