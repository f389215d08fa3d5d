package nats

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "nats",
		Summary:   "reads a JetStream durable pull consumer, acknowledging each batch only after it is in Iggy, or a core NATS subject",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
}

var deliverPolicies = map[string]jetstream.DeliverPolicy{
	"all": jetstream.DeliverAllPolicy, "new": jetstream.DeliverNewPolicy, "last": jetstream.DeliverLastPolicy,
	"last_per_subject": jetstream.DeliverLastPerSubjectPolicy,
}

// SourceSpec is the source's plugin_config (Ferry's: upstream Iggy has
// no NATS source).
var SourceSpec = connector.NewSpec(append(connFields(),
	connector.NewStringField("stream").WithDefault("").WithExample("ORDERS").
		WithDoc("jetstream mode: the JetStream stream read (required there)"),
	connector.NewStringField("subject").WithDefault("").WithExample("orders.>").
		WithDoc("jetstream: the consumer's filter subject (empty: all the stream's); core: the subject subscribed to (required); * and > allowed"),
	connector.NewStringField("durable").WithDefault("ferry").
		WithDoc("jetstream: the durable consumer's name; it keeps the position on the server"),
	connector.NewEnumField("deliver", "all", "new", "last", "last_per_subject").WithDefault("all").
		WithDoc("jetstream: where a new consumer starts (an existing one keeps its own)"),
	connector.NewDurationField("ack_wait").WithDefault(30*time.Second).
		WithDoc("jetstream: how long the server waits for an acknowledgement before redelivering; batches waiting for Iggy are kept alive with in-progress acks"),
	connector.NewIntField("max_ack_pending").Between(1, 1<<30).WithDefault(1000).
		WithDoc("jetstream: most messages delivered and not yet acknowledged"),
	connector.NewStringField("queue").WithDefault("").WithDoc("core: the queue group (empty: none)"),
	connector.NewIntField("buffer_size").Between(1, 1<<24).WithDefault(65536).
		WithDoc("core: messages held between polls; beyond it the client drops them (a slow consumer)"),
	connector.NewIntField("batch_size").Between(1, 1<<20).WithDefault(100).WithDoc("most messages per batch"),
	connector.NewDurationField("batch_wait").WithDefault(100*time.Millisecond).
		WithDoc("how long a batch waits to fill"),
	connector.NewEnumField("schema", string(connector.SchemaJSON), string(connector.SchemaText), string(connector.SchemaRaw)).
		WithDefault(string(connector.SchemaJSON)).WithDoc("the payloads' format in Iggy"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("add nats_subject headers, and nats_stream and nats_sequence in jetstream mode"),
)...).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	switch s.String("mode") {
	case modeJetStream:
		if s.String("stream") == "" {
			fail("stream", "is required in mode %q", modeJetStream)
		} else if err := checkName(s.String("stream")); err != nil {
			fail("stream", "%v", err)
		}
		// An empty durable would make the consumer ephemeral: its position
		// lost with the connection.
		if s.String("durable") == "" {
			fail("durable", "is empty: the durable consumer keeps the position")
		} else if err := checkName(s.String("durable")); err != nil {
			fail("durable", "%v", err)
		}
		if s.Int("max_ack_pending") < s.Int("batch_size") {
			fail("max_ack_pending", "%d is below batch_size %d: a batch could never fill", s.Int("max_ack_pending"), s.Int("batch_size"))
		}
		if s.Duration("ack_wait") < time.Second {
			fail("ack_wait", "%s is below a second", s.Duration("ack_wait"))
		}
	case modeCore:
		if s.String("subject") == "" {
			fail("subject", "is required in mode %q", modeCore)
		}
	}
	if sub := s.String("subject"); sub != "" {
		if err := checkFilter(sub); err != nil {
			fail("subject", "%v", err)
		}
	}
	if q := s.String("queue"); strings.IndexFunc(q, isSpaceOrControl) >= 0 {
		fail("queue", "%q has whitespace or a control character", q)
	}
	if s.Duration("batch_wait") <= 0 {
		fail("batch_wait", "must be above zero")
	}
})

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// checkName reports why s cannot name a JetStream stream or consumer:
// '.', '*', '>', '/', '\', whitespace or control characters (the
// server refuses them, and some are subject tokens or path separators).
func checkName(s string) error {
	if strings.ContainsAny(s, ".*>/\\") || strings.IndexFunc(s, isSpaceOrControl) >= 0 {
		return fmt.Errorf("%q is not a JetStream name: no '.', '*', '>', '/', '\\', whitespace or control characters", s)
	}
	return nil
}

// Source is the nats source.
type Source struct {
	conn                 connection
	stream, subject      string
	durable, queue       string
	deliver              jetstream.DeliverPolicy
	ackWait              time.Duration
	maxAckPending        int
	bufferSize           int
	batchSize            int
	batchWait            time.Duration
	schema               connector.Schema
	metadata             bool
	streamKey            [8]byte // the id prefix of stream sequence ids
	log                  *slog.Logger
	nc                   *nats.Conn
	cons                 jetstream.Consumer
	sub                  *nats.Subscription
	core                 chan *nats.Msg
	stopKeepAlive, alive chan struct{}

	mu      sync.Mutex
	pending map[*connector.Batch][]jetstream.Msg // polled, not yet acked
}

// NewSource builds a nats source from its configuration.
func NewSource(cfg connector.Config) (connector.Source, error) {
	set, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{stream: set.String("stream"), subject: set.String("subject"), durable: set.String("durable"),
		queue: set.String("queue"), deliver: deliverPolicies[set.String("deliver")], ackWait: set.Duration("ack_wait"),
		maxAckPending: set.Int("max_ack_pending"), bufferSize: set.Int("buffer_size"), batchSize: set.Int("batch_size"),
		batchWait: set.Duration("batch_wait"), schema: connector.Schema(set.String("schema")),
		metadata: set.Bool("include_metadata"), log: log, pending: map[*connector.Batch][]jetstream.Msg{}}
	s.conn = newConnection(set, func(what string, err error) {
		log.Warn("NATS connection "+what, "server", s.conn.safeURL, "error", err)
	})
	sum := sha256.Sum256([]byte("nats-stream\x00" + s.stream))
	copy(s.streamKey[:], sum[:8])
	return s, nil
}

// Open connects and creates (or updates) the durable consumer, or
// subscribes in core mode. The state is unused: JetStream keeps the
// consumer's position.
func (s *Source) Open(ctx context.Context, _ []byte) error {
	nc, err := s.conn.dial()
	if err != nil {
		return err
	}
	if s.conn.mode == modeCore {
		s.core = make(chan *nats.Msg, s.bufferSize)
		sub, err := nc.ChanQueueSubscribe(s.subject, s.queue, s.core)
		if err != nil {
			nc.Close()
			return fmt.Errorf("subscribe to %q on %s: %w", s.subject, s.conn.safeURL, err)
		}
		s.nc, s.sub = nc, sub
		return nil
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(s.conn.timeout))
	if err != nil {
		nc.Close()
		return fmt.Errorf("jetstream on %s: %w", s.conn.safeURL, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.conn.timeout)
	defer cancel()
	cons, err := js.CreateOrUpdateConsumer(ctx, s.stream, jetstream.ConsumerConfig{
		Durable: s.durable, FilterSubject: s.subject, AckPolicy: jetstream.AckExplicitPolicy, AckWait: s.ackWait,
		MaxAckPending: s.maxAckPending, DeliverPolicy: s.deliver,
	})
	if err != nil {
		nc.Close()
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("stream: no JetStream stream %q on %s: %w", s.stream, s.conn.safeURL, err)
		}
		return fmt.Errorf("durable consumer %q on stream %q on %s: %w", s.durable, s.stream, s.conn.safeURL, err)
	}
	s.nc, s.cons = nc, cons
	s.stopKeepAlive, s.alive = make(chan struct{}), make(chan struct{})
	go s.keepAlive()
	return nil
}

// keepAlive tells the server, every third of ack_wait, that the
// messages of batches not yet in Iggy are still being worked on, so a
// batch the runtime is retrying is not redelivered meanwhile.
func (s *Source) keepAlive() {
	defer close(s.alive)
	t := time.NewTicker(s.ackWait / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stopKeepAlive:
			return
		case <-t.C:
		}
		s.mu.Lock()
		for _, ms := range s.pending {
			for _, m := range ms {
				_ = m.InProgress() // a lost one means a redelivery, with the same id
			}
		}
		s.mu.Unlock()
	}
}

// Poll returns the next batch: up to batch_size messages, waiting at
// most batch_wait for it to fill once the first one is there.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	if s.conn.mode == modeCore {
		return s.pollCore(ctx)
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		mb, err := s.cons.Fetch(s.batchSize, jetstream.FetchMaxWait(s.batchWait))
		if err != nil {
			return nil, fmt.Errorf("fetch from consumer %q of stream %q on %s: %w", s.durable, s.stream, s.conn.safeURL, err)
		}
		var got []jetstream.Msg
		for m := range mb.Messages() {
			got = append(got, m)
		}
		if err := mb.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && len(got) == 0 {
			return nil, fmt.Errorf("fetch from consumer %q of stream %q on %s: %w", s.durable, s.stream, s.conn.safeURL, err)
		}
		got = s.passOverEmpty(got)
		if len(got) == 0 {
			continue
		}
		b := &connector.Batch{Schema: s.schema, Messages: make([]connector.Message, len(got))}
		for i, m := range got {
			b.Messages[i] = s.jsMessage(m)
		}
		s.mu.Lock()
		s.pending[b] = got
		s.mu.Unlock()
		return b, nil
	}
}

// passOverEmpty acknowledges the messages without data at once and
// leaves them out: Iggy refuses empty payloads, and such a message could
// not even be dead-lettered (it would fail its batch for ever).
func (s *Source) passOverEmpty(ms []jetstream.Msg) []jetstream.Msg {
	out := ms[:0]
	empty := 0
	for _, m := range ms {
		if len(m.Data()) > 0 {
			out = append(out, m)
			continue
		}
		empty++
		if err := m.Ack(); err != nil {
			s.log.Warn("acknowledge a message without data (it will be delivered again and passed over)", "stream", s.stream, "error", err)
		}
	}
	if empty > 0 {
		s.log.Warn("messages without data passed over (Iggy refuses empty payloads)", "stream", s.stream, "messages", empty)
	}
	return out
}

func (s *Source) pollCore(ctx context.Context) (*connector.Batch, error) {
	var ms []*nats.Msg
	select {
	case m := <-s.core:
		ms = append(ms, m)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	timer := time.NewTimer(s.batchWait)
	defer timer.Stop()
gather:
	for len(ms) < s.batchSize {
		select {
		case m := <-s.core:
			ms = append(ms, m)
		case <-timer.C:
			break gather
		case <-ctx.Done():
			break gather
		}
	}
	b := &connector.Batch{Schema: s.schema, Messages: make([]connector.Message, 0, len(ms))}
	empty := 0
	for _, m := range ms {
		if len(m.Data) == 0 {
			empty++ // Iggy refuses empty payloads: passed over
			continue
		}
		msg := s.message(m.Subject, m.Data, m.Header)
		if id, ok := msgIDFromHeader(m.Header); ok {
			msg.ID = id
		}
		b.Messages = append(b.Messages, msg)
	}
	if empty > 0 {
		s.log.Warn("messages without data passed over (Iggy refuses empty payloads)", "subject", s.subject, "messages", empty)
	}
	return b, nil
}

// jsMessage is the Iggy message for a JetStream one: its id is the
// Nats-Msg-Id when the publisher set one, else the stream and sequence,
// so a redelivery carries the same id.
func (s *Source) jsMessage(m jetstream.Msg) connector.Message {
	msg := s.message(m.Subject(), m.Data(), m.Headers())
	meta, err := m.Metadata()
	if err == nil {
		msg.OriginTimestamp = meta.Timestamp
		if s.metadata {
			msg.Headers = append(msg.Headers, connector.StringHeader("nats_stream", meta.Stream),
				connector.StringHeader("nats_sequence", strconv.FormatUint(meta.Sequence.Stream, 10)))
		}
	}
	if id, ok := msgIDFromHeader(m.Headers()); ok {
		msg.ID = id
	} else if err == nil {
		copy(msg.ID[:8], s.streamKey[:])
		binary.BigEndian.PutUint64(msg.ID[8:], meta.Sequence.Stream)
	}
	return msg
}

func (s *Source) message(subject string, data []byte, h nats.Header) connector.Message {
	m := connector.Message{Payload: data}
	hs, dropped := fromNATS(h)
	if dropped > 0 {
		s.log.Debug("NATS headers Iggy cannot carry were left out (not 1..255 bytes)", "subject", subject, "headers", dropped)
	}
	m.Headers = hs
	if s.metadata && fitsIggy("nats_subject", subject) {
		m.Headers = append(m.Headers, connector.StringHeader("nats_subject", subject))
	}
	return m
}

// msgIDFromHeader is the Iggy id for a Nats-Msg-Id: the UUID it spells,
// or 16 bytes of its SHA-256.
func msgIDFromHeader(h nats.Header) ([16]byte, bool) {
	v := h.Get(jetstream.MsgIDHeader)
	if v == "" {
		return [16]byte{}, false
	}
	if id, err := uuid.Parse(v); err == nil && id != uuid.Nil {
		return id, true
	}
	sum := sha256.Sum256([]byte("nats-msg-id\x00" + v))
	var id [16]byte
	copy(id[:], sum[:16])
	return id, true
}

func (s *Source) take(b *connector.Batch) []jetstream.Msg {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := s.pending[b]
	delete(s.pending, b)
	return ms
}

// Ack acknowledges every message of the batch once it is in Iggy, and
// waits until the server has read the acknowledgements (a flush).
func (s *Source) Ack(ctx context.Context, b *connector.Batch) error {
	ms := s.take(b)
	if len(ms) == 0 {
		return nil
	}
	for _, m := range ms {
		if err := m.Ack(); err != nil {
			return fmt.Errorf("acknowledge %d messages of stream %q (they will be delivered again after ack_wait): %w", len(ms), s.stream, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.conn.timeout)
	defer cancel()
	if err := s.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("flush the acknowledgements of %d messages of stream %q (they may be delivered again): %w", len(ms), s.stream, err)
	}
	return nil
}

// Nack leaves the messages unacknowledged and kept alive: the runtime
// sends the same batch again and acknowledges it then.
func (s *Source) Nack(_ context.Context, b *connector.Batch, cause error) {
	s.log.Debug("batch not yet in Iggy; its messages stay unacknowledged", "stream", s.stream, "messages", len(b.Messages), "cause", cause)
}

// Close stops the keep-alive, gives the messages of batches never
// acknowledged back to the server at once (a Nak, so another consumer
// need not wait for ack_wait), and closes the connection.
func (s *Source) Close(context.Context) error {
	if s.stopKeepAlive != nil {
		close(s.stopKeepAlive)
		<-s.alive
		s.stopKeepAlive = nil
	}
	s.mu.Lock()
	for b, ms := range s.pending {
		for _, m := range ms {
			_ = m.Nak()
		}
		delete(s.pending, b)
	}
	s.mu.Unlock()
	if s.nc != nil {
		_ = s.nc.Flush()
		s.nc.Close()
		s.nc = nil
	}
	return nil
}
