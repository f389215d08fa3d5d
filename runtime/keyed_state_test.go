package runtime

import (
	"context"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

func TestSourceStateEnvelope(t *testing.T) {
	for _, src := range [][]byte{nil, []byte("pos=7"), {0, 1, 2}} {
		s, k, err := splitState(joinState(src, []byte("FCS1")))
		require.NoError(t, err)
		require.Equal(t, src, s)
		require.Equal(t, []byte("FCS1"), k)
	}
	s, k, err := splitState([]byte("plain source state"))
	require.NoError(t, err)
	require.Equal(t, "plain source state", string(s), "a record without the envelope is the source's alone")
	require.Nil(t, k)
	_, _, err = splitState([]byte(keyedStateMagic + "\x09ab"))
	require.Error(t, err, "cut short")
}

func FuzzSplitState(f *testing.F) {
	f.Add(joinState([]byte("abc"), []byte("FCS1")))
	f.Add([]byte(keyedStateMagic))
	f.Fuzz(func(t *testing.T, rec []byte) {
		s, k, err := splitState(rec)
		if err != nil || k == nil {
			return
		}
		s2, k2, err := splitState(joinState(s, k))
		require.NoError(t, err)
		require.Equal(t, s, s2)
		require.Equal(t, k, k2)
	})
}

func TestSinkKeyedStateRecord(t *testing.T) {
	k := &sinkKeyed{through: map[string]uint64{"s/t/0": 41, "s/u/3": 7}}
	rec := k.encode([]byte("FCS1rest"))
	r := &sinkKeyed{through: map[string]uint64{}}
	rest, err := r.decode(rec)
	require.NoError(t, err)
	require.Equal(t, "FCS1rest", string(rest))
	require.Equal(t, k.through, r.through)

	msgs := make([]connector.Message, 5)
	for i := range msgs {
		msgs[i] = connector.Message{Stream: "s", Topic: "t", Partition: 0, Offset: uint64(39 + i)}
	}
	require.Equal(t, 3, r.applied(msgs), "offsets 39..41 are in the state, 42 and 43 are not")
	msgs[0].Partition, msgs[0].Topic = 1, "t"
	require.Equal(t, 0, r.applied(msgs[:1]), "another partition")
	var none *sinkKeyed
	require.Equal(t, 0, none.applied(msgs))
	require.NoError(t, none.commit(context.Background(), nil, "s", "t", 0, 1))
	for _, bad := range [][]byte{nil, []byte("FSKS1\x05"), []byte("FSKS1\x01\x09ab")} {
		_, err := (&sinkKeyed{through: map[string]uint64{}}).decode(bad)
		require.Error(t, err, "%q", bad)
	}
}

func FuzzSinkKeyedDecode(f *testing.F) {
	f.Add((&sinkKeyed{through: map[string]uint64{"s/t/0": 1}}).encode([]byte("FCS1")))
	f.Fuzz(func(t *testing.T, rec []byte) {
		_, _ = (&sinkKeyed{through: map[string]uint64{}}).decode(rec)
	})
}
