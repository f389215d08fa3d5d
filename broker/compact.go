package broker

// Compaction: every Config.CompactionInterval the retention loop compacts
// each partition of each compacted topic (the Ferry topic option
// ferry.compact, wire.OptCompact) with storage's Log.Compact: sealed
// segments keep the latest message per key (the user header "key"),
// deletion markers ("deleted" = true) for the topic's
// ferry.compact_tombstone_retention (default
// Config.CompactTombstoneRetention), and every message without a key.
// The active segment is never rewritten, but its keys count: a value in a
// sealed segment goes once a newer one is anywhere in the partition.
// Offsets are kept; a poll at a compacted offset gets the next survivor.
// Each rewritten segment publishes segment.compacted and adds to the
// iggy_broker_compaction_* metrics. Retention (expiry, size) still applies
// to compacted topics and runs first.

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/broker/storage"
	"github.com/prometheus/client_golang/prometheus"
)

// compactCounters are one topic's compaction totals, since the broker
// started (a counter reset to Prometheus on restart).
type compactCounters struct {
	passes, segments, bytesBefore, bytesAfter, messagesRemoved, tombstonesRemoved atomic.Uint64
	micros                                                                        atomic.Uint64 // time spent compacting
	keys                                                                          atomic.Int64  // distinct keys at the last pass, all partitions
}

// compactRegistry maps each broker to its topics' counters. It lives
// outside Broker so compaction adds no field to it; entries go with the
// broker's retention loop.
var compactRegistry sync.Map // *Broker → *sync.Map (*topic → *compactCounters)

func compactCountersOf(b *Broker, t *topic) *compactCounters {
	m, _ := compactRegistry.LoadOrStore(b, &sync.Map{})
	c, _ := m.(*sync.Map).LoadOrStore(t, &compactCounters{})
	return c.(*compactCounters)
}

func lookupCompactCounters(b *Broker, t *topic) *compactCounters {
	m, ok := compactRegistry.Load(b)
	if !ok {
		return nil
	}
	c, ok := m.(*sync.Map).Load(t)
	if !ok {
		return nil
	}
	return c.(*compactCounters)
}

type compactItem struct {
	t         *topic
	name      string
	retention time.Duration
	parts     []*partition
}

// compactAll runs one compaction pass over every compacted topic.
func (b *Broker) compactAll(now time.Time) {
	var items []compactItem
	b.mu.RLock()
	for _, s := range b.streams {
		for _, t := range s.topics {
			if !t.opts.Compact {
				continue
			}
			r := b.cfg.CompactTombstoneRetention
			if t.opts.CompactTombstoneRetention != 0 {
				r = time.Duration(min(t.opts.CompactTombstoneRetention, uint64(1<<63-1)/1000)) * time.Microsecond
			}
			items = append(items, compactItem{t, s.name + "/" + t.name, r, append([]*partition(nil), t.parts...)})
		}
	}
	b.mu.RUnlock()
	for _, it := range items {
		c := compactCountersOf(b, it.t)
		var keys int64
		for _, p := range it.parts {
			if b.ctx.Err() != nil {
				return
			}
			n, err := b.compactPartition(it, p, c, now)
			if err != nil {
				if !errors.Is(err, storage.ErrClosed) && b.ctx.Err() == nil {
					b.log.Warn("compaction failed", "topic", it.name, "partition", p.id, "err", err)
				}
				continue
			}
			keys += int64(n)
		}
		c.passes.Add(1)
		c.keys.Store(keys)
	}
}

// compactPartition compacts one partition and returns its distinct keys
// (those of its last pass when this one was skipped).
func (b *Broker) compactPartition(it compactItem, p *partition, c *compactCounters, now time.Time) (int, error) {
	start := time.Now()
	st, err := p.log.Compact(b.ctx, storage.CompactOptions{TombstoneRetention: it.retention, Now: now})
	c.micros.Add(uint64(time.Since(start).Microseconds()))
	for _, s := range st.Segments {
		c.segments.Add(1)
		c.bytesBefore.Add(s.BytesBefore)
		c.bytesAfter.Add(s.BytesAfter)
		c.messagesRemoved.Add(s.MessagesBefore - s.MessagesAfter)
		c.tombstonesRemoved.Add(s.TombstonesRemoved)
		b.events.segmentCompacted(p, s)
	}
	if err != nil {
		return 0, fmt.Errorf("compact partition %d: %w", p.id, err)
	}
	if len(st.Segments) > 0 {
		b.log.Debug("compaction: rewrote segments", "topic", it.name, "partition", p.id, "segments", len(st.Segments), "keys", st.Keys)
	}
	if st.Skipped {
		return int(max(c.keys.Load(), 0)) / max(len(it.parts), 1), nil
	}
	return st.Keys, nil
}

// compactionMetrics emits one topic's compaction series, if it has any.
func compactionMetrics(ch chan<- prometheus.Metric, b *Broker, t *topic) {
	c := lookupCompactCounters(b, t)
	if c == nil {
		return
	}
	s, n := t.stream.name, t.name
	for d, v := range map[*prometheus.Desc]uint64{
		descCompactPasses: c.passes.Load(), descCompactSegments: c.segments.Load(),
		descCompactBytesBefore: c.bytesBefore.Load(), descCompactBytesAfter: c.bytesAfter.Load(),
		descCompactRemoved: c.messagesRemoved.Load(), descCompactTombstones: c.tombstonesRemoved.Load(),
	} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), s, n)
	}
	ch <- prometheus.MustNewConstMetric(descCompactSeconds, prometheus.CounterValue, float64(c.micros.Load())/1e6, s, n)
	ch <- prometheus.MustNewConstMetric(descCompactKeys, prometheus.GaugeValue, float64(c.keys.Load()), s, n)
}

var (
	descCompactPasses      = desc("compaction_passes_total", "compaction passes over a compacted topic", "stream", "topic")
	descCompactSegments    = desc("compaction_segments_total", "segments rewritten by compaction", "stream", "topic")
	descCompactBytesBefore = desc("compaction_bytes_before_total", "record bytes of segments before compaction rewrote them", "stream", "topic")
	descCompactBytesAfter  = desc("compaction_bytes_after_total", "record bytes of the segments compaction wrote", "stream", "topic")
	descCompactRemoved     = desc("compaction_messages_removed_total", "messages compaction removed (superseded values and expired deletion markers)", "stream", "topic")
	descCompactTombstones  = desc("compaction_tombstones_removed_total", "deletion markers compaction removed after their retention", "stream", "topic")
	descCompactSeconds     = desc("compaction_seconds_total", "time spent compacting", "stream", "topic")
	descCompactKeys        = desc("compaction_keys", "distinct keys at the last compaction pass, all partitions", "stream", "topic")
)

// compactDescs are the compaction series, for Describe.
var compactDescs = []*prometheus.Desc{descCompactPasses, descCompactSegments, descCompactBytesBefore,
	descCompactBytesAfter, descCompactRemoved, descCompactTombstones, descCompactSeconds, descCompactKeys}
