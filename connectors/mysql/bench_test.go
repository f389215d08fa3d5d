package mysql

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/mysqltest"
	"github.com/google/uuid"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSink inserts batches of 1000 200-byte JSON messages (every
// metadata column), each batch acknowledged before the next, as the
// runtime calls Consume; every iteration writes new ids. cpu-µs/msg is
// this process's CPU (the sink and driver), not the server's.
func BenchmarkSink(b *testing.B) {
	for _, format := range []string{"json", "binary"} {
		b.Run(format, func(b *testing.B) {
			dsn := mysqltest.Database(b)
			s := newSink(b, map[string]any{"dsn": dsn, "table": "bench", "auto_create_table": true,
				"payload_format": format, "batch_size": int64(1000)})
			ctx := context.Background()
			if err := s.Open(ctx); err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			batch := &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaJSON}
			for i := range 1000 {
				p := fmt.Sprintf(`{"n":%d,"text":"%s"}`, i, strings.Repeat("x", 200))
				p = p[:198] + `"}`
				batch.Messages = append(batch.Messages, connector.Message{Payload: []byte(p), Offset: uint64(i),
					Stream: "s", Topic: "t", Timestamp: time.Now()})
			}
			b.SetBytes(200 * 1000)
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for k := range batch.Messages {
					batch.Messages[k].ID = uuid.New()
				}
				c0 := cpuTime()
				b.StartTimer()
				if err := s.Consume(ctx, batch); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += cpuTime() - c0
				b.StartTimer()
			}
			b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(1000*b.N), "cpu-µs/msg")
		})
	}
}
