package rabbitmq

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "rabbitmq",
		Aliases:   []string{"libiggy_connector_rabbitmq_source"},
		Summary:   "consumes a RabbitMQ queue, acknowledging each batch only after it is in Iggy",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
}

// Source is the rabbitmq source.
type Source struct {
	url, safeURL           string
	queue                  string
	declareQueue, durableQ bool
	exchange, exchangeType string
	durableX               bool
	routingKey             string
	batchSize, prefetch    int
	batchWait, timeout     time.Duration
	schema                 connector.Schema
	metadata               bool
	log                    *slog.Logger

	link       *link
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery

	mu   sync.Mutex
	tags map[*connector.Batch]uint64 // the last delivery tag of each batch not yet acked or nacked
}

// NewSource builds a rabbitmq source from its configuration.
func NewSource(cfg connector.Config) (connector.Source, error) {
	set, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		url: set.String("amqp_url"), queue: set.String("queue"), declareQueue: set.Bool("declare_queue"),
		durableQ: set.Bool("durable_queue"), exchange: set.String("exchange"), exchangeType: set.String("exchange_type"),
		durableX: set.Bool("durable_exchange"), routingKey: set.String("routing_key"), batchSize: set.Int("batch_size"),
		prefetch: set.Int("prefetch_count"), batchWait: set.Duration("batch_wait"), timeout: seconds(set.Int("timeout_secs")),
		schema: connector.Schema(set.String("schema")), metadata: set.Bool("include_metadata"), log: log,
		tags: map[*connector.Batch]uint64{},
	}
	if s.prefetch == 0 {
		s.prefetch = 2 * s.batchSize
	}
	s.safeURL = safeURL(s.url)
	return s, nil
}

// Open connects, declares what the configuration asks for and starts
// consuming with manual acknowledgements. The state is unused: RabbitMQ
// keeps what was not acknowledged.
func (s *Source) Open(ctx context.Context, _ []byte) error {
	l, err := dial(ctx, s.url, s.timeout)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", s.safeURL, err)
	}
	ch, err := l.channel(ctx, s.timeout)
	if err != nil {
		_ = l.close()
		return fmt.Errorf("open a channel on %s: %w", s.safeURL, err)
	}
	// Each step is one RPC, bounded by timeout_secs (see link).
	step := func(what, method string, f func() error) error {
		if err := l.bounded(ctx, s.timeout, method, f); err != nil {
			_ = l.close()
			return fmt.Errorf("%s on %s: %w", what, s.safeURL, err)
		}
		return nil
	}
	if s.declareQueue {
		err := step(fmt.Sprintf("declare queue %q", s.queue), "queue.declare", func() error {
			_, err := ch.QueueDeclare(s.queue, s.durableQ, false, false, false, nil)
			return err
		})
		if err != nil {
			return err
		}
	}
	if s.exchange != "" {
		err := step(fmt.Sprintf("declare exchange %q", s.exchange), "exchange.declare", func() error {
			return ch.ExchangeDeclare(s.exchange, s.exchangeType, s.durableX, false, false, false, nil)
		})
		if err != nil {
			return err
		}
		err = step(fmt.Sprintf("bind queue %q to exchange %q with %q", s.queue, s.exchange, s.routingKey), "queue.bind", func() error {
			return ch.QueueBind(s.queue, s.routingKey, s.exchange, false, nil)
		})
		if err != nil {
			return err
		}
	}
	if err := step("set the prefetch count", "basic.qos", func() error { return ch.Qos(s.prefetch, 0, false) }); err != nil {
		return err
	}
	var d <-chan amqp.Delivery
	err = step(fmt.Sprintf("consume queue %q", s.queue), "basic.consume", func() (err error) {
		d, err = ch.Consume(s.queue, "", false, false, false, false, nil)
		return err
	})
	if err != nil {
		return err
	}
	s.link, s.ch, s.deliveries = l, ch, d
	return nil
}

// Poll waits for a delivery, then gathers up to batch_size within
// batch_wait. A lost connection is an error: the runtime restarts the
// source, and RabbitMQ redelivers what was not acknowledged.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	var ds []amqp.Delivery
	select {
	case d, ok := <-s.deliveries:
		if !ok {
			return nil, s.lost()
		}
		ds = append(ds, d)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	timer := time.NewTimer(s.batchWait)
	defer timer.Stop()
gather:
	for len(ds) < s.batchSize {
		select {
		case d, ok := <-s.deliveries:
			if !ok {
				break gather // deliver what came; the next Poll reports the loss
			}
			ds = append(ds, d)
		case <-timer.C:
			break gather
		case <-ctx.Done():
			break gather
		}
	}
	b := &connector.Batch{Schema: s.schema, Messages: make([]connector.Message, len(ds))}
	for i := range ds {
		b.Messages[i] = s.message(&ds[i])
	}
	s.mu.Lock()
	s.tags[b] = ds[len(ds)-1].DeliveryTag
	s.mu.Unlock()
	return b, nil
}

func (s *Source) lost() error {
	return fmt.Errorf("the connection to %s or its channel was closed; unacknowledged messages will be delivered again", s.safeURL)
}

// message is the Iggy message for a delivery.
func (s *Source) message(d *amqp.Delivery) connector.Message {
	m := connector.Message{Payload: d.Body, OriginTimestamp: d.Timestamp}
	if id, err := uuid.Parse(d.MessageId); err == nil {
		m.ID = id
	}
	keys := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v, ok := headerValue(d.Headers[k]); ok && fitsIggy(k, v.Data) {
			m.SetHeader(k, v)
		} else {
			s.log.Debug("an AMQP header Iggy cannot carry is left out (a table or array, or not 1..255 bytes)", "header", k)
		}
	}
	if s.metadata {
		for _, h := range [...][2]string{{"rabbitmq_exchange", d.Exchange}, {"rabbitmq_routing_key", d.RoutingKey},
			{"rabbitmq_message_id", d.MessageId}} {
			if fitsIggy(h[0], []byte(h[1])) { // the default exchange's name is ""
				m.Headers = append(m.Headers, connector.StringHeader(h[0], h[1]))
			}
		}
	}
	return m
}

// fitsIggy reports whether a header key and value fit Iggy's limits:
// 1..255 bytes each.
func fitsIggy(key string, value []byte) bool {
	return len(key) >= 1 && len(key) <= 255 && len(value) >= 1 && len(value) <= 255
}

func (s *Source) take(b *connector.Batch) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tag, ok := s.tags[b]
	delete(s.tags, b)
	return tag, ok
}

// Ack acknowledges the batch's deliveries (and any before them) once the
// batch is in Iggy. basic.ack has no answer, but its write can block on
// a server that stopped reading: it is bounded like the RPCs.
func (s *Source) Ack(ctx context.Context, b *connector.Batch) error {
	tag, ok := s.take(b)
	if !ok {
		return nil
	}
	if err := s.link.bounded(ctx, s.timeout, "basic.ack", func() error { return s.ch.Ack(tag, true) }); err != nil {
		return fmt.Errorf("acknowledge deliveries up to %d on %s (they will be delivered again): %w", tag, s.safeURL, err)
	}
	return nil
}

// Nack leaves the deliveries unacknowledged: the runtime sends the same
// batch again and acknowledges it then (returning them to the queue
// would deliver them twice).
func (s *Source) Nack(_ context.Context, b *connector.Batch, cause error) {
	s.log.Debug("batch not yet in Iggy; its deliveries stay unacknowledged", "queue", s.queue, "messages", len(b.Messages), "cause", cause)
}

// Close closes the connection; unacknowledged deliveries go back to the
// queue.
func (s *Source) Close(context.Context) error {
	if s.link != nil {
		return s.link.close()
	}
	return nil
}
