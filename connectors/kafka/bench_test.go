package kafka

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cpuTime is the process's user+system CPU time so far. kfake runs in
// this process, so it counts the fake broker's work too.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchPayloads(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		p := fmt.Sprintf(`{"n":%d,"text":"%s"}`, i, strings.Repeat("x", 200))
		out[i] = []byte(p[:199] + "}")
	}
	return out
}

// BenchmarkSink produces batches of 1000 200-byte JSON messages to a
// one-partition topic of an in-process kfake cluster, each batch
// acknowledged (acks=all) before the next, as the runtime calls Consume.
func BenchmarkSink(b *testing.B) {
	c := startCluster(b, []string{"out"})
	s, err := NewSink(cfg(map[string]any{"brokers": []any{addrOf(c)}, "topic": "out"}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	batch := &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaJSON}
	for i, p := range benchPayloads(1000) {
		batch.Messages = append(batch.Messages, connector.Message{ID: uuid.New(), Payload: p, Offset: uint64(i)})
	}
	b.SetBytes(200 * 1000)
	cpu := cpuTime(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Consume(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	n := float64(1000 * b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/n, "cpu-µs/msg")
}

// BenchmarkSource polls batches of 1000 200-byte JSON records from a
// preloaded topic and acks each (one offset commit per batch).
func BenchmarkSource(b *testing.B) {
	c := startCluster(b, []string{"in"}, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrOf(c)), kgo.DefaultProduceTopic("in"))
	if err != nil {
		b.Fatal(err)
	}
	payloads := benchPayloads(1000)
	for i := 0; i < b.N; i++ {
		recs := make([]*kgo.Record, len(payloads))
		for j, p := range payloads {
			recs[j] = &kgo.Record{Value: p}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	cl.Close()
	src, err := NewSource(cfg(map[string]any{"brokers": []any{addrOf(c)}, "topics": []any{"in"}, "consumer_group": "bench",
		"batch_size": int64(1000), "fetch_max_wait": "20ms", "session_timeout": "6s"}))
	if err != nil {
		b.Fatal(err)
	}
	if err := src.Open(ctx, nil); err != nil {
		b.Fatal(err)
	}
	defer src.Close(ctx)
	acker := src.(connector.Acker)
	b.SetBytes(200 * 1000)
	cpu := cpuTime(b)
	b.ResetTimer()
	for got := 0; got < 1000*b.N; {
		batch, err := src.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := acker.Ack(ctx, batch); err != nil {
			b.Fatal(err)
		}
		got += len(batch.Messages)
	}
	b.StopTimer()
	n := float64(1000 * b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/n, "cpu-µs/msg")
}
