package broker

// Retention: a sweep every Config.RetentionInterval applies each topic's
// message_expiry and max_topic_size by dropping whole segments, oldest
// first, never a partition's active segment:
//
//   - expiry: the leading sealed segments whose last record was appended
//     more than message_expiry ago;
//   - size: while the topic's partitions together hold more than
//     max_topic_size bytes, the sealed segment with the oldest first
//     record, across all its partitions.
//
// Durability: under FsyncInterval a second loop fsyncs every partition log
// and offsets journal each Config.FsyncInterval.

import (
	"errors"
	"math"
	"time"

	"github.com/ferryhq/ferry/broker/storage"
	"github.com/ferryhq/ferry/sysevents"
)

// retentionLoop also runs compaction (compact.go), after retention when
// both are due, so compaction never rewrites a segment retention drops.
func (b *Broker) retentionLoop() {
	t := time.NewTicker(b.cfg.RetentionInterval)
	defer t.Stop()
	c := time.NewTicker(b.cfg.CompactionInterval)
	defer c.Stop()
	defer compactRegistry.Delete(b)
	for {
		select {
		case <-b.ctx.Done():
			return
		case now := <-t.C:
			b.sweep(now)
		case now := <-c.C:
			b.compactAll(now)
		}
	}
}

type sweepItem struct {
	t             *topic
	name          string
	expiry, limit uint64
	parts         []*partition
}

// sweep runs one retention pass.
func (b *Broker) sweep(now time.Time) {
	var items []sweepItem
	b.mu.RLock()
	for _, s := range b.streams {
		for _, t := range s.topics {
			if t.opts.MessageExpiry != math.MaxUint64 || t.opts.MaxTopicSize != math.MaxUint64 {
				items = append(items, sweepItem{t, t.name, t.opts.MessageExpiry, t.opts.MaxTopicSize, append([]*partition(nil), t.parts...)})
			}
		}
	}
	b.mu.RUnlock()
	nowUS := uint64(now.UnixMicro())
	for _, it := range items {
		if it.expiry != math.MaxUint64 {
			for _, p := range it.parts {
				b.dropSegments(it.name, p, expiredSegments(p.log.Segments(), it.expiry, nowUS), sysevents.ReasonExpiry)
			}
		}
		if it.limit != math.MaxUint64 {
			b.enforceSize(it)
		}
	}
}

// expiredSegments counts the leading sealed segments that expired.
func expiredSegments(segs []storage.SegmentInfo, expiry, now uint64) int {
	n := 0
	for _, s := range segs {
		if s.Active || s.LastTimestamp > math.MaxUint64-expiry || s.LastTimestamp+expiry >= now {
			break
		}
		n++
	}
	return n
}

func (b *Broker) enforceSize(it sweepItem) {
	for {
		var total uint64
		var victim *partition
		var oldest storage.SegmentInfo
		for _, p := range it.parts {
			segs := p.log.Segments()
			for _, s := range segs {
				total += s.SizeBytes
			}
			if len(segs) > 1 && !segs[0].Active && (victim == nil || segs[0].FirstTimestamp < oldest.FirstTimestamp) {
				victim, oldest = p, segs[0]
			}
		}
		if total <= it.limit || victim == nil || !b.dropSegments(it.name, victim, 1, sysevents.ReasonSize) {
			return
		}
	}
}

// dropSegments drops the n oldest segments of p and reports success;
// reason (sysevents.ReasonExpiry or ReasonSize) goes to the
// segment.deleted event.
func (b *Broker) dropSegments(topic string, p *partition, n int, reason string) bool {
	if n <= 0 {
		return false
	}
	var segs []storage.SegmentInfo
	p.mu.Lock()
	if b.events != nil {
		segs = p.log.Segments()
	}
	dropped, err := p.log.DropOldest(n)
	p.mu.Unlock()
	if err == nil && dropped > 0 && segs != nil {
		b.events.segmentsDeleted(p, segs[:min(dropped, len(segs))], reason)
	}
	if err != nil {
		if !errors.Is(err, storage.ErrClosed) {
			b.log.Warn("retention: dropping segments failed", "topic", topic, "partition", p.id, "err", err)
		}
		return false
	}
	b.log.Debug("retention: dropped segments", "topic", topic, "partition", p.id, "segments", dropped)
	return dropped > 0
}

func (b *Broker) fsyncLoop() {
	t := time.NewTicker(b.cfg.FsyncInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
			b.syncAll()
		}
	}
}

// syncAll fsyncs every partition log and offsets journal.
func (b *Broker) syncAll() {
	var parts []*partition
	b.mu.RLock()
	for _, s := range b.streams {
		for _, t := range s.topics {
			parts = append(parts, t.parts...)
		}
	}
	b.mu.RUnlock()
	for _, p := range parts {
		if err := p.log.Sync(); err != nil && !errors.Is(err, storage.ErrClosed) {
			b.log.Warn("fsync of a partition log failed", "partition", p.id, "err", err)
		}
		p.offMu.Lock()
		err := p.offsets.j.sync()
		p.offMu.Unlock()
		if err != nil {
			b.log.Warn("fsync of an offsets journal failed", "partition", p.id, "err", err)
		}
	}
}
