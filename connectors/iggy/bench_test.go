package iggy

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/iggy"
)

// BenchmarkSource reads 200-byte messages from an origin broker in this
// process and acknowledges each batch (the origin offset stored), at batch
// 1000; CPU-µs/msg counts this process's CPU, origin broker included.
func BenchmarkSource(b *testing.B) {
	o := newOrigin(b)
	payload := []byte(`{"n":1,"pad":"` + strings.Repeat("x", 200-15) + `"}`)
	for sent := 0; sent < b.N; {
		k := min(1000, b.N-sent)
		msgs := make([]iggy.Message, k)
		for i := range msgs {
			msgs[i] = iggy.Message{Payload: payload}
		}
		if _, err := o.client.SendMessages(context.Background(), iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), msgs); err != nil {
			b.Fatal(err)
		}
		sent += k
	}
	src, err := NewSource(o.config(map[string]any{"batch_size": 1000}))
	if err != nil {
		b.Fatal(err)
	}
	s := src.(*Source)
	ctx := context.Background()
	if err := s.Open(ctx, nil); err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	var before syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	b.ResetTimer()
	for read := 0; read < b.N; {
		batch, err := s.Poll(ctx)
		if err != nil {
			b.Fatal(err)
		}
		read += len(batch.Messages)
		if err := s.Ack(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "CPU-µs/msg")
}
