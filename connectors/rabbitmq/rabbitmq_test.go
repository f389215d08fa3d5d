package rabbitmq

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/amqptest"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { amqptest.Main(m) }

func cfg(values map[string]any) connector.Config {
	return connector.Config{Key: "rmq", Plugin: connector.PluginConfig{Source: "rmq.toml", Values: values}}
}

// queueOn declares a durable queue bound to exchange with key and
// returns a channel on it.
func queueOn(t *testing.T, url, exchange, key string) (*amqp.Channel, string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	q := amqptest.Name(t, "q")
	_, err = ch.QueueDeclare(q, true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil))
	require.NoError(t, ch.QueueBind(q, key, exchange, false, nil))
	return ch, q
}

// drain reads every message now in q, in order, without acknowledging
// them away (they are acked, so each call returns only new ones).
func drain(t *testing.T, ch *amqp.Channel, q string) []amqp.Delivery {
	t.Helper()
	var out []amqp.Delivery
	for {
		d, ok, err := ch.Get(q, true)
		require.NoError(t, err)
		if !ok {
			return out
		}
		out = append(out, d)
	}
}

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	exchange := amqptest.Name(t, "x")
	ch, q := queueOn(t, url, exchange, "iggy.messages")
	var mu sync.Mutex
	var got []string
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink {
			s, err := NewSink(cfg(map[string]any{"amqp_url": url, "exchange": exchange, "max_retries": int64(0),
				"max_message_size": "1MiB"}))
			require.NoError(t, err)
			return s
		},
		Read: func(t *testing.T) []string {
			mu.Lock()
			defer mu.Unlock()
			for _, d := range drain(t, ch, q) {
				got = append(got, string(d.Body))
			}
			return append([]string(nil), got...)
		},
		// Over max_message_size (the test servers' 1 MiB).
		Poison: []byte(`{"big":"` + strings.Repeat("x", 1100<<10) + `"}`),
	})
}

func TestSinkPublishesHeadersAndMetadata(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	exchange := amqptest.Name(t, "x")
	ch, q := queueOn(t, url, exchange, "orders.#")
	s, err := NewSink(cfg(map[string]any{"amqp_url": url, "exchange": exchange, "routing_key": "orders.created"}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	defer s.Close(ctx)
	id := uuid.New()
	m := connector.Message{ID: id, Payload: []byte(`{"n":1}`), Offset: 42, OriginTimestamp: time.UnixMilli(1_700_000_000_000)}
	m.SetHeader("tenant", header.StringValue("acme"))
	require.NoError(t, s.Consume(ctx, &connector.SinkBatch{Stream: "shop", Topic: "orders", Partition: 3, Schema: connector.SchemaJSON,
		Messages: []connector.Message{m}}))
	ds := drain(t, ch, q)
	require.Len(t, ds, 1)
	d := ds[0]
	require.Equal(t, `{"n":1}`, string(d.Body))
	require.Equal(t, id.String(), d.MessageId, "the Iggy message id, for deduplication")
	require.Equal(t, "application/json", d.ContentType)
	require.Equal(t, uint8(amqp.Persistent), d.DeliveryMode)
	require.Equal(t, "acme", d.Headers["tenant"])
	require.Equal(t, "shop", d.Headers["iggy_stream"])
	require.Equal(t, "orders", d.Headers["iggy_topic"])
	require.EqualValues(t, 3, d.Headers["iggy_partition_id"])
	require.EqualValues(t, 42, d.Headers["iggy_offset"])
}

// With mandatory = true a message no queue takes is refused for good,
// with RabbitMQ's reason, and the others are published.
func TestSinkMandatoryUnroutableIsPermanent(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	exchange := amqptest.Name(t, "x")
	ch, q := queueOn(t, url, exchange, "routed")
	s, err := NewSink(cfg(map[string]any{"amqp_url": url, "exchange": exchange, "routing_key": "nowhere", "mandatory": true}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	defer s.Close(ctx)
	err = s.Consume(ctx, &connector.SinkBatch{Messages: []connector.Message{{ID: uuid.New(), Payload: []byte(`{}`)}}})
	var me connector.MessageErrors
	require.ErrorAs(t, err, &me)
	require.True(t, connector.IsPermanent(me[0]))
	require.ErrorContains(t, me[0], "unroutable")
	require.ErrorContains(t, me[0], "NO_ROUTE")
	require.Empty(t, drain(t, ch, q))
}

// publish sends n JSON messages with message ids to the default exchange
// for queue q and returns their payloads.
func publish(t *testing.T, url, q string, from, n int) []string {
	t.Helper()
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	var out []string
	for i := from; i < from+n; i++ {
		body := `{"n":` + strconv.Itoa(i) + `}`
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "", q, false, false,
			amqp.Publishing{Body: []byte(body), MessageId: uuid.NewString(), DeliveryMode: amqp.Persistent,
				Headers: amqp.Table{"tenant": "acme", "n": int32(i)}})
		require.NoError(t, err)
		ok, err := dc.WaitContext(context.Background())
		require.NoError(t, err)
		require.True(t, ok)
		out = append(out, body)
	}
	return out
}

func TestSourceConformance(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	q := amqptest.Name(t, "q")
	added := 0
	connectortest.Source(t, connectortest.SourceSuite{
		New: func(t *testing.T) connector.Source {
			s, err := NewSource(cfg(map[string]any{"amqp_url": url, "queue": q, "batch_size": int64(5),
				"batch_wait": "20ms", "include_metadata": false}))
			require.NoError(t, err)
			return s
		},
		Add: func(t *testing.T, n int) []string {
			// The queue must exist before the first publish.
			conn, err := amqp.Dial(url)
			require.NoError(t, err)
			ch, err := conn.Channel()
			require.NoError(t, err)
			_, err = ch.QueueDeclare(q, true, false, false, false, nil)
			require.NoError(t, err)
			conn.Close()
			out := publish(t, url, q, added, n)
			added += n
			return out
		},
		StableIDs:     true, // the publisher's message_id, kept across redeliveries
		AckedPosition: true, // RabbitMQ keeps what was not acknowledged
	})
}

func TestSourceKeepsHeadersAndBindsToAnExchange(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	q, exchange := amqptest.Name(t, "q"), amqptest.Name(t, "x")
	src, err := NewSource(cfg(map[string]any{"amqp_url": url, "queue": q, "exchange": exchange, "routing_key": "orders.*"}))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, src.Open(ctx, nil))
	defer src.Close(ctx)
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	for _, key := range []string{"orders.created", "payments.made"} {
		require.NoError(t, ch.PublishWithContext(ctx, exchange, key, false, false,
			amqp.Publishing{Body: []byte(`{"key":"` + key + `"}`), Headers: amqp.Table{"tenant": "acme"}}))
	}
	b, err := src.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b.Messages, 1, "only the bound routing key")
	m := b.Messages[0]
	require.Equal(t, `{"key":"orders.created"}`, string(m.Payload))
	v, ok := m.Header("tenant")
	require.True(t, ok)
	require.Equal(t, "acme", v.String())
	k, ok := m.Header("rabbitmq_routing_key")
	require.True(t, ok)
	require.Equal(t, "orders.created", k.String())
	require.NoError(t, src.(connector.Acker).Ack(ctx, b))
}

// The source acknowledges only what the runtime acknowledged: deliveries
// of a batch that was never acked come back to the next consumer.
func TestSourceRedeliversWhatWasNotAcked(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	q := amqptest.Name(t, "q")
	open := func() connector.Source {
		s, err := NewSource(cfg(map[string]any{"amqp_url": url, "queue": q, "batch_size": int64(10), "batch_wait": "50ms"}))
		require.NoError(t, err)
		require.NoError(t, s.Open(context.Background(), nil))
		return s
	}
	first := open()
	want := publish(t, url, q, 0, 10)
	ctx := context.Background()
	b, err := first.Poll(ctx)
	require.NoError(t, err)
	first.(connector.Acker).Nack(ctx, b, context.Canceled) // not in Iggy: stays unacknowledged
	require.NoError(t, first.Close(ctx))                   // a crash: the deliveries go back

	second := open()
	defer second.Close(ctx)
	var got []string
	for len(got) < len(want) {
		b, err := second.Poll(ctx)
		require.NoError(t, err)
		for _, m := range b.Messages {
			got = append(got, string(m.Payload))
		}
		require.NoError(t, second.(connector.Acker).Ack(ctx, b))
	}
	sort.Strings(got)
	sort.Strings(want)
	require.Equal(t, want, got)
}

// A message the server refuses itself (its max_message_size is below the
// sink's) closes the channel; the sink finds the message, reports it
// with the server's reason, and publishes the others.
func TestSinkFindsAMessageTheServerRefused(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	exchange := amqptest.Name(t, "x")
	ch, q := queueOn(t, url, exchange, "iggy.messages")
	s, err := NewSink(cfg(map[string]any{"amqp_url": url, "exchange": exchange, "max_retries": int64(0)}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	defer s.Close(ctx)
	big := []byte(strings.Repeat("x", 2<<20))
	msgs := []connector.Message{{ID: uuid.New(), Payload: []byte(`{"n":0}`)}, {ID: uuid.New(), Payload: big},
		{ID: uuid.New(), Payload: []byte(`{"n":2}`)}}
	err = s.Consume(ctx, &connector.SinkBatch{Messages: msgs})
	var me connector.MessageErrors
	require.ErrorAs(t, err, &me)
	require.Len(t, me, 1)
	require.True(t, connector.IsPermanent(me[1]))
	require.ErrorContains(t, me[1], "RabbitMQ refused the message")
	var bodies []string
	for _, d := range drain(t, ch, q) {
		bodies = append(bodies, string(d.Body))
	}
	require.Contains(t, bodies, `{"n":2}`)
	require.Contains(t, bodies, `{"n":0}`)
	require.NotContains(t, bodies, string(big))
}
