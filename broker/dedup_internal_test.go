package broker

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

func dedupBatch(t testing.TB, n int) ([]byte, [][16]byte) {
	msgs := make([]wire.Message, n)
	ids := make([][16]byte, n)
	for i := range msgs {
		rand.Read(ids[i][:])
		msgs[i] = wire.Message{ID: ids[i], Payload: []byte(`{"n":1}`)}
	}
	b, err := wire.AppendBatch(nil, msgs)
	require.NoError(t, err)
	return b, ids
}

// A batch of new ids passes whole, a repeat inside it or of an earlier
// batch is left out.
func TestDedupFilterFastPathAndRepeats(t *testing.T) {
	d := newDedupIDs(Dedup{MaxEntries: 100})
	now := time.Now()
	b, ids := dedupBatch(t, 10)
	kept, got, err := d.filter(b, now)
	require.NoError(t, err)
	require.Equal(t, &b[0], &kept[0], "nothing repeats: the batch itself")
	require.Equal(t, ids, got)
	for _, id := range got {
		d.add(id, now)
	}
	kept, got, err = d.filter(b, now)
	require.NoError(t, err)
	require.Nil(t, kept, "every id was appended before")
	require.Empty(t, got)

	msgs := []wire.Message{{ID: [16]byte{1}, Payload: []byte("a")}, {ID: [16]byte{2}, Payload: []byte("b")}, {ID: [16]byte{1}, Payload: []byte("c")}}
	b, err = wire.AppendBatch(nil, msgs)
	require.NoError(t, err)
	kept, got, err = d.filter(b, now)
	require.NoError(t, err)
	require.Equal(t, [][16]byte{{1}, {2}}, got)
	out, err := wire.AppendRecordMessages(nil, kept)
	require.NoError(t, err)
	require.Len(t, out, 2)
	require.Equal(t, "b", string(out[1].Payload))
}

// BenchmarkDedupFilter is the cost per message of deduplication on a
// send of 1000 new ids (filter and add):
//
//	go test -run '^$' -bench DedupFilter ./broker/
func BenchmarkDedupFilter(b *testing.B) {
	d := newDedupIDs(Dedup{MaxEntries: 4096, Expiry: 10 * time.Minute})
	batches := make([][]byte, 16)
	for i := range batches {
		batches[i], _ = dedupBatch(b, 1000)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		now := time.Now()
		batch := batches[i%len(batches)]
		// A batch seen 16 batches ago has been pushed out of 4096 ids.
		_, ids, err := d.filter(batch, now)
		if err != nil {
			b.Fatal(err)
		}
		for _, id := range ids {
			d.add(id, now)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/msg")
}
