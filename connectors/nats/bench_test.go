package nats

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/natstest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
)

// cpuTime is this process's user+system CPU time (the server's is not
// counted: it is another process).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func report(b *testing.B, msgs int, cpu time.Duration) {
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(msgs), "cpu-µs/msg")
}

func benchBatch() *connector.SinkBatch {
	batch := &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaJSON}
	for i := range 1000 {
		p := fmt.Sprintf(`{"n":%d,"text":"%s"}`, i, strings.Repeat("x", 200))
		batch.Messages = append(batch.Messages, connector.Message{ID: uuid.New(), Payload: []byte(p[:199] + "}"), Offset: uint64(i)})
	}
	return batch
}

// BenchmarkSink publishes batches of 1000 200-byte JSON messages to a
// file-backed JetStream stream, each batch acknowledged before the next
// (as the runtime calls Consume), each message with a fresh Nats-Msg-Id.
func BenchmarkSink(b *testing.B) {
	for _, mode := range []string{modeJetStream, modeCore} {
		b.Run(mode, func(b *testing.B) {
			url, n := natstest.URL(b), natstest.NewNames(b)
			natstest.Stream(b, url, n, jetstream.StreamConfig{MaxMsgs: 100_000})
			subject := n.Subject + ".{topic}"
			if mode == modeCore {
				subject = n.Subject + "_core.{topic}" // no stream takes it
			}
			s, err := NewSink(cfg(map[string]any{"url": url, "mode": mode, "subject": subject}))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := s.Open(ctx); err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			batch := benchBatch()
			b.SetBytes(200 * 1000)
			cpu := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range batch.Messages {
					batch.Messages[k].ID = uuid.New() // not a duplicate
				}
				if err := s.Consume(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			report(b, 1000*b.N, cpuTime()-cpu)
		})
	}
}

// BenchmarkSource reads batches of 1000 200-byte JSON messages from a
// durable consumer and acknowledges each (as the runtime does once a
// batch is in Iggy). The stream is filled off the clock.
func BenchmarkSource(b *testing.B) {
	url, n := natstest.URL(b), natstest.NewNames(b)
	natstest.Stream(b, url, n)
	fill, err := NewSink(cfg(map[string]any{"url": url, "subject": n.Subject + ".{topic}"}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := fill.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer fill.Close(ctx)
	batch := benchBatch()
	for i := 0; i < b.N; i++ {
		for k := range batch.Messages {
			batch.Messages[k].ID = uuid.New()
		}
		if err := fill.Consume(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	src, err := NewSource(cfg(map[string]any{"url": url, "stream": n.Stream, "batch_size": int64(1000),
		"max_ack_pending": int64(2000), "batch_wait": "1s"}))
	if err != nil {
		b.Fatal(err)
	}
	if err := src.Open(ctx, nil); err != nil {
		b.Fatal(err)
	}
	defer src.Close(ctx)
	b.SetBytes(200 * 1000)
	cpu := cpuTime()
	b.ResetTimer()
	got := 0
	for got < 1000*b.N {
		bt, err := src.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		got += len(bt.Messages)
		if err := src.(connector.Acker).Ack(ctx, bt); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, got, cpuTime()-cpu)
}
