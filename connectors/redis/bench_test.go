package redis

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/redistest"
	goredis "github.com/redis/go-redis/v9"
)

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func jsonBatch(n int) *connector.SinkBatch {
	b := &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaJSON}
	for i := range n {
		p := fmt.Sprintf(`{"n":%d,"text":"%s"}`, i, strings.Repeat("x", 200))
		p = p[:199] + "}"
		var id [16]byte
		id[15] = byte(i)
		b.Messages = append(b.Messages, connector.Message{ID: id, Payload: []byte(p), Offset: uint64(i)})
	}
	return b
}

// BenchmarkSink writes batches of 1000 200-byte JSON messages in each
// mode that stores, each batch answered before the next (as the runtime
// calls Consume); streams uses offset ids (fresh offsets per batch).
// Reports messages/s and the client's CPU-µs per message.
func BenchmarkSink(b *testing.B) {
	for _, mode := range []string{"streams", "lists", "keys"} {
		b.Run(mode, func(b *testing.B) {
			url := redistest.URL(b)
			p := redistest.Prefix(b)
			values := map[string]any{"url": url, "mode": mode, "stream": p + "{stream}:{topic}:{partition}"}
			if k, ok := map[string]string{"lists": p + "list", "keys": p + "{key}"}[mode]; ok {
				values["key"] = k
			}
			s := newSink(b, values)
			batch := jsonBatch(1000)
			if mode == "keys" {
				for i := range batch.Messages {
					batch.Messages[i].SetHeader("key", header.StringValue(fmt.Sprint(i)))
				}
			}
			c := redistest.Client(b, url)
			ctx := context.Background()
			cpu := cpuTime()
			b.SetBytes(200 * 1000)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range batch.Messages {
					batch.Messages[k].Offset = uint64(i*1000 + k)
				}
				if err := s.Consume(ctx, batch); err != nil {
					b.Fatal(err)
				}
				if mode != "keys" && i%20 == 19 {
					b.StopTimer()
					_ = c.Del(ctx, p+"s:t:0", p+"list").Err() // an offset stream keeps its last id: later ids still grow
					b.StartTimer()
				}
			}
			b.StopTimer()
			n := float64(1000 * b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/n, "cpu-µs/msg")
		})
	}
}

// BenchmarkSource reads a stream of 200-byte JSON entries through the
// consumer group in batches of 1000, acknowledging each; the entries
// are added off the clock.
func BenchmarkSource(b *testing.B) {
	url := redistest.URL(b)
	p := redistest.Prefix(b)
	c := redistest.Client(b, url)
	ctx := context.Background()
	body := `{"text":"` + strings.Repeat("x", 189) + `"}`
	add := func(n int) {
		_, err := c.Pipelined(ctx, func(pl goredis.Pipeliner) error {
			for range n {
				pl.XAdd(ctx, &goredis.XAddArgs{Stream: p + "in", Values: []any{"body", body}})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	src, err := NewSource(cfg(map[string]any{"url": url, "stream": p + "in", "batch_size": 1000, "block": "100ms"}))
	if err != nil {
		b.Fatal(err)
	}
	if err := src.Open(ctx, nil); err != nil {
		b.Fatal(err)
	}
	defer src.Close(ctx)
	b.StopTimer()
	add(1000)
	cpu := time.Duration(0)
	got := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if i > 0 {
			add(1000)
		}
		c0 := cpuTime()
		b.StartTimer()
		for read := 0; read < 1000; {
			batch, err := src.Poll(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := src.(connector.Acker).Ack(ctx, batch); err != nil {
				b.Fatal(err)
			}
			read += len(batch.Messages)
		}
		b.StopTimer()
		cpu += cpuTime() - c0
		got += 1000
	}
	b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(got), "cpu-µs/msg")
}
