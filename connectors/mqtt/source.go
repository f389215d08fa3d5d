package mqtt

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "mqtt",
		Summary:   "subscribes to MQTT 3.1.1 topic filters in a persistent session, acknowledging each message only after it is in Iggy",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
}

// Source is the mqtt source.
type Source struct {
	set          *connector.Settings
	tls          *tls.Config // nil without a TLS URL
	where        string
	filters      []string
	routes       map[string]string
	routeOrder   []string // the filters of routes, longest first
	qos          byte
	clean        bool
	skipRetained bool
	batchSize    int
	batchWait    time.Duration
	connTimeout  time.Duration
	schema       connector.Schema
	metadata     bool
	log          *slog.Logger

	client paho.Client
	ready  chan struct{} // signalled when queue grows or the connection is lost

	// ackMu orders acknowledgements: taken under mu, held while acking
	// without mu (paho's Ack may wait for the connection's writer).
	ackMu sync.Mutex

	mu          sync.Mutex
	queue       []paho.Message // received, not yet polled
	lost        error          // why the connection ended
	pending     map[*connector.Batch][]paho.Message
	outstanding int            // batches polled and not yet acknowledged
	carry       []paho.Message // skipped retained messages waiting for the batches before them
}

// NewSource builds an mqtt source from its configuration.
func NewSource(cfg connector.Config) (connector.Source, error) {
	set, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	tc, err := tlsConfig(set, cfg.Paths)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		set: set, tls: tc, where: where(set), filters: set.Strings("topics"), routes: set.StringMap("topic_routes"),
		qos: byte(set.Int("qos")), clean: set.Bool("clean_session"), skipRetained: set.Bool("skip_retained"),
		batchSize: set.Int("batch_size"), batchWait: set.Duration("batch_wait"), connTimeout: set.Duration("connect_timeout"),
		schema: connector.Schema(set.String("schema")), metadata: set.Bool("include_metadata"), log: log,
		ready: make(chan struct{}, 1),
	}
	for f := range s.routes {
		s.routeOrder = append(s.routeOrder, f)
	}
	sort.Slice(s.routeOrder, func(i, j int) bool {
		a, b := s.routeOrder[i], s.routeOrder[j]
		return len(a) > len(b) || (len(a) == len(b) && a < b)
	})
	return s, nil
}

// Open connects with the configured session and subscribes to the
// filters. With a persistent session the broker sends what it kept for
// it (unacknowledged deliveries first) as soon as the connection is up.
// The state is unused: the broker keeps the session.
func (s *Source) Open(ctx context.Context, _ []byte) error {
	s.mu.Lock()
	s.queue, s.lost, s.carry, s.outstanding = nil, nil, nil, 0
	s.pending = map[*connector.Batch][]paho.Message{}
	s.mu.Unlock()
	select {
	case <-s.ready:
	default:
	}
	o := clientOptions(s.set, "source", s.tls).SetCleanSession(s.clean).SetResumeSubs(false)
	// paho acknowledges a message when its handler returns unless told
	// not to; Ack acknowledges it once the batch is in Iggy.
	o.SetAutoAckDisabled(true).SetOrderMatters(true)
	o.SetDefaultPublishHandler(s.receive)
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		s.mu.Lock()
		s.lost = err
		s.mu.Unlock()
		s.signal()
	})
	c := paho.NewClient(o)
	if err := connect(ctx, c, s.connTimeout, s.where, s.tls != nil); err != nil {
		return err
	}
	subs := make(map[string]byte, len(s.filters))
	for _, f := range s.filters {
		subs[f] = s.qos
	}
	sctx, cancel := context.WithTimeout(ctx, s.connTimeout)
	defer cancel()
	tok := c.SubscribeMultiple(subs, nil)
	if err := wait(sctx, tok); err != nil {
		c.Disconnect(0)
		return fmt.Errorf("subscribe to %s on %s: %w", strings.Join(s.filters, ", "), s.where, err)
	}
	if st, ok := tok.(*paho.SubscribeToken); ok {
		for f, granted := range st.Result() {
			if granted == 0x80 {
				c.Disconnect(0)
				return fmt.Errorf("the broker %s refused the subscription to %q (not authorised, or a filter it does not take)", s.where, f)
			}
		}
	}
	s.client = c
	return nil
}

// receive is paho's handler: it must not block (paho's reading of the
// connection waits for it), so it only queues. The broker's inflight
// window (mosquitto's max_inflight_messages) bounds the queue, since
// nothing is acknowledged before it is in Iggy.
func (s *Source) receive(_ paho.Client, m paho.Message) {
	s.mu.Lock()
	s.queue = append(s.queue, m)
	s.mu.Unlock()
	s.signal()
}

func (s *Source) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Poll waits for a message, then gathers up to batch_size within
// batch_wait. A lost connection is an error once what arrived before it
// was delivered: the runtime restarts the source, and the broker sends
// again what was not acknowledged.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	var took []paho.Message // every message taken, skipped ones too, in order
	n := 0                  // those forwarded
	var expire <-chan time.Time
	for n < s.batchSize {
		s.mu.Lock()
		for len(s.queue) > 0 && n < s.batchSize {
			m := s.queue[0]
			s.queue = s.queue[1:]
			took = append(took, m)
			if !s.skip(m) {
				n++
			} else if len(m.Payload()) == 0 {
				s.log.Warn("passing over an empty MQTT message (Iggy holds no empty payload); acknowledged", "topic", clip(m.Topic(), 200))
			}
		}
		lost := s.lost
		s.mu.Unlock()
		if n == 0 && len(took) > 0 {
			s.ackSkipped(took)
			took = nil
		}
		if n >= s.batchSize || (lost != nil && n > 0) {
			break
		}
		if lost != nil {
			return nil, fmt.Errorf("the connection to %s was lost (what was not acknowledged is sent again): %w", s.where, lost)
		}
		if n > 0 && expire == nil {
			t := time.NewTimer(s.batchWait)
			defer t.Stop()
			expire = t.C
		}
		select {
		case <-s.ready:
			continue
		case <-expire:
		case <-ctx.Done():
			if n == 0 {
				return nil, ctx.Err()
			}
		}
		break
	}
	b := &connector.Batch{Schema: s.schema, Messages: make([]connector.Message, 0, n)}
	for _, m := range took {
		if !s.skip(m) {
			b.Messages = append(b.Messages, s.message(m))
		}
	}
	s.mu.Lock()
	s.pending[b] = append(s.carry, took...)
	s.carry = nil
	s.outstanding++
	s.mu.Unlock()
	return b, nil
}

// skip reports whether m is passed over (acknowledged, not forwarded): a
// retained message under skip_retained, and an empty message, since Iggy
// refuses an empty payload (and a dead letter of one), so forwarding it
// would fail the batch on every delivery, and the broker would send it
// again and again.
func (s *Source) skip(m paho.Message) bool {
	return (s.skipRetained && m.Retained()) || len(m.Payload()) == 0
}

// clip is s cut to at most n bytes (at a character's start), for logs.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// ackSkipped acknowledges skipped messages now if no batch before them
// waits for its acknowledgement, else after those batches (MQTT wants
// acknowledgements in the order of the deliveries).
func (s *Source) ackSkipped(ms []paho.Message) {
	s.mu.Lock()
	if s.outstanding > 0 {
		s.carry = append(s.carry, ms...)
		s.mu.Unlock()
		return
	}
	s.ackInOrder(ms)
}

// ackInOrder acknowledges ms; the caller holds mu, which it releases.
func (s *Source) ackInOrder(ms []paho.Message) {
	s.ackMu.Lock()
	s.mu.Unlock()
	defer s.ackMu.Unlock()
	for _, m := range ms {
		m.Ack()
	}
}

// message is the Iggy message for an MQTT message. MQTT 3.1.1 gives a
// message no id that lasts (the packet id is reused), so the id is left
// to Ferry.
func (s *Source) message(m paho.Message) connector.Message {
	out := connector.Message{Payload: m.Payload()}
	topic := m.Topic()
	for _, f := range s.routeOrder {
		if match(f, topic) {
			out.Route = s.routes[f]
			break
		}
	}
	if s.metadata {
		if len(topic) >= 1 && len(topic) <= 255 {
			out.Headers = append(out.Headers, connector.StringHeader("mqtt_topic", topic))
		}
		out.Headers = append(out.Headers, header.New("mqtt_qos", header.Uint8Value(m.Qos())),
			header.New("mqtt_retained", header.BoolValue(m.Retained())), header.New("mqtt_duplicate", header.BoolValue(m.Duplicate())))
	}
	return out
}

// match reports whether topic matches filter (+ one level, # the rest;
// wildcards at the first level do not match topics starting with $).
func match(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	fl, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, f := range fl {
		switch {
		case f == "#":
			return true
		case i >= len(tl):
			return false
		case f != "+" && f != tl[i]:
			return false
		}
	}
	return len(fl) == len(tl)
}

// Ack acknowledges the batch's messages to the broker, in order, now
// that they are in Iggy (and any skipped retained messages after them
// once no earlier batch waits).
func (s *Source) Ack(_ context.Context, b *connector.Batch) error {
	s.mu.Lock()
	ms, ok := s.pending[b]
	if !ok {
		s.mu.Unlock()
		return nil
	}
	delete(s.pending, b)
	s.outstanding--
	if s.outstanding == 0 {
		ms = append(ms, s.carry...)
		s.carry = nil
	}
	s.ackInOrder(ms)
	return nil
}

// Nack leaves the messages unacknowledged: the runtime sends the same
// batch again and acknowledges it then.
func (s *Source) Nack(_ context.Context, b *connector.Batch, cause error) {
	s.log.Debug("batch not yet in Iggy; its messages stay unacknowledged", "messages", len(b.Messages), "cause", cause)
}

// Close disconnects. With a persistent session the broker keeps what was
// not acknowledged and sends it on the next connection.
//
// Before disconnecting it makes a round trip (an UNSUBSCRIBE of a filter
// the session never had): a broker answers in order, so its answer means
// the acknowledgements before it were processed. Closing at once could
// lose them: a socket closed with unread data (the broker keeps sending)
// is reset, and the broker may drop what it had not read yet, sending
// those messages again on the next connection.
func (s *Source) Close(ctx context.Context) error {
	if s.client == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := wait(ctx, s.client.Unsubscribe(flushFilter)); err != nil {
		s.log.Debug("no answer to the closing round trip; the last acknowledgements may be sent again", "error", err)
	}
	s.client.Disconnect(250)
	s.client = nil
	return nil
}

// flushFilter is what Close unsubscribes from to make a round trip.
const flushFilter = "ferry/close-round-trip/none"
