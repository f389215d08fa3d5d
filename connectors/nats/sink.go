package nats

import (
	"context"
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
		Kind:    connector.KindSink,
		Name:    "nats",
		Summary: "publishes to NATS subjects: JetStream with acknowledgements and Nats-Msg-Id deduplication, or core NATS",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}

// SinkSpec is the sink's plugin_config (Ferry's: upstream Iggy has no
// NATS sink).
var SinkSpec = connector.NewSpec(append(connFields(),
	connector.NewStringField("subject").WithDefault("iggy.{stream}.{topic}").WithCheck(checkTemplate).
		WithDoc("the subject published to; {stream}, {topic} and {partition} are the Iggy message's; no wildcards, no spaces"),
	connector.NewStringField("stream").WithDefault("").
		WithDoc("jetstream mode: the JetStream stream the subjects must land in (checked at start and by the server on each publish); empty: any"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("add Iggy-Stream, Iggy-Topic, Iggy-Partition and Iggy-Offset headers"),
	connector.NewIntField("max_in_flight").Between(1, 1<<20).WithDefault(4096).
		WithDoc("jetstream mode: most publishes awaiting their acknowledgement at once"),
)...)

// checkTemplate is the subject key's check: known placeholders only,
// and a valid subject once they are filled in.
func checkTemplate(v any) error {
	s, _ := v.(string)
	_, err := renderSubject(s, "stream", "topic", 0)
	return err
}

var placeholders = strings.NewReplacer("{stream}", "", "{topic}", "", "{partition}", "")

// renderSubject fills in the template. The names come from Iggy and are
// checked like the rest: a name holding a wildcard, a space or an empty
// token makes no subject.
func renderSubject(tmpl, stream, topic string, partition uint32) (string, error) {
	if rest := placeholders.Replace(tmpl); strings.ContainsAny(rest, "{}") {
		return "", fmt.Errorf("subject %q: only {stream}, {topic} and {partition} are placeholders", tmpl)
	}
	s := strings.NewReplacer("{stream}", stream, "{topic}", topic, "{partition}", strconv.FormatUint(uint64(partition), 10)).Replace(tmpl)
	if err := checkSubject(s); err != nil {
		return "", err
	}
	return s, nil
}

// Sink is the nats sink.
type Sink struct {
	conn        connection
	subject     string
	stream      string
	metadata    bool
	maxInFlight int
	log         *slog.Logger

	mu sync.Mutex // guards nc and js; Consume calls are sequential
	nc *nats.Conn
	js jetstream.JetStream
}

// NewSink builds a nats sink from its configuration.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	set, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{subject: set.String("subject"), stream: set.String("stream"), metadata: set.Bool("include_metadata"),
		maxInFlight: set.Int("max_in_flight"), log: log}
	s.conn = newConnection(set, func(what string, err error) {
		log.Warn("NATS connection "+what, "server", s.conn.safeURL, "error", err)
	})
	if s.stream != "" && s.conn.mode == modeCore {
		return nil, set.Errorf("stream", "is for mode = %q; core NATS publishes to no stream", modeJetStream)
	}
	return s, nil
}

// Open connects; in jetstream mode it checks that the stream, when
// named, exists. A server that is down makes Open fail, and the runtime
// retries it with backoff.
func (s *Sink) Open(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	nc, err := s.conn.dial()
	if err != nil {
		return connector.Unavailable(err)
	}
	if s.conn.mode == modeJetStream {
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(s.maxInFlight),
			jetstream.WithPublishAsyncTimeout(s.conn.timeout), jetstream.WithDefaultTimeout(s.conn.timeout))
		if err != nil {
			nc.Close()
			return fmt.Errorf("jetstream on %s: %w", s.conn.safeURL, err)
		}
		if s.stream != "" {
			ctx, cancel := context.WithTimeout(ctx, s.conn.timeout)
			defer cancel()
			if _, err := js.Stream(ctx, s.stream); err != nil {
				nc.Close()
				if errors.Is(err, jetstream.ErrStreamNotFound) {
					return fmt.Errorf("stream: no JetStream stream %q on %s: %w", s.stream, s.conn.safeURL, err)
				}
				return connector.Unavailable(fmt.Errorf("look up JetStream stream %q on %s: %w", s.stream, s.conn.safeURL, err))
			}
		}
		s.js = js
	}
	s.nc = nc
	return nil
}

// ConsumesOutOfOrder marks the sink as a connector.UnorderedSink (it may
// read with ordering = "key" or "none"): each message is published on its own, deduplicated by Nats-Msg-Id.
func (s *Sink) ConsumesOutOfOrder() {}

// Close closes the connection; Consume left no publish unacknowledged.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nc != nil {
		s.nc.Close()
		s.nc, s.js = nil, nil
	}
	return nil
}

// Consume publishes the batch. In jetstream mode it returns once the
// server acknowledged every message (stored in its stream); in core mode
// once the server has read them (a flush), which says nothing of any
// subscriber. See the package doc for what fails how.
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nc == nil {
		return connector.Unavailable(errors.New("the sink is not open"))
	}
	failed := connector.MessageErrors{}
	subject, err := renderSubject(s.subject, b.Stream, b.Topic, b.Partition)
	if err != nil {
		for i := range b.Messages {
			failed[i] = connector.Permanent(fmt.Errorf("no subject for stream %q, topic %q: %w", b.Stream, b.Topic, err))
		}
		return failed
	}
	msgs := make([]*nats.Msg, len(b.Messages))
	dropped := 0
	for i := range b.Messages {
		var n int
		msgs[i], n = s.msg(subject, b, &b.Messages[i])
		dropped += n
	}
	if dropped > 0 {
		s.log.Debug("headers NATS cannot carry were left out (a key with ':', a space or a control character, a Nats-* key, a value with CR/LF)",
			"subject", subject, "headers", dropped)
	}
	ctx, cancel := context.WithTimeout(ctx, s.conn.timeout)
	defer cancel()
	if s.js != nil {
		err = s.publishJetStream(ctx, b, msgs, failed)
	} else {
		err = s.publishCore(ctx, msgs, failed)
	}
	if err != nil {
		return err
	}
	s.log.Debug("published batch", "subject", subject, "messages", len(msgs)-len(failed), "refused", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// publishJetStream publishes every message asynchronously and waits for
// all the acknowledgements. Any failure that says the server is away
// makes the whole batch Unavailable: the runtime delivers it again, and
// the server drops the copies it already stored by their Nats-Msg-Id.
func (s *Sink) publishJetStream(ctx context.Context, b *connector.SinkBatch, msgs []*nats.Msg, failed connector.MessageErrors) error {
	futures := make([]jetstream.PubAckFuture, len(msgs))
	opts := []jetstream.PublishOpt{jetstream.WithStallWait(s.conn.timeout)}
	if s.stream != "" {
		opts = append(opts, jetstream.WithExpectStream(s.stream))
	}
	var away error
	for i, m := range msgs {
		f, err := s.js.PublishMsgAsync(m, append(opts, jetstream.WithMsgID(msgID(b, &b.Messages[i])))...)
		if err != nil {
			if errors.Is(err, nats.ErrMaxPayload) {
				failed[i] = connector.Permanent(fmt.Errorf("the message (%d bytes and its headers) is above the server's max_payload %d: %w",
					len(m.Data), s.nc.MaxPayload(), err))
				continue
			}
			away = err
			break
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if permanent(err) {
				failed[i] = connector.Permanent(fmt.Errorf("JetStream refused the message on %s: %w", msgs[i].Subject, err))
			} else if away == nil {
				away = err
			}
		case <-ctx.Done():
			return connector.Unavailable(fmt.Errorf("waiting for JetStream acknowledgements on %s: %w", s.conn.safeURL, ctx.Err()))
		}
	}
	if away != nil {
		return connector.Unavailable(fmt.Errorf("publish to JetStream on %s (%d messages): %w", s.conn.safeURL, len(msgs), away))
	}
	return nil
}

// permanent reports whether a publish error is about the message (a 4xx
// JetStream answer: too large for the stream, the wrong stream) rather
// than about the server being away.
func permanent(err error) bool {
	var je jetstream.JetStreamError
	if errors.As(err, &je) && je.APIError() != nil {
		c := je.APIError().Code
		return c >= 400 && c < 500
	}
	return false
}

// publishCore publishes every message and flushes: the server has read
// them when it returns. Nothing says a subscriber got them.
func (s *Sink) publishCore(ctx context.Context, msgs []*nats.Msg, failed connector.MessageErrors) error {
	for i, m := range msgs {
		if err := s.nc.PublishMsg(m); err != nil {
			if errors.Is(err, nats.ErrMaxPayload) {
				failed[i] = connector.Permanent(fmt.Errorf("the message (%d bytes and its headers) is above the server's max_payload %d: %w",
					len(m.Data), s.nc.MaxPayload(), err))
				continue
			}
			return connector.Unavailable(fmt.Errorf("publish to %s on %s: %w", m.Subject, s.conn.safeURL, err))
		}
	}
	if err := s.nc.FlushWithContext(ctx); err != nil {
		return connector.Unavailable(fmt.Errorf("flush to %s: %w", s.conn.safeURL, err))
	}
	return nil
}

// msg is the NATS message for m and how many of its headers were left out.
func (s *Sink) msg(subject string, b *connector.SinkBatch, m *connector.Message) (*nats.Msg, int) {
	nm := &nats.Msg{Subject: subject, Data: m.Payload, Header: nats.Header{}}
	dropped := toNATS(nm.Header, m.Headers)
	if s.metadata {
		nm.Header["Iggy-Stream"] = []string{b.Stream}
		nm.Header["Iggy-Topic"] = []string{b.Topic}
		nm.Header["Iggy-Partition"] = []string{strconv.FormatUint(uint64(b.Partition), 10)}
		nm.Header["Iggy-Offset"] = []string{strconv.FormatUint(m.Offset, 10)}
		if !m.OriginTimestamp.IsZero() {
			nm.Header["Iggy-Origin-Timestamp"] = []string{m.OriginTimestamp.UTC().Format(time.RFC3339Nano)}
		}
	}
	for k, v := range nm.Header {
		if !natsHeaderValue(strings.Join(v, "")) { // a stream or topic name with a control character
			delete(nm.Header, k)
		}
	}
	if len(nm.Header) == 0 {
		nm.Header = nil
	}
	return nm, dropped
}

// msgID is the Nats-Msg-Id of m: the Iggy message id as a UUID, or,
// for a message without one, its place in Iggy.
func msgID(b *connector.SinkBatch, m *connector.Message) string {
	if m.ID != ([16]byte{}) {
		return uuid.UUID(m.ID).String()
	}
	if natsHeaderValue(b.Stream + b.Topic) {
		return fmt.Sprintf("iggy:%s:%s:%d:%d", b.Stream, b.Topic, b.Partition, m.Offset)
	}
	return fmt.Sprintf("iggy:%x:%x:%d:%d", b.Stream, b.Topic, b.Partition, m.Offset)
}
