package mqtt

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/ferryhq/ferry/connector"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "mqtt",
		Summary: "publishes messages to an MQTT 3.1.1 broker at QoS 0, 1 or 2, acknowledged before the offset is committed",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}

// Sink is the mqtt sink.
type Sink struct {
	set          *connector.Settings
	tls          *tls.Config // nil without a TLS URL
	where        string
	topic        template
	qos          byte
	retained     bool
	writeTimeout time.Duration
	connTimeout  time.Duration
	maxSize      int64
	log          *slog.Logger

	mu     sync.Mutex // guards client; Consume calls are sequential
	client paho.Client
}

// NewSink builds an mqtt sink from its configuration.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	set, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	tmpl, err := parseTemplate(set.String("topic"))
	if err != nil {
		return nil, set.Errorf("topic", "%v", err)
	}
	tc, err := tlsConfig(set, cfg.Paths)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sink{
		set: set, tls: tc, where: where(set), topic: tmpl, qos: byte(set.Int("qos")), retained: set.Bool("retained"),
		writeTimeout: set.Duration("write_timeout"), connTimeout: set.Duration("connect_timeout"),
		maxSize: set.Size("max_message_size"), log: log,
	}, nil
}

// Open connects. A broker that is down makes Open fail, and the runtime
// retries it with backoff.
func (s *Sink) Open(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connect(ctx)
}

// connect (re)connects with a clean session: what a lost connection had
// in flight is published again by the runtime's retry of the batch.
// Caller holds s.mu.
func (s *Sink) connect(ctx context.Context) error {
	s.closeLocked()
	o := clientOptions(s.set, "sink", s.tls).SetCleanSession(true).SetWriteTimeout(s.writeTimeout)
	c := paho.NewClient(o)
	if err := connect(ctx, c, s.connTimeout, s.where, s.tls != nil); err != nil {
		return connector.Unavailable(err)
	}
	s.client = c
	return nil
}

func (s *Sink) closeLocked() {
	if s.client != nil {
		s.client.Disconnect(250)
		s.client = nil
	}
}

// ConsumesOutOfOrder marks the sink as a connector.UnorderedSink (it may
// read with ordering = "key" or "none"): each message is published on its own.
func (s *Sink) ConsumesOutOfOrder() {}

// Close disconnects.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
	return nil
}

// Consume publishes every message of the batch, pipelined, and returns
// when the broker acknowledged each (PUBACK at QoS 1, PUBCOMP at QoS 2)
// or, at QoS 0, when each was written to the connection.
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	topic := s.topic.render(b.Stream, b.Topic, b.Partition)
	failed := connector.MessageErrors{}
	if err := checkTopic(topic); err != nil {
		// The stream's or topic's name makes a topic no broker takes.
		for i := range b.Messages {
			failed[i] = connector.Permanent(fmt.Errorf("topic of stream %q, topic %q: %w", b.Stream, b.Topic, err))
		}
		return failed
	}
	if s.client == nil || !s.client.IsConnectionOpen() {
		if err := s.connect(ctx); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	overhead := int64(2 + len(topic) + 2) // topic length, topic, packet id
	toks := make([]paho.Token, len(b.Messages))
	for i := range b.Messages {
		if n := overhead + int64(len(b.Messages[i].Payload)); n > s.maxSize {
			failed[i] = connector.Permanent(fmt.Errorf("the PUBLISH would be %d bytes, above max_message_size %d", n, s.maxSize))
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		toks[i] = s.client.Publish(topic, s.qos, s.retained, b.Messages[i].Payload)
	}
	for i, tok := range toks {
		if tok == nil {
			continue
		}
		if err := wait(ctx, tok); err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			// The connection is gone or the broker is stuck: nothing in
			// MQTT 3.1.1 says a message is bad, so the batch waits for
			// the broker and is published again, whole.
			s.closeLocked()
			return connector.Unavailable(fmt.Errorf("publish to %q on %s: message %d of %d not acknowledged: %w",
				topic, s.where, i, len(b.Messages), err))
		}
	}
	s.log.Debug("published batch", "topic", topic, "qos", s.qos, "messages", len(b.Messages)-len(failed), "refused", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}
