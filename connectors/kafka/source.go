package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "kafka",
		Summary:   "consumes Kafka topics in a consumer group, committing offsets only after each batch is in Iggy",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
}

// SourceSpec is the source's plugin_config (Ferry's keys).
var SourceSpec = connector.NewSpec(append(clientFields(),
	connector.NewStringListField("topics").Require().WithExample([]string{"orders"}).WithCheck(checkTopics).
		WithDoc("the topics consumed"),
	connector.NewStringField("consumer_group").Require().WithExample("ferry").WithDoc("the consumer group (Kafka's group.id)"),
	connector.NewEnumField("start_offset", "earliest", "latest").WithDefault("earliest").
		WithDoc("where a partition without a committed offset starts (Kafka's auto.offset.reset)"),
	connector.NewIntField("batch_size").Between(1, 100000).WithDefault(500).WithDoc("most records per batch (Kafka's max.poll.records)"),
	connector.NewDurationField("fetch_max_wait").WithDefault(500*time.Millisecond).
		WithDoc("how long a broker holds a fetch waiting for records (Kafka's fetch.max.wait.ms)"),
	connector.NewDurationField("session_timeout").WithDefault(45*time.Second).
		WithDoc("a member silent this long leaves the group (Kafka's session.timeout.ms)"),
	connector.NewDurationField("rebalance_timeout").WithDefault(60*time.Second).
		WithDoc("how long a rebalance waits for every member to rejoin (the Java client's max.poll.interval.ms); a killed member holds one up this long"),
	connector.NewEnumField("schema", string(connector.SchemaJSON), string(connector.SchemaText), string(connector.SchemaRaw)).
		WithDefault(string(connector.SchemaJSON)).WithDoc("the payloads' format in Iggy"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("add kafka_topic, kafka_partition and kafka_offset headers"),
)...).Lint(lintClient)

func checkTopics(v any) error {
	list := stringsOf(v)
	if len(list) == 0 {
		return errors.New("expected at least one topic")
	}
	for _, t := range list {
		if why := validTopic(t); why != "" {
			return errors.New(why)
		}
	}
	return nil
}

// idSpace is the UUID namespace of message ids made from a record's
// topic, partition and offset.
var idSpace = uuid.MustParse("6b61666b-612d-4665-7272-792d69647300")

// Source is the kafka source.
type Source struct {
	opts      []kgo.Opt
	group     string
	batchSize int
	timeout   time.Duration
	schema    connector.Schema
	metadata  bool
	log       *slog.Logger

	cl *kgo.Client

	mu sync.Mutex
	// pending holds, for each batch polled and not yet acked, the offset
	// to commit per partition after it.
	pending map[*connector.Batch]offsets
	// acked is what is in Iggy and not yet committed, per partition.
	acked offsets
	// owned are the partitions this member holds; a batch's offsets of a
	// partition revoked since it was polled are not committed.
	owned map[tp]bool
}

type tp struct {
	topic     string
	partition int32
}

type offsets map[tp]kgo.EpochOffset

// NewSource builds a kafka source from its configuration.
func NewSource(cfg connector.Config) (connector.Source, error) {
	set, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	opts, err := clientOpts(set, cfg.Paths)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{
		group: set.String("consumer_group"), batchSize: set.Int("batch_size"), timeout: set.Duration("timeout"),
		schema: connector.Schema(set.String("schema")), metadata: set.Bool("include_metadata"), log: log,
		pending: map[*connector.Batch]offsets{}, acked: offsets{}, owned: map[tp]bool{},
	}
	start := kgo.NewOffset().AtStart()
	if set.String("start_offset") == "latest" {
		start = kgo.NewOffset().AtEnd()
	}
	s.opts = append(opts,
		kgo.ConsumeTopics(set.Strings("topics")...),
		kgo.ConsumerGroup(s.group),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(start),
		kgo.FetchMaxWait(set.Duration("fetch_max_wait")),
		kgo.SessionTimeout(set.Duration("session_timeout")),
		kgo.RebalanceTimeout(set.Duration("rebalance_timeout")),
		kgo.HeartbeatInterval(min(3*time.Second, set.Duration("session_timeout")/3)),
		kgo.OnPartitionsAssigned(s.assigned),
		kgo.OnPartitionsRevoked(s.revoked),
		kgo.OnPartitionsLost(s.lost),
	)
	return s, nil
}

// Open joins the group. The state is unused: the group's committed
// offsets in Kafka are the position.
func (s *Source) Open(ctx context.Context, _ []byte) error {
	cl, err := kgo.NewClient(s.opts...)
	if err != nil {
		return fmt.Errorf("kafka source: make the client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return fmt.Errorf("kafka source: reach a broker: %w", err)
	}
	s.cl = cl
	return nil
}

// Poll returns up to batch_size records, waiting for the first.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		fs := s.cl.PollRecords(ctx, s.batchSize)
		if fs.IsClientClosed() {
			return nil, errors.New("kafka source: the client is closed")
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("kafka source: fetch %s[%d]: %w", topic, p, err)
			}
		})
		if fs.NumRecords() == 0 {
			if ferr != nil {
				return nil, ferr
			}
			continue
		}
		return s.batch(fs), nil
	}
}

func (s *Source) batch(fs kgo.Fetches) *connector.Batch {
	b := &connector.Batch{Schema: s.schema, Messages: make([]connector.Message, 0, fs.NumRecords())}
	next := offsets{}
	fs.EachRecord(func(r *kgo.Record) {
		b.Messages = append(b.Messages, s.message(r))
		next[tp{r.Topic, r.Partition}] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	})
	s.mu.Lock()
	s.pending[b] = next
	s.mu.Unlock()
	return b
}

// message is the Iggy message of a record: its id a UUID (v5) of topic,
// partition and offset, so a record read again has the same id.
func (s *Source) message(r *kgo.Record) connector.Message {
	m := connector.Message{
		ID:              uuid.NewSHA1(idSpace, []byte(r.Topic+"\x00"+strconv.Itoa(int(r.Partition))+"\x00"+strconv.FormatInt(r.Offset, 10))),
		Payload:         r.Value,
		OriginTimestamp: r.Timestamp,
	}
	if len(r.Key) > 0 {
		if len(r.Key) <= 255 {
			m.Headers = append(m.Headers, header.New(keyHeader, iggyValue(r.Key)))
		} else {
			s.log.Debug("a record key over 255 bytes does not fit an Iggy header and is left out", "topic", r.Topic, "offset", r.Offset)
		}
	}
	for _, h := range r.Headers {
		if h.Key == keyHeader || !fitsIggy(h.Key, h.Value) {
			s.log.Debug("a Kafka header Iggy cannot carry is left out (the key's name, empty, or over 255 bytes)", "header", h.Key)
			continue
		}
		if _, dup := m.Header(h.Key); dup {
			continue // Iggy keeps one value per key: the first
		}
		m.Headers = append(m.Headers, header.New(h.Key, iggyValue(h.Value)))
	}
	if s.metadata {
		m.SetHeader("kafka_topic", header.StringValue(r.Topic))
		m.SetHeader("kafka_partition", header.Uint32Value(uint32(r.Partition)))
		m.SetHeader("kafka_offset", header.Int64Value(r.Offset))
	}
	return m
}

// Ack commits, for the partitions this member still holds, the offsets
// after the batch's records (and any acked before).
func (s *Source) Ack(ctx context.Context, b *connector.Batch) error {
	s.mu.Lock()
	next, ok := s.pending[b]
	delete(s.pending, b)
	for p, o := range next {
		if s.owned[p] {
			s.acked[p] = o
		}
	}
	commit := s.acked.group()
	s.mu.Unlock()
	if !ok || len(commit) == 0 {
		return nil
	}
	return s.commit(ctx, commit)
}

// commit commits offsets and, on success, forgets them from acked.
func (s *Source) commit(ctx context.Context, commit map[string]map[int32]kgo.EpochOffset) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var rerr error
	s.cl.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 && rerr == nil {
					rerr = fmt.Errorf("%s[%d]: error code %d", t.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
	})
	if rerr != nil {
		return fmt.Errorf("kafka source: commit offsets of group %s (the records will be read again): %w", s.group, rerr)
	}
	s.mu.Lock()
	for t, ps := range commit {
		for p, o := range ps {
			if s.acked[tp{t, p}] == o {
				delete(s.acked, tp{t, p})
			}
		}
	}
	s.mu.Unlock()
	return nil
}

func (o offsets) group() map[string]map[int32]kgo.EpochOffset {
	out := map[string]map[int32]kgo.EpochOffset{}
	for p, eo := range o {
		if out[p.topic] == nil {
			out[p.topic] = map[int32]kgo.EpochOffset{}
		}
		out[p.topic][p.partition] = eo
	}
	return out
}

// Nack leaves the records uncommitted: the runtime sends the same batch
// again and acks it then.
func (s *Source) Nack(_ context.Context, b *connector.Batch, cause error) {
	s.log.Debug("batch not yet in Iggy; its offsets stay uncommitted", "group", s.group, "messages", len(b.Messages), "cause", cause)
}

func (s *Source) assigned(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, parts := range ps {
		for _, p := range parts {
			s.owned[tp{t, p}] = true
		}
	}
}

// revoked commits what was acked of the partitions leaving this member,
// then forgets them: a batch polled from them and acked later is not
// committed (the new owner reads it again).
func (s *Source) revoked(ctx context.Context, _ *kgo.Client, ps map[string][]int32) {
	s.mu.Lock()
	commit := map[string]map[int32]kgo.EpochOffset{}
	for t, parts := range ps {
		for _, p := range parts {
			if o, ok := s.acked[tp{t, p}]; ok {
				if commit[t] == nil {
					commit[t] = map[int32]kgo.EpochOffset{}
				}
				commit[t][p] = o
			}
		}
	}
	s.mu.Unlock()
	if len(commit) > 0 {
		if err := s.commit(ctx, commit); err != nil {
			s.log.Warn("commit on revoke failed; the new owner reads those records again", "error", err)
		}
	}
	s.forget(ps)
}

// lost forgets partitions taken from this member without a chance to
// commit.
func (s *Source) lost(_ context.Context, _ *kgo.Client, ps map[string][]int32) { s.forget(ps) }

func (s *Source) forget(ps map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, parts := range ps {
		for _, p := range parts {
			delete(s.owned, tp{t, p})
			delete(s.acked, tp{t, p})
		}
	}
	for _, next := range s.pending {
		for p := range next {
			if !s.owned[p] {
				delete(next, p)
			}
		}
	}
}

// Close commits nothing more and leaves the group; what was polled and
// not acked is read again by the next member.
func (s *Source) Close(context.Context) error {
	if s.cl != nil {
		s.cl.Close()
	}
	return nil
}
