package iggy_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
)

// The benchmarks run against the embedded broker in the same process on
// loopback, so allocs/msg counts the broker's allocations too;
// BenchmarkClientEncode and BenchmarkClientDecodePoll measure the client
// alone.

const benchBatch = 1000

var benchSizes = []int{100, 1024}

// benchStores are the broker storages the send and poll benchmarks run
// on: in memory, and file-backed (segment files, fsync every second).
var benchStores = []struct {
	name string
	opt  func(b *testing.B) brokertest.Option
}{
	{"mem", func(*testing.B) brokertest.Option { return brokertest.InMemory() }},
	{"disk", func(b *testing.B) brokertest.Option { return brokertest.DataDir(b.TempDir()) }},
}

func benchMessages(size int) []iggy.Message {
	msgs := make([]iggy.Message, benchBatch)
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	for i := range msgs {
		msgs[i].Payload = payload
	}
	return msgs
}

// reportPerMessage adds msgs/s and allocs/msg (process-wide mallocs per
// message) to a benchmark that moved n messages.
func reportPerMessage(b *testing.B, n int, mallocs0 uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(ms.Mallocs-mallocs0)/float64(n), "allocs/msg")
}

func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

func BenchmarkSend(b *testing.B) {
	for _, store := range benchStores {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%dB", store.name, size), func(b *testing.B) { benchSend(b, store.opt(b), size) })
		}
	}
}

func benchSend(b *testing.B, storage brokertest.Option, size int) {
	br := startBroker(b, storage)
	c := dial(b, br.Addr(), iggy.WithHeartbeat(0))
	s, tp := newTopic(b, c, 1)
	msgs := benchMessages(size)
	ctx := context.Background()
	b.SetBytes(int64(size * benchBatch))
	b.ReportAllocs()
	m0 := mallocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		if n++; n%100 == 0 { // keep the in-memory broker small
			b.StopTimer()
			require.NoError(b, c.PurgeTopic(ctx, s, tp))
			b.StartTimer()
		}
		for i := range msgs {
			msgs[i].ID = [16]byte{} // a new id per message, as a producer would
			msgs[i].OriginTimestamp = time.Time{}
		}
		if _, err := c.SendMessages(ctx, s, tp, iggy.ToPartition(0), msgs); err != nil {
			b.Fatal(err)
		}
	}
	reportPerMessage(b, b.N*benchBatch, m0)
}

func BenchmarkPoll(b *testing.B) {
	for _, store := range benchStores {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("%s/%dB", store.name, size), func(b *testing.B) { benchPoll(b, store.opt(b), size) })
		}
	}
}

func benchPoll(b *testing.B, storage brokertest.Option, size int) {
	const stored = 100 * benchBatch
	br := startBroker(b, storage)
	c := dial(b, br.Addr(), iggy.WithHeartbeat(0))
	s, tp := newTopic(b, c, 1)
	msgs := benchMessages(size)
	ctx := context.Background()
	for range stored / benchBatch {
		_, err := c.SendMessages(ctx, s, tp, iggy.ToPartition(0), msgs)
		require.NoError(b, err)
	}
	consumer := iggy.SingleConsumer(iggy.NumericID(1))
	b.SetBytes(int64(size * benchBatch))
	b.ReportAllocs()
	m0 := mallocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		offset := uint64(i*benchBatch) % stored
		i++
		r, err := c.PollMessages(ctx, iggy.PollRequest{
			Consumer: consumer, Stream: s, Topic: tp,
			Partition: iggy.Partition(0), Strategy: iggy.AtOffset(offset), Count: benchBatch,
		})
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Messages) != benchBatch {
			b.Fatalf("polled %d messages at offset %d", len(r.Messages), offset)
		}
	}
	reportPerMessage(b, b.N*benchBatch, m0)
}

func BenchmarkProducer(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			br := startBroker(b, brokertest.InMemory())
			c := dial(b, br.Addr(), iggy.WithHeartbeat(0))
			s, tp := newTopic(b, c, 1)
			p, err := iggy.NewProducer(c, s, tp, iggy.WithPartitioning(iggy.ToPartition(0)))
			require.NoError(b, err)
			defer p.Close(context.Background())
			msgs := benchMessages(size)
			ctx := context.Background()
			b.SetBytes(int64(size * benchBatch))
			b.ReportAllocs()
			m0 := mallocs()
			b.ResetTimer()
			var last *iggy.Ack
			for n := 1; n <= b.N; n++ {
				last = p.Send(ctx, msgs...)
				if n%100 == 0 { // keep the in-memory broker small
					require.NoError(b, p.Flush(ctx)) // timed: the sends count
					b.StopTimer()
					require.NoError(b, c.PurgeTopic(ctx, s, tp))
					b.StartTimer()
				}
			}
			require.NoError(b, p.Flush(ctx))
			b.StopTimer()
			require.NoError(b, last.Err())
			reportPerMessage(b, b.N*benchBatch, m0)
		})
	}
}
