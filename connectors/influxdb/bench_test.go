package influxdb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/influxtest"
	"github.com/google/uuid"
)

// BenchmarkSink writes batches of 1000 200-byte JSON messages with the
// default keys (one request per batch_size = 1000 points), as the
// runtime calls Consume; each batch has new offsets, so new points.
func BenchmarkSink(b *testing.B) {
	url := influxtest.URL(b)
	db := influxtest.Database(b, url)
	s := newSink(b, sinkValues(url, db, map[string]any{"batch_size": int64(1000)}))
	batch := &connector.SinkBatch{Stream: "bench", Topic: "t", Schema: connector.SchemaJSON}
	for i := range 1000 {
		p := fmt.Sprintf(`{"n":%d,"text":"%s`, i, strings.Repeat("x", 200))
		batch.Messages = append(batch.Messages, connector.Message{ID: uuid.New(), Payload: []byte(p[:198] + `"}`)})
	}
	ctx := context.Background()
	b.SetBytes(200 * 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range batch.Messages {
			m := &batch.Messages[j]
			m.Offset = uint64(i*1000 + j)
			m.Timestamp = time.Unix(1_700_000_000, 0).Add(time.Duration(m.Offset) * time.Microsecond)
		}
		if err := s.Consume(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
