package live

import (
	"cmp"
	"slices"
	"sync"
)

// tracker keeps, per partition of a Stream, the messages delivered and
// not yet processed, in delivery order, and decides which offset to store:
// the offset of the last message of the processed prefix, so a restart
// resumes after the last processed message and never past an unprocessed
// one. It also decides which polled messages to deliver (replay
// protection) and when the stream is ready.
type tracker struct {
	allowReplay bool

	mu       sync.Mutex
	parts    map[uint32]*partTrack
	assigned []uint32
	started  bool
	isReady  bool
	ready    chan struct{}
	wake     chan struct{} // has a value when some partition has an offset to store
}

// partTrack is one partition's state; guarded by tracker.mu.
type partTrack struct {
	t  *tracker
	id uint32
	// target is the partition's next offset when the watch started: it is
	// caught up once processed reaches it.
	target uint64
	// processed is the offset after the processed prefix.
	processed uint64
	// delivered is the offset after the highest delivered one (when seen).
	delivered uint64
	seen      bool
	// stored is the highest offset known to be stored for the group
	// (when hasStored): the floor below which, without replay, nothing is
	// stored or delivered.
	stored    uint64
	hasStored bool
	// pending is the offset waiting to be stored (when hasPending).
	pending    uint64
	hasPending bool
	queue      []*mark
}

// mark is one delivered message's place in its partition's queue.
type mark struct {
	p      *partTrack
	offset uint64
	isDone bool
}

func newTracker(allowReplay bool) *tracker {
	return &tracker{
		allowReplay: allowReplay,
		parts:       map[uint32]*partTrack{},
		ready:       make(chan struct{}),
		wake:        make(chan struct{}, 1),
	}
}

// part returns partition id's state, creating it (nothing to catch up
// on) for a partition the watch did not see at start.
func (t *tracker) part(id uint32) *partTrack {
	p := t.parts[id]
	if p == nil {
		p = &partTrack{t: t, id: id}
		t.parts[id] = p
	}
	return p
}

// begin records a partition's state at the start of the watch: its next
// offset then, and the group's stored offset, if any.
func (t *tracker) begin(id uint32, target uint64, stored uint64, hasStored bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.part(id)
	p.target = target
	if hasStored {
		p.stored, p.hasStored = stored, true
		p.processed = stored + 1
	}
}

// start makes readiness count from now on: the partitions in assigned
// are the ones this member reads.
func (t *tracker) start(assigned []uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.started = true
	t.assigned = slices.Clone(assigned)
	t.checkReady()
}

// setAssigned records the partitions this member reads now.
func (t *tracker) setAssigned(assigned []uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !slices.Equal(t.assigned, assigned) {
		t.assigned = slices.Clone(assigned)
		t.checkReady()
	}
}

// gap reports whether a batch starting at offset skips forward past what
// the partition delivered so far (someone else may have read and stored
// the messages in between).
func (t *tracker) gap(id uint32, offset uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.part(id)
	return p.seen && offset > p.delivered
}

// raiseFloor records that the group's stored offset is at least stored.
func (t *tracker) raiseFloor(id uint32, stored uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.part(id)
	if !p.hasStored || stored > p.stored {
		p.stored, p.hasStored = stored, true
	}
	p.processed = max(p.processed, stored+1)
	if p.hasPending && !t.allowReplay && p.pending <= p.stored {
		p.hasPending = false
	}
	t.checkReady()
}

// admit decides whether to deliver the message at offset of partition id
// and, if so, returns its mark. Without replay, an offset at or below one
// already delivered, or at or below the stored offset, is not delivered
// again.
func (t *tracker) admit(id uint32, offset uint64) (*mark, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.part(id)
	if !t.allowReplay && ((p.seen && offset < p.delivered) || (p.hasStored && offset <= p.stored)) {
		return nil, false
	}
	if !p.seen || offset+1 > p.delivered {
		p.delivered = offset + 1
	}
	p.seen = true
	m := &mark{p: p, offset: offset}
	p.queue = append(p.queue, m)
	return m, true
}

func (m *mark) done() { m.p.t.done(m) }

// done marks m processed and moves the partition's processed prefix on.
func (t *tracker) done(m *mark) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.isDone {
		return
	}
	m.isDone = true
	p := m.p
	n := 0
	for n < len(p.queue) && p.queue[n].isDone {
		n++
	}
	if n == 0 {
		return
	}
	last := p.queue[n-1].offset
	clear(p.queue[:n])
	p.queue = p.queue[n:]
	if len(p.queue) == 0 {
		p.queue = nil
	}
	p.processed = max(p.processed, last+1)
	if t.allowReplay || !p.hasStored || last > p.stored {
		p.pending, p.hasPending = last, true
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	t.checkReady()
}

// offsetToStore is one store the tracker asks for.
type offsetToStore struct {
	partition uint32
	offset    uint64
}

// toStore returns the offsets waiting to be stored, by partition.
func (t *tracker) toStore() []offsetToStore {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []offsetToStore
	for _, p := range t.parts {
		if p.hasPending {
			out = append(out, offsetToStore{p.id, p.pending})
		}
	}
	slices.SortFunc(out, func(a, b offsetToStore) int { return cmp.Compare(a.partition, b.partition) })
	return out
}

// stored records that offset is now the group's stored offset of
// partition id.
func (t *tracker) stored(id uint32, offset uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.part(id)
	if t.allowReplay || !p.hasStored || offset > p.stored {
		p.stored = offset
	}
	p.hasStored = true
	if p.hasPending && (p.pending == offset || (!t.allowReplay && p.pending <= p.stored)) {
		p.hasPending = false
	}
}

// drop forgets a pending store that cannot be made (the partition went to
// another member, which reads on from the group's stored offset).
func (t *tracker) drop(id uint32, offset uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.parts[id]; p != nil && p.hasPending && p.pending == offset {
		p.hasPending = false
	}
}

// checkReady closes ready once every assigned partition is processed up
// to its target. t.mu is held.
func (t *tracker) checkReady() {
	if t.isReady || !t.started {
		return
	}
	for _, id := range t.assigned {
		if p := t.parts[id]; p != nil && p.processed < p.target {
			return
		}
	}
	t.isReady = true
	close(t.ready)
}
