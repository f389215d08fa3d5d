package rabbitmq

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/amqptest"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkSink publishes batches of 1000 200-byte JSON messages to a
// durable exchange bound to a durable queue, persistent, each batch
// confirmed before the next (as the runtime calls Consume). The queue is
// purged off the clock.
func BenchmarkSink(b *testing.B) {
	url := amqptest.URL(b)
	exchange := amqptest.Name(b, "x")
	conn, err := amqp.Dial(url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	q := amqptest.Name(b, "q")
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	if err := ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	if err := ch.QueueBind(q, "iggy.messages", exchange, false, nil); err != nil {
		b.Fatal(err)
	}
	s, err := NewSink(cfg(map[string]any{"amqp_url": url, "exchange": exchange}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	batch := &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaJSON}
	for i := range 1000 {
		p := fmt.Sprintf(`{"n":%06d,"text":"%s"}`, i, strings.Repeat("x", 200-len(`{"n":000000,"text":""}`)))
		batch.Messages = append(batch.Messages, connector.Message{ID: uuid.New(), Payload: []byte(p), Offset: uint64(i)})
	}
	b.SetBytes(200 * 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Consume(ctx, batch); err != nil {
			b.Fatal(err)
		}
		if i%20 == 19 {
			b.StopTimer()
			if _, err := ch.QueuePurge(q, false); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
