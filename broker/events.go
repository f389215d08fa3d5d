package broker

// The system event stream (package sysevents): the broker publishes what
// happens to it as CloudEvents JSON messages to the stream ferry.events,
// one topic per event type, with the type in the ce_type header.
//
// Publishing never blocks a handler and never recurses:
//
//   - An event point (a handler, the retention sweep, a disconnect)
//     builds a small pendingEvent and offers it to a bounded queue
//     (Events.QueueSize) without waiting; a full queue drops the event
//     and counts it (iggy_broker_events_dropped_total{reason="queue_full"}).
//     Names are read later, on the publisher goroutine under Broker.mu
//     (read), so an event point that does not hold Broker.mu (the
//     janitor, a disconnect) never waits for it.
//   - Offsets stored are coalesced instead of queued: one entry per
//     partition and consumer, holding the last offset and the count of
//     stores, flushed every Events.OffsetWindow (1 s) as one
//     offset.stored event each. At most maxOffsetKeys entries wait; a store
//     for a new key beyond that is dropped and counted ("offsets_full").
//   - Nothing about the system stream is published: not its streams,
//     topics, segments, groups or offsets (a hook consuming it stores
//     offsets and joins groups; publishing those would make events for
//     ever). Events are appended straight to the partition log, not
//     through send_messages, so no event makes another.
//
// One goroutine drains the queue: it takes what is waiting (up to
// publishBatch events), builds the events, and appends one batch per
// type to partition 0 of the type's topic, stamped as a send is
// (partition id, next offset, a timestamp never below the partition's
// last). Under FsyncInterval the fsync loop flushes them with the rest;
// events still queued when the broker is closed are published before the
// logs close, and those queued when the process is killed are lost (the
// queue is memory): events are a best-effort record, not a delivery
// promise. Once appended, they are as durable as any message.
//
// The system stream is made at Start when events are on: the stream
// ferry.events (id sysevents.ReservedStreamID unless taken) and a topic
// of one partition per type, with 1 MiB segments, Events.MaxTopicSize and
// Events.MessageExpiry; existing system topics get the configured
// retention at every Start. When the stream or a topic is deleted or
// renamed, the next event recreates it. User topics may be added to the
// stream (a hook's dead-letter topic); they are not system topics and
// make no events.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
	"github.com/prometheus/client_golang/prometheus"
)

// Events configures the system event stream (events.go, package
// sysevents).
type Events struct {
	// Enabled publishes the broker's events to the stream ferry.events.
	// Default off in Config (tests and programs embedding the package);
	// ferry run's embedded broker and ferry serve turn it on.
	Enabled bool
	// MaxTopicSize is each system topic's max_topic_size in bytes.
	// Default sysevents.DefaultMaxTopicSize (8 MiB); at least 1 MiB.
	MaxTopicSize uint64
	// MessageExpiry is each system topic's message_expiry. Default
	// sysevents.DefaultMessageExpiry (7 days).
	MessageExpiry time.Duration
	// QueueSize bounds the events waiting to be appended; more are
	// dropped and counted. Default 4096.
	QueueSize int
	// OffsetWindow is the coalescing period of offset.stored. Default 1s.
	OffsetWindow time.Duration
}

const (
	defaultEventQueue = 4096
	publishBatch      = 1024
	maxOffsetKeys     = 65536
)

func (e Events) withDefaults() Events {
	if e.MaxTopicSize == 0 {
		e.MaxTopicSize = sysevents.DefaultMaxTopicSize
	}
	if e.MessageExpiry == 0 {
		e.MessageExpiry = sysevents.DefaultMessageExpiry
	}
	if e.QueueSize == 0 {
		e.QueueSize = defaultEventQueue
	}
	if e.OffsetWindow == 0 {
		e.OffsetWindow = time.Second
	}
	return e
}

func (e Events) validate() error {
	var errs []error
	if e.MaxTopicSize < sysevents.SegmentSize {
		errs = append(errs, fmt.Errorf("events max topic size %d is below the system topics' segment size %d", e.MaxTopicSize, sysevents.SegmentSize))
	}
	if e.MessageExpiry < 0 || e.OffsetWindow < 0 || e.QueueSize < 0 {
		errs = append(errs, fmt.Errorf("events message expiry %v, offset window %v and queue size %d must not be negative",
			e.MessageExpiry, e.OffsetWindow, e.QueueSize))
	}
	return errors.Join(errs...)
}

// pendingEvent is an event offered to the publisher. build runs on the
// publisher goroutine with Broker.mu read-locked, so it may read names;
// it must not take any other lock.
type pendingEvent struct {
	typ   sysevents.Type
	at    time.Time
	key   string // names the occurrence (sysevents.New); set by emit when empty
	build func() (subject string, data any)
	built *sysevents.Event // instead of build: an event made elsewhere (PublishEvent)
}

// PublishEvent appends ev, an event made elsewhere (the runtime's, when
// this broker is ferry run's embedded one), to the system stream with the
// broker's own, without waiting. It reports false, and the event is
// dropped, when events are off, ev is not a known type, or the queue is
// full (counted as queue_full).
func (b *Broker) PublishEvent(ev sysevents.Event) bool {
	e := b.events
	if e == nil || !ev.Type.Known() {
		return false
	}
	select {
	case e.q <- pendingEvent{typ: ev.Type, built: &ev}:
		return true
	default:
		e.dropped.WithLabelValues(dropQueueFull).Inc()
		return false
	}
}

// eventPub publishes the broker's events. A nil *eventPub (events off)
// ignores every call.
type eventPub struct {
	b        *Broker
	cfg      Events
	q        chan pendingEvent
	instance string // names events without a natural key, with seq
	seq      atomic.Uint64
	sysID    atomic.Int64 // the system stream's id; -1 before it exists

	offMu   sync.Mutex // a leaf lock; guards offs
	offs    map[offKey]*offPending
	maxOffs int               // cap on len(offs): maxOffsetKeys
	checker wire.BatchChecker // publisher goroutine only
	buf     []byte            // publisher goroutine only
	failLog logQuota          // publisher goroutine only

	published *prometheus.CounterVec
	dropped   *prometheus.CounterVec
}

type offKey struct {
	p    *partition
	kind wire.ConsumerKind
	id   uint32
}

type offPending struct {
	g      *group
	offset uint64
	stores int
	at     time.Time
}

// Reasons an event is dropped, as the metric's label.
const (
	dropQueueFull   = "queue_full"
	dropOffsetsFull = "offsets_full"
	dropFailed      = "append_failed"
)

func newEventPub(b *Broker, cfg Events) *eventPub {
	if !cfg.Enabled {
		return nil
	}
	e := &eventPub{
		b: b, cfg: cfg, q: make(chan pendingEvent, cfg.QueueSize),
		instance: strconv.FormatInt(b.start.UnixMicro(), 10), offs: map[offKey]*offPending{}, maxOffs: maxOffsetKeys,
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iggy_broker_events_published_total",
			Help: "system events appended to the ferry.events stream, by type (Ferry)"}, []string{"type"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "iggy_broker_events_dropped_total",
			Help: "system events dropped: queue_full, offsets_full or append_failed (Ferry)"}, []string{"reason"}),
	}
	e.sysID.Store(-1)
	for _, r := range []string{dropQueueFull, dropOffsetsFull, dropFailed} {
		e.dropped.WithLabelValues(r)
	}
	return e
}

// collectors are the publisher's metrics, for the broker's registry.
func (e *eventPub) collectors() []prometheus.Collector {
	if e == nil {
		return nil
	}
	return []prometheus.Collector{e.published, e.dropped}
}

// isSystem reports whether s is the system stream, whose own changes make
// no events. A stream's id never changes, so no lock is needed.
func (e *eventPub) isSystem(s *stream) bool {
	return e != nil && int64(s.id) == e.sysID.Load()
}

// emit offers an event to the queue without waiting.
func (e *eventPub) emit(ev pendingEvent) {
	if e == nil {
		return
	}
	if ev.at.IsZero() {
		ev.at = time.Now()
	}
	if ev.key == "" {
		ev.key = e.instance + "/" + strconv.FormatUint(e.seq.Add(1), 10)
	}
	select {
	case e.q <- ev:
	default:
		e.dropped.WithLabelValues(dropQueueFull).Inc()
	}
}

// run is the publisher goroutine.
func (e *eventPub) run(ctx context.Context) {
	t := time.NewTicker(e.cfg.OffsetWindow)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			for len(e.q) > 0 {
				e.publish(e.take(<-e.q))
			}
			e.flushOffsets()
			return
		case ev := <-e.q:
			e.publish(e.take(ev))
		case <-t.C:
			e.flushOffsets()
		}
	}
}

// take returns first and what else is queued, up to publishBatch events.
func (e *eventPub) take(first pendingEvent) []pendingEvent {
	evs := []pendingEvent{first}
	for len(evs) < publishBatch {
		select {
		case ev := <-e.q:
			evs = append(evs, ev)
		default:
			return evs
		}
	}
	return evs
}

// publish builds evs and appends them, one batch per type in the order
// the types first occur.
func (e *eventPub) publish(evs []pendingEvent) {
	built := make([]sysevents.Event, 0, len(evs))
	e.b.mu.RLock()
	for _, ev := range evs {
		if ev.built != nil {
			built = append(built, *ev.built)
			continue
		}
		subject, data := ev.build()
		out, err := sysevents.New(ev.typ, sysevents.SourceBroker, subject, ev.key, ev.at, data)
		if err != nil { // the data types marshal; this would be a bug
			e.b.log.Error("events: building an event failed", "type", ev.typ, "err", err)
			e.dropped.WithLabelValues(dropFailed).Inc()
			continue
		}
		built = append(built, out)
	}
	e.b.mu.RUnlock()
	var order []sysevents.Type
	byType := map[sysevents.Type][]sysevents.Event{}
	for _, ev := range built {
		if _, seen := byType[ev.Type]; !seen {
			order = append(order, ev.Type)
		}
		byType[ev.Type] = append(byType[ev.Type], ev)
	}
	for _, typ := range order {
		if err := e.appendEvents(typ, byType[typ]); err != nil {
			e.dropped.WithLabelValues(dropFailed).Add(float64(len(byType[typ])))
			if n, ok := e.failLog.allow(time.Now(), time.Minute); ok {
				e.b.log.Warn("events: appending to the system stream failed; events dropped",
					"type", typ, "err", err, "failures", n)
			}
		}
	}
}

// appendEvents appends evs (all of type typ) as one batch to the type's
// topic, making the system stream or topic first if it is missing.
func (e *eventPub) appendEvents(typ sysevents.Type, evs []sysevents.Event) error {
	p := e.partitionFor(typ)
	if p == nil {
		if err := e.ensure(false); err != nil {
			return err
		}
		if p = e.partitionFor(typ); p == nil {
			return fmt.Errorf("system topic %s/%s is missing after it was made", sysevents.Stream, typ.Topic())
		}
	}
	msgs := make([]wire.Message, len(evs))
	for i := range evs {
		m, err := evs[i].Message()
		if err != nil {
			return err
		}
		msgs[i] = m
	}
	batch, err := wire.AppendBatch(e.buf[:0], msgs)
	if err != nil {
		return fmt.Errorf("encode a batch of %d %s events: %w", len(msgs), typ, err)
	}
	if _, err := e.checker.Validate(batch); err != nil {
		return fmt.Errorf("check a batch of %d %s events: %w", len(msgs), typ, err)
	}
	p.mu.Lock()
	ts := max(nowMicros(), p.lastTS)
	e.checker.Stamp(batch, uint64(p.id), p.log.NextOffset(), ts)
	if err = p.log.Append(batch); err == nil {
		p.lastTS = ts
	}
	p.mu.Unlock()
	if cap(batch) <= 1<<20 {
		e.buf = batch[:0]
	}
	if err != nil {
		return fmt.Errorf("append %d events to %s/%s: %w", len(msgs), sysevents.Stream, typ.Topic(), err)
	}
	p.topic.traffic.in(uint32(len(msgs)), len(batch))
	e.published.WithLabelValues(string(typ)).Add(float64(len(msgs)))
	return nil
}

// partitionFor returns partition 0 of typ's system topic, or nil.
func (e *eventPub) partitionFor(typ sysevents.Type) *partition {
	e.b.mu.RLock()
	defer e.b.mu.RUnlock()
	s := e.b.streamNamed(sysevents.Stream)
	if s == nil || int64(s.id) != e.sysID.Load() {
		return nil
	}
	t := s.topicNamed(typ.Topic())
	if t == nil || len(t.parts) == 0 {
		return nil
	}
	return t.parts[0]
}

// systemOptions are the options of a system topic.
func (e *eventPub) systemOptions() wire.TopicOptions {
	o := wire.DefaultTopicOptions()
	o.SegmentSize = sysevents.SegmentSize
	o.MaxTopicSize = e.cfg.MaxTopicSize
	o.MessageExpiry = uint64(max(e.cfg.MessageExpiry/time.Microsecond, 1))
	o.Explicit = []string{wire.OptMaxTopicSize, wire.OptMessageExpiry, wire.OptSegmentSize}
	return o
}

// ensure makes the system stream and any missing system topic, and with
// retention set the configured retention on the existing ones (at
// Start). It records the stream's id for isSystem.
func (e *eventPub) ensure(retention bool) error {
	b := e.b
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.streamNamed(sysevents.Stream)
	var made *stream
	if s == nil {
		id := sysevents.ReservedStreamID
		if _, taken := b.streams[id]; taken {
			id = lowestFree(b.streams)
		}
		s = &stream{id: id, name: sysevents.Stream, createdAt: nowMicros(), topics: map[uint32]*topic{}}
		b.streams[id] = s
		made = s
	}
	var added []*topic
	type undoOpts struct {
		t    *topic
		opts wire.TopicOptions
	}
	var changed []undoOpts
	undo := func() {
		for _, t := range added {
			delete(s.topics, t.id)
			b.destroyTopic(t)
		}
		for _, c := range changed {
			c.t.opts = c.opts
		}
		if made != nil {
			delete(b.streams, made.id)
		}
	}
	want := e.systemOptions()
	for _, ti := range sysevents.Types() {
		if t := s.topicNamed(ti.Type.Topic()); t != nil {
			if retention && (t.opts.MessageExpiry != want.MessageExpiry || t.opts.MaxTopicSize != want.MaxTopicSize) {
				changed = append(changed, undoOpts{t, t.opts})
				t.opts.MessageExpiry = want.MessageExpiry
				if want.MaxTopicSize >= t.opts.SegmentSize {
					t.opts.MaxTopicSize = want.MaxTopicSize
				}
			}
			continue
		}
		t := &topic{stream: s, id: lowestFree(s.topics), uid: b.nextUID, name: ti.Type.Topic(),
			createdAt: nowMicros(), opts: want, groups: map[uint32]*group{}}
		t.opts.Explicit = slices.Clone(want.Explicit)
		b.nextUID++
		if err := b.addPartitions(t, 1); err != nil {
			undo()
			return fmt.Errorf("events: create system topic %s/%s: %w", sysevents.Stream, t.name, err)
		}
		s.topics[t.id] = t
		added = append(added, t)
	}
	if made != nil || len(added) > 0 || len(changed) > 0 {
		if err := b.saveMeta(); err != nil {
			undo()
			return fmt.Errorf("events: save the system stream %s: %w", sysevents.Stream, err)
		}
	}
	if made != nil {
		b.log.Info("events: created the system stream", "stream", sysevents.Stream, "id", s.id, "topics", len(added))
	}
	e.sysID.Store(int64(s.id))
	return nil
}

// orZero is a topic option for event data: 0 for unlimited.
func orZero(v uint64) uint64 {
	if v == math.MaxUint64 {
		return 0
	}
	return v
}
