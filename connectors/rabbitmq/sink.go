package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "rabbitmq",
		Aliases: []string{"libiggy_connector_rabbitmq_sink"},
		Summary: "publishes messages to a RabbitMQ exchange with publisher confirms before the offset is committed",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}

// Sink is the rabbitmq sink.
type Sink struct {
	url, safeURL           string
	exchange, exchangeType string
	routingKey             string
	durable, declare       bool
	deliveryMode           uint8
	metadata, verbose      bool
	mandatory              bool
	maxRetries             int
	retryDelay, maxDelay   time.Duration
	timeout                time.Duration
	maxSize                int64
	log                    *slog.Logger

	mu   sync.Mutex // guards link and ch; Consume calls are sequential
	link *link
	ch   *amqp.Channel
	back chan amqp.Return // returned (unroutable) messages of ch
}

// NewSink builds a rabbitmq sink from its configuration.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	set, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{
		url: set.String("amqp_url"), exchange: set.String("exchange"), exchangeType: set.String("exchange_type"),
		routingKey: set.String("routing_key"), durable: set.Bool("durable_exchange"), declare: set.Bool("declare_exchange"),
		deliveryMode: amqp.Persistent, metadata: set.Bool("include_metadata"), verbose: set.Bool("verbose_logging"),
		mandatory: set.Bool("mandatory"), maxRetries: set.Int("max_retries"),
		retryDelay: seconds(set.Int("retry_delay_secs")), maxDelay: seconds(set.Int("max_retry_delay_secs")),
		timeout: seconds(set.Int("timeout_secs")), maxSize: set.Size("max_message_size"), log: log,
	}
	s.safeURL = safeURL(s.url)
	if set.String("delivery_mode") == "non_persistent" {
		s.deliveryMode = amqp.Transient
	}
	return s, nil
}

// Open connects and declares the exchange. A server that is down makes
// Open fail, and the runtime retries it with backoff.
func (s *Sink) Open(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connect(ctx)
}

// connect (re)opens the connection and a confirm-mode channel. Caller
// holds s.mu.
func (s *Sink) connect(ctx context.Context) error {
	s.closeLocked()
	l, err := dial(ctx, s.url, s.timeout)
	if err != nil {
		return connector.Unavailable(fmt.Errorf("connect to %s: %w", s.safeURL, err))
	}
	ch, err := l.channel(ctx, s.timeout)
	if err != nil {
		_ = l.close()
		return connector.Unavailable(fmt.Errorf("open a channel on %s: %w", s.safeURL, err))
	}
	if s.declare && s.exchange != "" {
		err := l.bounded(ctx, s.timeout, "exchange.declare", func() error {
			return ch.ExchangeDeclare(s.exchange, s.exchangeType, s.durable, false, false, false, nil)
		})
		if err != nil {
			_ = l.close()
			return fmt.Errorf("declare exchange %q (%s, durable %v) on %s: %w", s.exchange, s.exchangeType, s.durable, s.safeURL, err)
		}
	}
	if err := l.bounded(ctx, s.timeout, "confirm.select", func() error { return ch.Confirm(false) }); err != nil {
		_ = l.close()
		return connector.Unavailable(fmt.Errorf("confirm mode on %s: %w", s.safeURL, err))
	}
	s.back = ch.NotifyReturn(make(chan amqp.Return, 64))
	s.link, s.ch = l, ch
	return nil
}

func (s *Sink) closeLocked() {
	if s.link != nil {
		_ = s.link.close()
	}
	s.link, s.ch, s.back = nil, nil, nil
}

// ConsumesOutOfOrder marks the sink as a connector.UnorderedSink (it may
// read with ordering = "key" or "none"): each message is published and confirmed on its own.
func (s *Sink) ConsumesOutOfOrder() {}

// Close closes the connection.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	return nil
}

// Consume publishes the batch and returns when RabbitMQ confirmed every
// message (see the package doc for what fails how).
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	msgs := make([]amqp.Publishing, len(b.Messages))
	for i := range b.Messages {
		msgs[i] = s.publishing(b, &b.Messages[i])
	}
	failed := connector.MessageErrors{}
	todo := make([]int, 0, len(msgs))
	for i := range msgs {
		if n := int64(len(msgs[i].Body)); n > s.maxSize {
			// Refused here: sent, RabbitMQ would close the channel over
			// it, and the confirms of the messages before it could be lost.
			failed[i] = connector.Permanent(fmt.Errorf("the message is %d bytes, above max_message_size %d", n, s.maxSize))
			continue
		}
		todo = append(todo, i)
	}
	retry := backoff.Backoff{Min: s.retryDelay, Max: s.maxDelay}
	for attempt := 0; ; attempt++ {
		rest, err := s.publishAll(ctx, msgs, todo, failed)
		if err == nil {
			break
		}
		todo = rest
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if attempt >= s.maxRetries {
			return connector.Unavailable(fmt.Errorf("publish to %s on %s: %d of %d messages unconfirmed after %d retries: %w",
				s.exchange, s.safeURL, len(todo), len(msgs), attempt, err))
		}
		s.log.Warn("publish failed; retrying the unconfirmed messages", "exchange", s.exchange, "unconfirmed", len(todo), "error", err)
		if backoff.Sleep(ctx, retry.Next()) != nil {
			return ctx.Err()
		}
	}
	level := slog.LevelDebug
	if s.verbose {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "published batch", "exchange", s.exchange, "routing_key", s.routingKey,
		"messages", len(msgs)-len(failed), "refused", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// errChannelRefused says the server closed the channel over a message it
// refused (406 PRECONDITION_FAILED: too large, for one).
var errChannelRefused = errors.New("the server refused a message and closed the channel")

// publishAll publishes msgs[todo...] pipelined and waits for their
// confirms in order. It returns the indexes still unconfirmed with the
// error that stopped it; refused messages are recorded in failed. When
// the server closes the channel over a refused message, the unconfirmed
// ones are published one at a time, so the refused one is found exactly.
func (s *Sink) publishAll(ctx context.Context, msgs []amqp.Publishing, todo []int, failed connector.MessageErrors) ([]int, error) {
	if s.ch == nil || s.ch.IsClosed() {
		if err := s.connect(ctx); err != nil {
			return todo, err
		}
	}
	rest, err := s.publishRun(ctx, msgs, todo, failed)
	var ae *amqp.Error
	if err == nil || !errors.As(err, &ae) || ae.Code != amqp.PreconditionFailed {
		return rest, err
	}
	// One at a time, on fresh channels, until each is confirmed or refused.
	for len(rest) > 0 {
		if s.ch == nil || s.ch.IsClosed() {
			if err := s.connect(ctx); err != nil {
				return rest, err
			}
		}
		_, err := s.publishRun(ctx, msgs, rest[:1], failed)
		switch {
		case err == nil:
		case errors.As(err, &ae) && ae.Code == amqp.PreconditionFailed:
			failed[rest[0]] = connector.Permanent(fmt.Errorf("RabbitMQ refused the message: %s", ae.Reason))
		default:
			return rest, err
		}
		rest = rest[1:]
	}
	return nil, nil
}

// publishRun publishes todo in order and waits for each confirm, within
// timeout_secs: past that the connection is closed (the next attempt
// dials again) and the unconfirmed messages are returned with an
// Unavailable error.
func (s *Sink) publishRun(ctx context.Context, msgs []amqp.Publishing, todo []int, failed connector.MessageErrors) ([]int, error) {
	rest := todo
	err := s.link.bounded(ctx, s.timeout, "publish and confirm", func() (err error) {
		rest, err = s.publishConfirm(ctx, msgs, todo, failed)
		return err
	})
	if err != nil && len(rest) == 0 {
		rest = todo // every confirm came as the timer fired: publish them again (at-least-once)
	}
	return rest, err
}

// publishConfirm is publishRun without its bound.
func (s *Sink) publishConfirm(ctx context.Context, msgs []amqp.Publishing, todo []int, failed connector.MessageErrors) ([]int, error) {
	closed := s.ch.NotifyClose(make(chan *amqp.Error, 1))
	confirms := make([]*amqp.DeferredConfirmation, len(todo))
	for k, i := range todo {
		dc, err := s.ch.PublishWithDeferredConfirmWithContext(ctx, s.exchange, s.routingKey, s.mandatory, false, msgs[i])
		if err != nil {
			return todo, s.channelError(closed, err)
		}
		confirms[k] = dc
	}
	for k, dc := range confirms {
		acked, err := dc.WaitContext(ctx)
		if err != nil {
			return todo[k:], s.channelError(closed, err)
		}
		if !acked {
			// amqp091 resolves the confirms of a closed channel as nacks:
			// prefer the server's reason for the close.
			if s.ch.IsClosed() {
				return todo[k:], s.channelError(closed, fmt.Errorf("the channel closed before message %d was confirmed", todo[k]))
			}
			return todo[k:], fmt.Errorf("RabbitMQ nacked message %d (an internal error of the server)", todo[k])
		}
		if ret, ok := s.returned(msgs[todo[k]].MessageId); ok {
			failed[todo[k]] = connector.Permanent(fmt.Errorf("RabbitMQ returned the message as unroutable (exchange %q, routing key %q): %d %s",
				ret.Exchange, ret.RoutingKey, ret.ReplyCode, ret.ReplyText))
		}
	}
	return nil, nil
}

// returned reports whether the message with id came back as unroutable.
// RabbitMQ sends basic.return before the confirm of the same message, so
// by the time its confirm arrived the return is queued.
func (s *Sink) returned(id string) (amqp.Return, bool) {
	for {
		select {
		case r, ok := <-s.back:
			if !ok {
				return amqp.Return{}, false // the channel closed
			}
			if r.MessageId == id {
				return r, true
			}
		default:
			return amqp.Return{}, false
		}
	}
}

// channelError prefers the server's reason for closing the channel over
// the client's "channel closed".
func (s *Sink) channelError(closed chan *amqp.Error, err error) error {
	select {
	case ae := <-closed:
		if ae != nil {
			return ae
		}
	case <-time.After(100 * time.Millisecond):
	}
	return err
}

// publishing is the AMQP message for m.
func (s *Sink) publishing(b *connector.SinkBatch, m *connector.Message) amqp.Publishing {
	p := amqp.Publishing{
		Body: m.Payload, DeliveryMode: s.deliveryMode, MessageId: uuid.UUID(m.ID).String(),
		ContentType: contentType(b.Schema), Headers: amqp.Table{},
	}
	if !m.OriginTimestamp.IsZero() {
		p.Timestamp = m.OriginTimestamp
	} else if !m.Timestamp.IsZero() {
		p.Timestamp = m.Timestamp
	}
	for _, h := range m.Headers {
		p.Headers[h.Key.String()] = tableValue(h.Value)
	}
	if s.metadata {
		p.Headers["iggy_stream"] = b.Stream
		p.Headers["iggy_topic"] = b.Topic
		p.Headers["iggy_partition_id"] = int64(b.Partition)
		if m.Offset <= math.MaxInt64 {
			p.Headers["iggy_offset"] = int64(m.Offset)
		}
	}
	return p
}

func contentType(s connector.Schema) string {
	switch s {
	case connector.SchemaJSON, "":
		return "application/json"
	case connector.SchemaText:
		return "text/plain"
	}
	return "application/octet-stream"
}
