package wasm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTransactionsKeepOnlyCommittedChanges(t *testing.T) {
	s := NewMemState(0)
	require.NoError(t, s.Put([]byte("a"), []byte("1")))

	t1 := s.Begin()
	require.NoError(t, t1.Put([]byte("a"), []byte("2")))
	t1.Delete([]byte("gone"))
	t2 := s.Begin()
	v, ok := t2.Get([]byte("a"))
	require.True(t, ok)
	require.Equal(t, "2", string(v), "a later transaction sees an earlier open one")
	require.NoError(t, t2.Put([]byte("b"), []byte("x")))
	v, _ = s.Get([]byte("a"))
	require.Equal(t, "1", string(v), "nothing is committed yet")

	t2.Rollback()
	require.NoError(t, t1.Commit())
	require.Equal(t, map[string][]byte{"a": []byte("2")}, s.Snapshot(), "t1 kept, t2 dropped")
	require.NoError(t, t1.Commit(), "a second commit does nothing")
	require.Equal(t, map[string][]byte{"a": []byte("2")}, s.Snapshot())
}

func TestATransactionIsBoundBySize(t *testing.T) {
	s := NewMemState(10)
	tx := s.Begin()
	require.ErrorIs(t, tx.Put([]byte("key"), []byte("0123456789")), ErrStateFull)
}

func TestStateRoundTrip(t *testing.T) {
	s := NewMemState(0)
	require.NoError(t, s.Put([]byte("k1"), []byte("v1")))
	require.NoError(t, s.Put([]byte{0, 0xff}, []byte{}))
	b, err := s.MarshalBinary()
	require.NoError(t, err)
	open := s.Begin()
	require.NoError(t, open.Put([]byte("x"), []byte("y")))

	r := NewMemState(0)
	require.NoError(t, r.UnmarshalBinary(b))
	require.Equal(t, s.Snapshot(), r.Snapshot())
	require.NoError(t, r.UnmarshalBinary(b), "loading again replaces, not merges")
	require.Equal(t, s.Snapshot(), r.Snapshot())

	for _, bad := range [][]byte{nil, []byte("FWS1"), []byte("FWS1\x01\x05ab"), append(b, 0), []byte("nope")} {
		require.Error(t, r.UnmarshalBinary(bad), "%q", bad)
		require.Equal(t, s.Snapshot(), r.Snapshot(), "a bad record changes nothing")
	}
}

func FuzzStateUnmarshal(f *testing.F) {
	s := NewMemState(0)
	_ = s.Put([]byte("k"), []byte("v"))
	b, _ := s.MarshalBinary()
	f.Add(b)
	f.Add([]byte("FWS1\x02\x01k\x01v\x01k\x01v"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewMemState(1 << 16)
		if err := r.UnmarshalBinary(data); err != nil {
			return
		}
		out, err := r.MarshalBinary()
		require.NoError(t, err)
		again := NewMemState(1 << 16)
		require.NoError(t, again.UnmarshalBinary(out))
		require.Equal(t, r.Snapshot(), again.Snapshot())
	})
}
