package broker

// The event points: one method per kind of change, called where the
// change commits (cmd_2xx_streams.go, cmd_3xx_topics.go, retention.go,
// cmd_6xx_groups.go, groups.go, cmd_12x_offsets.go, session.go). Each
// returns at once: see events.go. Values that may change later are read
// at the event point (the caller holds what guards them); names are read
// by build on the publisher goroutine when the caller does not hold
// Broker.mu.

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/ferryhq/ferry/broker/storage"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
)

func streamSubject(s string) string { return "streams/" + s }

func topicSubject(s, t string) string { return "streams/" + s + "/topics/" + t }

// streamEvent publishes a stream.* event. Caller holds Broker.mu for
// writing; previous is the name before a rename.
func (e *eventPub) streamEvent(typ sysevents.Type, s *stream, previous string) {
	if e == nil || e.isSystem(s) {
		return
	}
	d := sysevents.StreamData{StreamID: s.id, Stream: s.name, PreviousName: previous}
	if typ == sysevents.StreamPurged || typ == sysevents.StreamDeleted {
		d.Topics = len(s.topics)
	}
	key := ""
	if typ == sysevents.StreamCreated || typ == sysevents.StreamDeleted {
		key = fmt.Sprintf("stream %d@%d", s.id, s.createdAt) // once per stream
	}
	e.emit(pendingEvent{typ: typ, key: key, build: func() (string, any) { return streamSubject(d.Stream), d }})
}

// topicEvent publishes a topic.* event. Caller holds Broker.mu for
// writing; previous is the name before a rename.
func (e *eventPub) topicEvent(typ sysevents.Type, t *topic, previous string) {
	if e == nil || e.isSystem(t.stream) {
		return
	}
	d := sysevents.TopicData{StreamID: t.stream.id, Stream: t.stream.name, TopicID: t.id, Topic: t.name,
		PreviousName: previous, Partitions: len(t.parts),
		MessageExpiryMicros: orZero(t.opts.MessageExpiry), MaxTopicSize: orZero(t.opts.MaxTopicSize)}
	key := ""
	if typ == sysevents.TopicCreated || typ == sysevents.TopicDeleted {
		key = "topic " + strconv.FormatUint(t.uid, 10) // uids are never reused
	}
	e.emit(pendingEvent{typ: typ, key: key, build: func() (string, any) { return topicSubject(d.Stream, d.Topic), d }})
}

// segmentsDeleted publishes segment.deleted for the leading segments of
// gone that retention dropped from p (empty ones make none).
func (e *eventPub) segmentsDeleted(p *partition, gone []storage.SegmentInfo, reason string) {
	if e == nil || len(gone) == 0 || e.isSystem(p.topic.stream) {
		return
	}
	d := sysevents.SegmentData{StreamID: p.topic.stream.id, TopicID: p.topic.id, Partition: p.id,
		FirstOffset: gone[0].BaseOffset, Segments: len(gone), Reason: reason}
	end := gone[0].BaseOffset
	for _, s := range gone {
		d.Messages += s.Messages
		d.Bytes += s.SizeBytes
		end = s.NextOffset
	}
	if d.Messages == 0 || end == 0 {
		return
	}
	d.LastOffset = end - 1
	t := p.topic
	key := fmt.Sprintf("segments %d/%d/%d-%d", t.uid, p.id, d.FirstOffset, d.LastOffset)
	e.emit(pendingEvent{typ: sysevents.SegmentDeleted, key: key, build: func() (string, any) {
		d.Stream, d.Topic = t.stream.name, t.name
		return topicSubject(d.Stream, d.Topic) + "/partitions/" + strconv.FormatUint(uint64(d.Partition), 10), d
	}})
}

// segmentCompacted publishes segment.compacted for one segment of p that
// compaction rewrote.
func (e *eventPub) segmentCompacted(p *partition, cs storage.CompactedSegment) {
	if e == nil || e.isSystem(p.topic.stream) || cs.NextOffset == 0 {
		return
	}
	t := p.topic
	d := sysevents.SegmentCompactedData{StreamID: t.stream.id, TopicID: t.id, Partition: p.id,
		FirstOffset: cs.BaseOffset, LastOffset: cs.NextOffset - 1,
		MessagesBefore: cs.MessagesBefore, MessagesAfter: cs.MessagesAfter,
		BytesBefore: cs.BytesBefore, BytesAfter: cs.BytesAfter, TombstonesRemoved: cs.TombstonesRemoved}
	key := fmt.Sprintf("compacted %d/%d/%d-%d/%d", t.uid, p.id, d.FirstOffset, d.LastOffset, d.MessagesAfter)
	e.emit(pendingEvent{typ: sysevents.SegmentCompacted, key: key, build: func() (string, any) {
		d.Stream, d.Topic = t.stream.name, t.name
		return topicSubject(d.Stream, d.Topic) + "/partitions/" + strconv.FormatUint(uint64(d.Partition), 10), d
	}})
}

// groupEvent publishes a group.* event about g (and m, when one member
// caused it). Caller holds g.mu; Broker.mu need not be held.
func (e *eventPub) groupEvent(typ sysevents.Type, g *group, m *member, reason string) {
	if e == nil || e.isSystem(g.topic.stream) {
		return
	}
	t := g.topic
	d := sysevents.GroupData{StreamID: t.stream.id, TopicID: t.id, GroupID: g.id,
		Generation: g.generation, Members: len(g.members), Reason: reason}
	if m != nil {
		d.MemberID, d.ClientID = m.id, uint32(m.conn.id)
	}
	if typ == sysevents.GroupRebalanced {
		d.Assignment = g.assignment()
	}
	e.emit(pendingEvent{typ: typ, build: func() (string, any) {
		d.Stream, d.Topic, d.Group = t.stream.name, t.name, g.name
		return topicSubject(d.Stream, d.Topic) + "/groups/" + d.Group, d
	}})
}

// assignment lists each member's partitions, in join order. Caller
// holds g.mu.
func (g *group) assignment() []sysevents.GroupMember {
	out := make([]sysevents.GroupMember, 0, len(g.members))
	for _, m := range g.members {
		gm := sysevents.GroupMember{MemberID: m.id, ClientID: uint32(m.conn.id), Partitions: []uint32{}}
		for p, o := range g.owner {
			if o == m {
				gm.Partitions = append(gm.Partitions, p)
			}
		}
		sort.Slice(gm.Partitions, func(i, j int) bool { return gm.Partitions[i] < gm.Partitions[j] })
		out = append(out, gm)
	}
	return out
}

// rebalanced publishes group.rebalanced once g's generation moved, when
// g has had a member (g.ev is set at the first join). Caller holds g.mu.
func (g *group) rebalanced(reason string, m *member) {
	g.ev.groupEvent(sysevents.GroupRebalanced, g, m, reason)
}

// offsetStored records a stored offset for the next coalesced
// offset.stored event. g is the group for a group offset. The caller may
// hold g.mu; this takes only the publisher's leaf lock.
func (e *eventPub) offsetStored(p *partition, g *group, k offsetKey, offset uint64) {
	if e == nil || e.isSystem(p.topic.stream) {
		return
	}
	key := offKey{p, k.Kind, k.ID}
	now := time.Now()
	e.offMu.Lock()
	defer e.offMu.Unlock()
	if o := e.offs[key]; o != nil {
		o.offset, o.at = offset, now
		o.stores++
		return
	}
	if len(e.offs) >= e.maxOffs {
		e.dropped.WithLabelValues(dropOffsetsFull).Inc()
		return
	}
	e.offs[key] = &offPending{g: g, offset: offset, stores: 1, at: now}
}

// flushOffsets publishes the coalesced offsets (publisher goroutine).
func (e *eventPub) flushOffsets() {
	e.offMu.Lock()
	offs := e.offs
	if len(offs) == 0 {
		e.offMu.Unlock()
		return
	}
	e.offs = make(map[offKey]*offPending, len(offs))
	e.offMu.Unlock()
	keys := make([]offKey, 0, len(offs))
	for k := range offs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.p.topic.uid != b.p.topic.uid {
			return a.p.topic.uid < b.p.topic.uid
		}
		if a.p.id != b.p.id {
			return a.p.id < b.p.id
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		return a.id < b.id
	})
	evs := make([]pendingEvent, 0, len(keys))
	for _, k := range keys {
		o := offs[k]
		p, t := k.p, k.p.topic
		d := sysevents.OffsetData{StreamID: t.stream.id, TopicID: t.id, Partition: p.id,
			ConsumerKind: sysevents.ConsumerSingle, ConsumerID: k.id, Offset: o.offset, Stores: o.stores}
		if k.kind == wire.ConsumerGroup {
			d.ConsumerKind = sysevents.ConsumerGroup
		}
		g := o.g
		key := fmt.Sprintf("offset %d/%d/%s:%d/%d", t.uid, p.id, d.ConsumerKind, k.id, o.offset)
		evs = append(evs, pendingEvent{typ: sysevents.OffsetStored, at: o.at, key: key, build: func() (string, any) {
			d.Stream, d.Topic = t.stream.name, t.name
			consumer := d.ConsumerKind + "s/" + strconv.FormatUint(uint64(d.ConsumerID), 10)
			if g != nil {
				d.Group = g.name
				consumer = "groups/" + g.name
			}
			return topicSubject(d.Stream, d.Topic) + "/partitions/" + strconv.FormatUint(uint64(d.Partition), 10) + "/" + consumer, d
		}})
	}
	for len(evs) > 0 {
		n := min(len(evs), publishBatch)
		e.publish(evs[:n])
		evs = evs[n:]
	}
}

// clientEvent publishes client.connected or client.disconnected.
func (e *eventPub) clientEvent(typ sysevents.Type, c *conn, user uint32, reason string) {
	if e == nil {
		return
	}
	d := sysevents.ClientData{ClientID: uint32(c.id), Address: c.remote, UserID: user, Reason: reason}
	e.emit(pendingEvent{typ: typ, build: func() (string, any) {
		return "clients/" + strconv.FormatUint(uint64(d.ClientID), 10), d
	}})
}

// loginFailed publishes login.failed; username is "" for a token login.
// The password or token never reaches the event.
func (e *eventPub) loginFailed(c *conn, token bool, username string, reason wire.EvictionReason) {
	if e == nil {
		return
	}
	d := sysevents.LoginData{ClientID: uint32(c.id), Address: c.remote, Method: sysevents.LoginPassword,
		Username: username, Reason: reason.String()}
	if token {
		d.Method, d.Username = sysevents.LoginToken, ""
	}
	e.emit(pendingEvent{typ: sysevents.LoginFailed, build: func() (string, any) { return "logins/" + d.Address, d }})
}
