package broker

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/broker/storage"
	"github.com/ferryhq/ferry/iggy/wire"
)

// The broker's model: streams hold topics, topics hold partitions and
// consumer groups. The maps and slices of the model, and every field not
// documented otherwise, are guarded by Broker.mu (read for lookups, write
// for changes); see locksordering.txt.

type stream struct {
	id        uint32
	name      string
	createdAt uint64
	topics    map[uint32]*topic
}

type topic struct {
	stream    *stream
	id        uint32
	uid       uint64 // names the topic's directory; never reused
	name      string
	createdAt uint64
	opts      wire.TopicOptions
	parts     []*partition // index = partition id
	groups    map[uint32]*group
	nextGroup uint32        // group ids are monotonic per topic
	rr        atomic.Uint64 // balanced-partitioning cursor
	traffic   traffic       // messages and bytes in and out, for metrics
	appended  appendSignal  // wakes in-process consumers waiting for data
}

// partition is one partition of a topic. Its log is safe for one appender
// and many readers; mu serializes appenders, offMu guards the offsets.
type partition struct {
	topic     *topic
	id        uint32
	createdAt uint64
	dir       string // "" in memory
	log       storage.Log

	mu     sync.Mutex // serializes Append; guards lastTS and ids
	lastTS uint64     // the last base_timestamp given out
	ids    *dedupIDs  // recent message ids; nil without deduplication

	offMu   sync.Mutex // guards offsets
	offsets *offsetStore
}

// offsetKey names whose offset is stored: a single consumer (numeric id,
// or XXH32 of its name) or a consumer group (its numeric id).
type offsetKey struct {
	Kind wire.ConsumerKind
	ID   uint32
}

// nowMicros is the broker's clock in µs since the epoch.
func nowMicros() uint64 { return uint64(time.Now().UnixMicro()) }

// lowestFree returns the smallest id not used as a key of m.
func lowestFree[V any](m map[uint32]V) uint32 {
	for i := uint32(0); ; i++ {
		if _, used := m[i]; !used {
			return i
		}
	}
}

func sortedKeys[V any](m map[uint32]V) []uint32 {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// byID resolves an entry of m by numeric id, or by name through name.
func byID[T any](m map[uint32]T, id wire.Identifier, name func(T) string) (zero T) {
	if n, ok := id.Numeric(); ok {
		return m[n]
	}
	for _, v := range m {
		if name(v) == id.Name() {
			return v
		}
	}
	return zero
}

// streamBy resolves a stream by id or name. Caller holds b.mu.
func (b *Broker) streamBy(id wire.Identifier) *stream {
	return byID(b.streams, id, func(s *stream) string { return s.name })
}

// topicBy resolves a topic of s by id or name. Caller holds b.mu.
func (s *stream) topicBy(id wire.Identifier) *topic {
	return byID(s.topics, id, func(t *topic) string { return t.name })
}

// groupBy resolves a consumer group of t by id or name. Caller holds b.mu.
func (t *topic) groupBy(id wire.Identifier) *group {
	return byID(t.groups, id, func(g *group) string { return g.name })
}

// partition returns partition id of t, or nil. Caller holds b.mu.
func (t *topic) partition(id uint32) *partition {
	if uint64(id) < uint64(len(t.parts)) {
		return t.parts[id]
	}
	return nil
}

// lookupTopic resolves a stream and a topic; a nil stream or topic says
// which is missing. Caller holds b.mu.
func (b *Broker) lookupTopic(sid, tid wire.Identifier) (*stream, *topic) {
	s := b.streamBy(sid)
	if s == nil {
		return nil, nil
	}
	return s, s.topicBy(tid)
}

// topicMissing returns the not-found code for an unresolved stream or
// topic from lookupTopic, or 0 when both resolved.
func topicMissing(s *stream, t *topic) wire.Code {
	switch {
	case s == nil:
		return wire.ErrStreamIDNotFound.Code
	case t == nil:
		return wire.ErrTopicIDNotFound.Code
	}
	return 0
}

// partStats sums a partition's segments.
type partStats struct {
	segments      uint32
	sizeBytes     uint64
	messages      uint64
	currentOffset uint64 // highest offset, 0 when empty
	empty         bool
}

func (p *partition) stats() partStats {
	var st partStats
	for _, s := range p.log.Segments() {
		st.segments++
		st.sizeBytes += s.SizeBytes
		st.messages += s.Messages
	}
	next := p.log.NextOffset()
	st.empty = next == 0
	if next > 0 {
		st.currentOffset = next - 1
	}
	return st
}

// current returns the highest offset in the partition and whether it has
// ever held a message.
func (p *partition) current() (uint64, bool) {
	next := p.log.NextOffset()
	if next == 0 {
		return 0, false
	}
	return next - 1, true
}

func (t *topic) header() wire.TopicHeader {
	h := wire.TopicHeader{
		ID: t.id, CreatedAt: t.createdAt, PartitionsCount: uint32(len(t.parts)),
		MessageExpiry: t.opts.MessageExpiry, Compression: t.opts.Compression,
		MaxTopicSize: t.opts.MaxTopicSize, Name: t.name,
	}
	for _, p := range t.parts {
		st := p.stats()
		h.SizeBytes += st.sizeBytes
		h.MessagesCount += st.messages
	}
	h.Explicit, h.Derived = t.opts.Blocks()
	return h
}

// details builds TopicDetails; fresh reports zero counters (create_topic).
func (t *topic) details(fresh bool) wire.TopicDetails {
	d := wire.TopicDetails{TopicHeader: t.header()}
	for _, p := range t.parts {
		pi := wire.PartitionInfo{ID: p.id, CreatedAt: p.createdAt}
		if !fresh {
			st := p.stats()
			pi.SegmentsCount = max(st.segments, 1)
			pi.CurrentOffset, pi.SizeBytes, pi.MessagesCount = st.currentOffset, st.sizeBytes, st.messages
		}
		d.Partitions = append(d.Partitions, pi)
	}
	if fresh {
		d.SizeBytes, d.MessagesCount = 0, 0
	}
	return d
}

func (s *stream) header() wire.StreamHeader {
	h := wire.StreamHeader{ID: s.id, CreatedAt: s.createdAt, TopicsCount: uint32(len(s.topics)), Name: s.name}
	for _, t := range s.topics {
		th := t.header()
		h.SizeBytes += th.SizeBytes
		h.MessagesCount += th.MessagesCount
	}
	return h
}

func (s *stream) details() wire.StreamDetails {
	d := wire.StreamDetails{StreamHeader: s.header()}
	for _, id := range sortedKeys(s.topics) {
		d.Topics = append(d.Topics, s.topics[id].header())
	}
	return d
}
