package s3

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/s3test"
	"github.com/google/uuid"
)

// BenchmarkSink uploads batches of 1000 200-byte JSON messages, one
// json_lines object per batch (upstream's defaults), each confirmed
// before the next, as the runtime calls Consume.
func BenchmarkSink(b *testing.B) {
	tgt := s3test.Shared(b)
	bucket := tgt.Bucket(b)
	s := newSink(b, sinkValues(tgt, bucket, nil))
	batch := &connector.SinkBatch{Stream: "bench", Topic: "t", Schema: connector.SchemaJSON}
	for i := range 1000 {
		p := fmt.Sprintf(`{"n":%d,"text":"%s"}`, i, strings.Repeat("x", 200))
		batch.Messages = append(batch.Messages, connector.Message{ID: uuid.New(), Payload: []byte(p[:198] + `"}`)})
	}
	ctx := context.Background()
	b.SetBytes(200 * 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range batch.Messages {
			batch.Messages[j].Offset = uint64(i*1000 + j) // a new object each time
		}
		if err := s.Consume(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
