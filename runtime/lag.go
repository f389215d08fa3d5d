package runtime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
)

// PartitionLag is how far a sink's consumer group is behind one
// partition of a topic it reads.
type PartitionLag struct {
	Stream        string `json:"stream"`
	Topic         string `json:"topic"`
	ConsumerGroup string `json:"consumer_group"`
	Partition     uint32 `json:"partition"`
	// End is the partition's current offset (its last message); Messages
	// how many it holds.
	End      uint64 `json:"end_offset"`
	Messages uint64 `json:"messages"`
	// Committed is the group's stored offset, nil when it stored none.
	Committed *uint64 `json:"committed_offset,omitempty"`
	// Lag is the number of messages after the committed offset: End -
	// Committed, or every message the partition holds when nothing is
	// committed.
	Lag uint64 `json:"lag"`
}

// lagTimeout bounds one reading of a sink's lag (a server that does not
// answer must not hold /stats or a metrics scrape).
const lagTimeout = 3 * time.Second

// lagFresh is how long a reading of a sink's lag is reused (a /stats
// request gathers the metrics, which read it too).
const lagFresh = time.Second

// lagCache keeps each sink's last lag reading.
type lagCache struct {
	mu   sync.Mutex
	last map[string]lagReading
}

type lagReading struct {
	at  time.Time
	lag []PartitionLag
}

// Lag reads, from the Iggy server, how far the sink key's consumer groups
// are behind each partition of the topics it reads, sorted by stream,
// topic and partition. It asks the server (at most once a second per
// sink), so a sink that is stopped or failing still shows its lag grow.
func (r *Runtime) Lag(ctx context.Context, key string) ([]PartitionLag, error) {
	r.lag.mu.Lock()
	defer r.lag.mu.Unlock()
	if l, ok := r.lag.last[key]; ok && time.Since(l.at) < lagFresh {
		return l.lag, nil
	}
	lag, err := r.readLag(ctx, key)
	if err != nil {
		return lag, err
	}
	if r.lag.last == nil {
		r.lag.last = map[string]lagReading{}
	}
	r.lag.last[key] = lagReading{at: time.Now(), lag: lag}
	return lag, nil
}

func (r *Runtime) readLag(ctx context.Context, key string) ([]PartitionLag, error) {
	m, err := r.get(connector.KindSink, key)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	cfg := m.cfg
	m.mu.Unlock()
	if cfg == nil || r.admin == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	var out []PartitionLag
	for _, cs := range cfg.Consumers {
		for _, topic := range cs.Topics {
			ls, err := r.topicLag(ctx, cs.Stream, topic, cs.ConsumerGroup)
			if err != nil {
				return out, fmt.Errorf("lag of sink %s on %s/%s: %w", key, cs.Stream, topic, err)
			}
			out = append(out, ls...)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Stream != b.Stream {
			return a.Stream < b.Stream
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out, nil
}

func (r *Runtime) topicLag(ctx context.Context, stream, topic, group string) ([]PartitionLag, error) {
	sid, tid := iggy.NamedID(stream), iggy.NamedID(topic)
	t, err := r.admin.GetTopic(ctx, sid, tid)
	if errors.Is(err, iggy.ErrTopicNotFound) || errors.Is(err, iggy.ErrStreamNotFound) {
		return nil, nil // not made yet: nothing to be behind
	}
	if err != nil {
		return nil, err
	}
	out := make([]PartitionLag, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		l := PartitionLag{Stream: stream, Topic: topic, ConsumerGroup: group, Partition: p.ID,
			End: p.CurrentOffset, Messages: p.MessagesCount, Lag: p.MessagesCount}
		off, err := r.admin.GetConsumerOffset(ctx, iggy.ConsumerGroup(iggy.NamedID(group)), sid, tid, iggy.Partition(p.ID))
		switch {
		case err == nil:
			stored := off.StoredOffset
			l.Committed = &stored
			l.Lag = 0
			if p.MessagesCount > 0 && p.CurrentOffset > stored {
				l.Lag = p.CurrentOffset - stored
			}
		case errors.Is(err, iggy.ErrConsumerOffsetNotFound), errors.Is(err, iggy.ErrConsumerGroupNotFound):
			// nothing committed: every message is still to be read
		default:
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// lagCollector serves ferry_sink_lag_messages at each scrape, read from
// the server then (at most lagTimeout per sink).
type lagCollector struct {
	rt   *Runtime
	desc *prometheus.Desc
}

func newLagCollector(rt *Runtime) *lagCollector {
	return &lagCollector{rt: rt, desc: prometheus.NewDesc("ferry_sink_lag_messages",
		"Messages a sink's consumer group has not committed yet, per partition (Ferry)",
		[]string{"connector_key", "stream", "topic", "consumer_group", "partition"}, nil)}
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	for _, info := range c.rt.Connectors(connector.KindSink) {
		ls, err := c.rt.Lag(context.Background(), info.Key)
		if err != nil {
			c.rt.log.Debug("reading a sink's lag failed", "sink", info.Key, "error", err)
		}
		for _, l := range ls {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(l.Lag),
				info.Key, l.Stream, l.Topic, l.ConsumerGroup, fmt.Sprint(l.Partition))
		}
	}
}
