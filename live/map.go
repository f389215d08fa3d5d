package live

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"

	"github.com/ferryhq/ferry/iggy"
)

// KeyFunc returns the key of a message for a Map; ok false skips the
// message. StringKey and BytesKey read the key a Target sends.
type KeyFunc func(m Message) (key string, ok bool)

// EventKind says what an Event did to its key.
type EventKind uint8

// Event kinds.
const (
	// Upsert: the key now has Message as its value (new or changed).
	Upsert EventKind = iota + 1
	// Delete: the key is gone; Message is the deletion.
	Delete
)

func (k EventKind) String() string {
	switch k {
	case Upsert:
		return "upsert"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one change of a Map.
type Event struct {
	Kind    EventKind
	Key     string
	Message Message
	// CatchUp is true for the events that present the partition as it
	// was when the Map started; false for the live changes after them.
	CatchUp bool
}

// Map reads one partition of a topic as a live keyed map: the value of a
// key is the latest message with that key, and a deletion (WithDeletion)
// removes the key. It reads with a standalone consumer from the
// partition's first message and stores no offsets: every Map starts from
// the beginning and rebuilds the whole map.
//
// Next first reads the partition up to the end it had when the Map
// started and presents it compacted, one Upsert event per live key
// (latest per key, deleted keys gone) in the order of those messages'
// offsets, with CatchUp set; then each change after that as an Upsert or
// Delete event. A deletion of a key the map does not hold is no change
// and makes no event.
//
// The map advances as Next runs: Get, Len and All answer from the state
// after the last event Next returned (during the catch-up events, from
// the whole caught-up state). To keep a map current in the background,
// range over Events in a goroutine.
//
// Next and Events are for one goroutine at a time; Get, Len, All, Ready
// and Close may be called from any goroutine.
type Map struct {
	h             *Handle
	stream, topic iggy.Identifier
	partition     uint32
	key           KeyFunc
	cfg           mapConfig
	consumer      iggy.Consumer

	nextMu   sync.Mutex
	next     uint64 // the next offset to read
	started  bool   // a message has been read: poll from next, not First
	end      uint64 // the catch-up end
	caughtUp bool
	catchUp  []Event        // catch-up events not handed out yet
	raw      []iggy.Message // live messages not applied yet
	bg       sync.WaitGroup // polls the caller's ctx gave up on

	mu      sync.RWMutex
	entries map[string]Message

	ready   chan struct{}
	isReady bool
	closing chan struct{}
	closeMu sync.Mutex
	closed  bool
}

// mapConsumer is the standalone consumer a Map polls as; it stores no
// offsets, so its name does not matter.
var mapConsumer = iggy.SingleConsumer(iggy.NamedID("ferry-live-map"))

// Map starts reading partition 0 (WithPartition) of stream/topic as a
// keyed map, with key as its key function (required). It reads the
// partition's current end before returning; the first poll happens in
// the first Next.
func (h *Handle) Map(ctx context.Context, stream, topic iggy.Identifier, key KeyFunc, opts ...MapOption) (*Map, error) {
	cfg := mapConfig{pollConfig: defaultPollConfig()}
	for _, o := range opts {
		if o != nil {
			o.applyMap(&cfg)
		}
	}
	errs := cfg.validate()
	if key == nil {
		errs = append(errs, fmt.Errorf("%w: a Map needs a key function (StringKey reads what a Target sends)", ErrInvalidOption))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	td, err := findTopic(ctx, h.consumer, stream, topic, &cfg.pollConfig)
	if err != nil {
		return nil, err
	}
	p, err := findPartition(td, cfg.partition)
	if err != nil {
		return nil, err
	}
	m := &Map{h: h, stream: stream, topic: topic, partition: cfg.partition, key: key, cfg: cfg,
		consumer: mapConsumer, end: partitionEnd(p), entries: map[string]Message{},
		ready: make(chan struct{}), closing: make(chan struct{})}
	if m.end == 0 {
		m.caughtUp = true
		m.setReady()
	}
	return m, nil
}

// Ready is closed when the caught-up map has been handed out: as the last
// catch-up event is returned by Next, or at once when the partition was
// empty at the start.
func (m *Map) Ready() <-chan struct{} { return m.ready }

func (m *Map) setReady() {
	if !m.isReady {
		m.isReady = true
		close(m.ready)
	}
}

// Next returns the next event: the catch-up events first, then the live
// changes, polling (and waiting WithPollInterval after an empty poll)
// until there is one or ctx ends. A failed poll is returned, unless
// WithRetryInterval says to retry.
func (m *Map) Next(ctx context.Context) (Event, error) {
	m.nextMu.Lock()
	defer m.nextMu.Unlock()
	for {
		if m.isClosed() {
			return Event{}, fmt.Errorf("live: map %s/%s: %w", m.stream, m.topic, iggy.ErrClosed)
		}
		if len(m.catchUp) > 0 {
			ev := m.catchUp[0]
			m.catchUp = m.catchUp[1:]
			if len(m.catchUp) == 0 {
				m.catchUp = nil
				m.setReady()
			}
			return ev, nil
		}
		if len(m.raw) > 0 {
			w := m.raw[0]
			m.raw = m.raw[1:]
			if ev, ok := m.apply(fromPoll(m.partition, &w, true)); ok {
				return ev, nil
			}
			continue
		}
		msgs, err := m.poll(ctx)
		if err != nil {
			return Event{}, err
		}
		if m.caughtUp {
			m.raw = msgs
			continue
		}
		i := 0
		for ; i < len(msgs) && msgs[i].Offset < m.end; i++ {
			m.apply(fromPoll(m.partition, &msgs[i], true))
		}
		m.raw = msgs[i:]
		if m.next >= m.end {
			m.finishCatchUp()
		}
	}
}

// finishCatchUp queues one Upsert per key, in the order of their offsets.
func (m *Map) finishCatchUp() {
	m.caughtUp = true
	m.mu.RLock()
	evs := make([]Event, 0, len(m.entries))
	for k, msg := range m.entries {
		evs = append(evs, Event{Kind: Upsert, Key: k, Message: msg, CatchUp: true})
	}
	m.mu.RUnlock()
	slices.SortFunc(evs, func(a, b Event) int { return cmp.Compare(a.Message.Offset, b.Message.Offset) })
	m.catchUp = evs
	if len(evs) == 0 {
		m.setReady()
	}
}

// apply applies one message to the map and returns the change, if any.
func (m *Map) apply(msg Message) (Event, bool) {
	k, ok := m.key(msg)
	if !ok {
		return Event{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg.deleted != nil && m.cfg.deleted(msg) {
		if _, had := m.entries[k]; !had {
			return Event{}, false
		}
		delete(m.entries, k)
		return Event{Kind: Delete, Key: k, Message: msg}, true
	}
	m.entries[k] = msg
	return Event{Kind: Upsert, Key: k, Message: msg}, true
}

// poll returns the next non-empty batch of messages.
func (m *Map) poll(ctx context.Context) ([]iggy.Message, error) {
	for {
		if m.isClosed() {
			return nil, fmt.Errorf("live: map %s/%s: %w", m.stream, m.topic, iggy.ErrClosed)
		}
		strategy := iggy.First()
		if m.started {
			strategy = iggy.AtOffset(m.next)
		}
		reply, err := m.pollOnce(ctx, strategy)
		if err != nil {
			if errors.Is(err, iggy.ErrClosed) {
				return nil, fmt.Errorf("live: map %s/%s: %w", m.stream, m.topic, err)
			}
			if err := retryOrFail(ctx, m.closing, &m.cfg.pollConfig, "poll", err,
				"stream", m.stream.String(), "topic", m.topic.String(), "partition", m.partition); err != nil {
				return nil, fmt.Errorf("live: map %s/%s: poll of partition %d: %w", m.stream, m.topic, m.partition, err)
			}
			continue
		}
		msgs := reply.Messages
		for len(msgs) > 0 && m.started && msgs[0].Offset < m.next {
			msgs = msgs[1:]
		}
		if len(msgs) > 0 {
			m.next, m.started = msgs[len(msgs)-1].Offset+1, true
			return msgs, nil
		}
		if err := sleep(ctx, m.closing, m.cfg.pollInterval); err != nil {
			return nil, fmt.Errorf("live: map %s/%s: %w", m.stream, m.topic, err)
		}
	}
}

// pollOnce polls in the background, so that ctx ending does not cut the
// request short (which would drop the connection the handle's other
// readers share); a poll given up on is dropped and read again.
func (m *Map) pollOnce(ctx context.Context, strategy iggy.PollingStrategy) (*iggy.PollReply, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		r   *iggy.PollReply
		err error
	}
	done := make(chan result, 1)
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		r, err := m.h.consumer.PollMessages(context.WithoutCancel(ctx), iggy.PollRequest{
			Consumer: m.consumer, Stream: m.stream, Topic: m.topic,
			Partition: iggy.Partition(m.partition), Strategy: strategy, Count: uint32(m.cfg.batchLength),
		})
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		return res.r, res.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Events iterates over the events as Next returns them. It ends after
// yielding the first error (ctx's included).
func (m *Map) Events(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			ev, err := m.Next(ctx)
			if err != nil {
				yield(Event{}, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// Get returns the value (the latest message) of key.
func (m *Map) Get(key string) (Message, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	msg, ok := m.entries[key]
	return msg, ok
}

// Len returns the number of keys.
func (m *Map) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.entries)
}

// All iterates over a snapshot of the map, in key order.
func (m *Map) All() iter.Seq2[string, Message] {
	m.mu.RLock()
	snap := maps.Clone(m.entries)
	m.mu.RUnlock()
	keys := slices.Sorted(maps.Keys(snap))
	return func(yield func(string, Message) bool) {
		for _, k := range keys {
			if !yield(k, snap[k]) {
				return
			}
		}
	}
}

func (m *Map) isClosed() bool {
	m.closeMu.Lock()
	defer m.closeMu.Unlock()
	return m.closed
}

// Close ends Next and waits (until ctx ends) for a poll it left running.
// The map's contents stay readable. Close is idempotent; the Handle stays
// open.
func (m *Map) Close(ctx context.Context) error {
	m.closeMu.Lock()
	if !m.closed {
		m.closed = true
		close(m.closing)
	}
	m.closeMu.Unlock()
	done := make(chan struct{})
	go func() { m.bg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("live: map %s/%s: close: %w", m.stream, m.topic, ctx.Err())
	}
}
