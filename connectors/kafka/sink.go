package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "kafka",
		Summary: "produces messages to a Kafka topic (idempotent, acks=all) before the offset is committed",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}

// SinkSpec is the sink's plugin_config (Ferry's keys; upstream has no
// Kafka connector).
var SinkSpec = connector.NewSpec(append(clientFields(),
	connector.NewStringField("topic").Require().WithExample("iggy-{stream}-{topic}").WithCheck(checkTopicTemplate).
		WithDoc("the Kafka topic produced to; {stream} and {topic} stand for the Iggy names, other characters become '_'"),
	connector.NewEnumField("compression", "none", "gzip", "snappy", "lz4", "zstd").WithDefault("none").
		WithDoc("record batch compression (Kafka's compression.type)"),
	connector.NewSizeField("max_message_bytes").Between(1, math.MaxInt32).WithDefault(int64(1<<20)).
		WithDoc("largest record batch sent (Kafka's max.request.size); a larger record is refused and dead-lettered"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("add iggy_stream, iggy_topic, iggy_partition_id, iggy_offset and iggy_message_id headers"),
	connector.NewBoolField("allow_auto_topic_creation").WithDefault(false).
		WithDoc("let the brokers create a missing topic (needs auto.create.topics.enable on the cluster)"),
)...).Lint(lintClient)

// checkTopicTemplate accepts a template whose fixed parts are legal in
// a topic name.
func checkTopicTemplate(v any) error {
	s, _ := v.(string)
	fixed := strings.NewReplacer("{stream}", "s", "{topic}", "t").Replace(s)
	if why := validTopic(fixed); why != "" {
		return errors.New(why)
	}
	return nil
}

// Sink is the kafka sink.
type Sink struct {
	opts     []kgo.Opt
	template string
	metadata bool
	timeout  time.Duration
	maxBytes int
	log      *slog.Logger

	mu sync.Mutex // guards cl
	cl *kgo.Client
}

// NewSink builds a kafka sink from its configuration.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	set, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	opts, err := clientOpts(set, cfg.Paths)
	if err != nil {
		return nil, err
	}
	timeout := set.Duration("timeout")
	opts = append(opts,
		kgo.RequiredAcks(kgo.AllISRAcks()), // the idempotent producer's default, stated
		kgo.ProducerBatchMaxBytes(int32(set.Size("max_message_bytes"))),
		kgo.ProduceRequestTimeout(timeout),
		kgo.ProducerLinger(0),
	)
	opts = append(opts, kgo.ProducerBatchCompression(codec(set.String("compression")))) // kgo's own default is snappy
	if set.Bool("allow_auto_topic_creation") {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sink{opts: opts, template: set.String("topic"), metadata: set.Bool("include_metadata"), timeout: timeout,
		maxBytes: int(set.Size("max_message_bytes")), log: log}, nil
}

func codec(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// Open makes the client and checks that a broker answers; a cluster
// that is down makes Open fail, and the runtime retries it with backoff.
func (s *Sink) Open(ctx context.Context) error {
	_, err := s.client(ctx)
	return err
}

// client returns the client, making one when there is none (at Open,
// and after a batch timed out and the client was dropped).
func (s *Sink) client(ctx context.Context) (*kgo.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		return s.cl, nil
	}
	cl, err := kgo.NewClient(s.opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: make the client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, connector.Unavailable(fmt.Errorf("kafka sink: reach a broker: %w", err))
	}
	s.cl = cl
	return cl, nil
}

// produce produces recs and waits for every acknowledgement, or for ctx.
// The idempotent producer retries a record whose fate it does not know
// for ever (cancelling it could reorder or lose the sequence), so on a
// timeout the client is dropped: closing it fails what it holds, and the
// next batch gets a new client (a new producer id).
func (s *Sink) produce(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) ([]error, error) {
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	wg.Add(len(recs))
	for i, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) { errs[i] = err; wg.Done() })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return errs, nil
	case <-ctx.Done():
		s.mu.Lock()
		if s.cl == cl {
			s.cl = nil
		}
		s.mu.Unlock()
		go cl.Close()
		return nil, ctx.Err()
	}
}

// ConsumesOutOfOrder marks the sink as a connector.UnorderedSink (it may
// read with ordering = "key" or "none"): each record is produced on its own (its Kafka partition keeps the order it is given).
func (s *Sink) ConsumesOutOfOrder() {}

// Close closes the client (records not yet acknowledged are failed; their
// batch's offset was not committed).
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cl != nil {
		s.cl.Close()
		s.cl = nil
	}
	return nil
}

// topicFor is the Kafka topic of a batch, or why there is none.
func (s *Sink) topicFor(b *connector.SinkBatch) (string, error) {
	t := strings.NewReplacer("{stream}", sanitizeTopicPart(b.Stream), "{topic}", sanitizeTopicPart(b.Topic)).Replace(s.template)
	if why := validTopic(t); why != "" {
		return "", fmt.Errorf("topic template %q for stream %q topic %q: %s", s.template, b.Stream, b.Topic, why)
	}
	return t, nil
}

// Consume produces the batch and returns once Kafka acknowledged every
// record (acks=all), or with the records that failed: Permanent for a
// record the brokers refuse on its own (too large, invalid), Unavailable
// when the cluster is away or slow.
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	topic, err := s.topicFor(b)
	if err != nil {
		return connector.Permanent(err)
	}
	failed := connector.MessageErrors{}
	recs := make([]*kgo.Record, 0, len(b.Messages))
	index := make([]int, 0, len(b.Messages)) // recs[k] is message index[k]
	for i := range b.Messages {
		r := s.record(topic, b, &b.Messages[i])
		if n := recordSize(r); n > s.maxBytes {
			// Refused here: a record batch holds at least one record.
			failed[i] = connector.Permanent(fmt.Errorf("the record is %d bytes, above max_message_bytes %d", n, s.maxBytes))
			continue
		}
		recs = append(recs, r)
		index = append(index, i)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cl, err := s.client(ctx)
	if err != nil {
		return err
	}
	timedOut := func(err error) error {
		return connector.Unavailable(fmt.Errorf("produce to %s: not every record acknowledged within timeout %s: %w", topic, s.timeout, err))
	}
	results, err := s.produce(ctx, cl, recs)
	if err != nil {
		return timedOut(err)
	}
	var refused []int
	down := false
	for k, err := range results {
		i := index[k]
		switch {
		case err == nil:
		case refusedRecord(err):
			refused = append(refused, i)
		default:
			down = true
			failed[i] = connector.Unavailable(fmt.Errorf("produce to %s: %w", topic, err))
		}
	}
	// A broker refuses a whole record batch over one bad record: send
	// the refused ones alone, so only the bad one is dead-lettered.
	for _, i := range refused {
		if down {
			failed[i] = connector.Unavailable(fmt.Errorf("produce to %s: not retried while the cluster is failing", topic))
			continue
		}
		errs, err := s.produce(ctx, cl, []*kgo.Record{s.record(topic, b, &b.Messages[i])})
		if err != nil {
			return timedOut(err)
		}
		if err := errs[0]; err != nil {
			if refusedRecord(err) {
				failed[i] = connector.Permanent(fmt.Errorf("Kafka refused the record for %s: %w", topic, err))
			} else {
				down = true
				failed[i] = connector.Unavailable(fmt.Errorf("produce to %s: %w", topic, err))
			}
		}
	}
	s.log.Debug("produced batch", "topic", topic, "messages", len(recs)-len(failed), "failed", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// refusedRecord reports whether err is a broker's (or the client's own)
// refusal of the record itself, which sending again cannot fix.
func refusedRecord(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return false
	}
	switch ke {
	case kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage,
		kerr.InvalidTimestamp, kerr.InvalidTopicException:
		return true
	}
	return false
}

// recordSize is an upper bound of r's size in a record batch, with the
// batch's own header (61 bytes).
func recordSize(r *kgo.Record) int {
	n := 61 + 21 + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// record is the Kafka record of m.
func (s *Sink) record(topic string, b *connector.SinkBatch, m *connector.Message) *kgo.Record {
	key, hs := kafkaHeaders(m.Headers)
	r := &kgo.Record{Topic: topic, Key: key, Value: m.Payload, Headers: hs}
	if !m.OriginTimestamp.IsZero() {
		r.Timestamp = m.OriginTimestamp
	} else if !m.Timestamp.IsZero() {
		r.Timestamp = m.Timestamp
	}
	if s.metadata {
		r.Headers = append(r.Headers,
			kgo.RecordHeader{Key: "iggy_stream", Value: []byte(b.Stream)},
			kgo.RecordHeader{Key: "iggy_topic", Value: []byte(b.Topic)},
			kgo.RecordHeader{Key: "iggy_partition_id", Value: strconv.AppendUint(nil, uint64(b.Partition), 10)},
			kgo.RecordHeader{Key: "iggy_offset", Value: strconv.AppendUint(nil, m.Offset, 10)},
			kgo.RecordHeader{Key: "iggy_message_id", Value: []byte(uuid.UUID(m.ID).String())},
		)
	}
	return r
}
