package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/backoff"
	"go.opentelemetry.io/otel/trace"
)

// Delivery in lanes: ordering = "key" and "none" (config.OrderKey,
// config.OrderNone).
//
// One poller reads the stream/topic as the partition path does, decodes
// and transforms each batch, and queues its messages in lanes: one lane
// per partition and message key (the iggy.KeyHeader header; messages
// without one share the lane of the empty key) for "key", or one of
// ordering_concurrency lanes per partition, by offset, for "none".
// Workers (ordering_concurrency of them) take a lane that is ready,
// write up to batch_length of its messages with one Consume, and put the
// lane back. A lane whose write fails waits (retry_backoff doubling to
// max_retry_backoff) while every other lane goes on: a failing key holds
// up only itself. After max_retries the failed messages are
// dead-lettered (on_error = "dead_letter"); with on_error = "stop" the
// lane is held, retried at the longest backoff, and shown in /stats, and
// the connector keeps running. A destination that is down never
// dead-letters anything: its lanes wait for it.
//
// Offsets: a partition's committed offset is the last offset below which
// every message is settled (written, dead-lettered or dropped by a
// transform); a committer stores it as it moves. A crash delivers again
// what was not committed: messages of other lanes already written are
// written twice (at-least-once, as the partition path after a crash).
// At most max_pending messages per stream/topic are read ahead of what is
// settled: past that the poller waits, so a held key keeps memory bounded
// (and, once it fills the window, holds up the rest: the one way a lane
// can hold others, said in /stats).
//
// Transforms that keep keyed state are refused with these orderings:
// their state moves with committed offsets, which lanes do not give.

// laneID names a lane: a partition and a key (or lane number for "none").
type laneID struct {
	partition uint32
	key       string
}

// lane is one FIFO of messages waiting to be written.
type lane struct {
	id        laneID
	queue     []connector.Message
	busy      bool // a worker is writing its front
	queued    bool // in laneSet.ready
	attempts  uint32
	notBefore time.Time
	held      error // the last failure, while the lane waits
	since     time.Time
}

// partLog is a partition's offsets read and not yet committed, in order.
type partLog struct {
	offsets []uint64
	left    []int  // messages of offsets[i] not settled yet
	next    uint64 // offsets below next are registered
	commit  uint64 // the offset to store
	dirty   bool   // commit moved since it was last stored
}

// settle marks n messages of offset as settled and moves commit past
// every leading offset with nothing left.
func (p *partLog) settle(offset uint64, n int) {
	i := sort.Search(len(p.offsets), func(i int) bool { return p.offsets[i] >= offset })
	if i == len(p.offsets) || p.offsets[i] != offset {
		return
	}
	p.left[i] -= n
	p.advance()
}

func (p *partLog) advance() {
	k := 0
	for k < len(p.offsets) && p.left[k] <= 0 {
		k++
	}
	if k == 0 {
		return
	}
	p.commit, p.dirty = p.offsets[k-1], true
	p.offsets, p.left = slices.Delete(p.offsets, 0, k), slices.Delete(p.left, 0, k)
}

// laneSet delivers one stream/topic of a sink in lanes.
type laneSet struct {
	mem    *member
	mode   config.Ordering
	width  int // workers, and lanes per partition for "none"
	window int // max_pending
	batch  int

	mu      sync.Mutex
	cond    *sync.Cond
	parts   map[uint32]*partLog
	lanes   map[laneID]*lane
	ready   []*lane
	pending int
	schema  connector.Schema
	fatal   error
	commits chan struct{} // wakes the committer
	stopped chan struct{} // closed when the workers are done
}

func newLaneSet(mem *member) *laneSet {
	cs := mem.cs
	ls := &laneSet{mem: mem, mode: cs.Ordering, width: cs.Concurrency, window: cs.MaxPending,
		batch: int(cs.BatchLength), parts: map[uint32]*partLog{}, lanes: map[laneID]*lane{},
		commits: make(chan struct{}, 1), stopped: make(chan struct{})}
	if ls.width <= 0 {
		ls.width = config.DefaultConcurrency
	}
	if ls.batch <= 0 {
		ls.batch = 1000
	}
	if ls.window <= 0 {
		ls.window = 10 * ls.batch
	}
	ls.cond = sync.NewCond(&ls.mu)
	return ls
}

// checkLanes refuses what lanes cannot do.
func (r *sinkRun) checkLanes(cs config.ConsumerStream) error {
	if cs.Ordering != config.OrderKey && cs.Ordering != config.OrderNone {
		return nil
	}
	if _, ok := r.sink.(connector.UnorderedSink); !ok {
		return fmt.Errorf("ordering = %q: sink %q writes a partition's messages in offset order and cannot take them out of it; use ordering = \"partition\"",
			cs.Ordering, r.cfg.Path)
	}
	if r.keyed != nil {
		return fmt.Errorf("ordering = %q: the transforms keep keyed state, which moves with a partition's offset order; use ordering = \"partition\"", cs.Ordering)
	}
	return nil
}

// run polls and delivers until ctx ends (nil) or delivery fails for good.
// Writes in flight finish within workCtx.
func (ls *laneSet) run(ctx, workCtx context.Context) error {
	mem := ls.mem
	mem.r.m.addLanes(mem, ls)
	defer mem.r.m.removeLanes(mem)
	stop := context.AfterFunc(ctx, func() {
		ls.mu.Lock()
		ls.cond.Broadcast()
		ls.mu.Unlock()
	})
	defer stop()

	var wg sync.WaitGroup
	for range ls.width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls.work(ctx, workCtx)
		}()
	}
	commitDone := make(chan struct{})
	go func() {
		defer close(commitDone)
		ls.commitLoop(workCtx)
	}()
	err := ls.poll(ctx, workCtx)
	ls.mu.Lock()
	if err != nil && ls.fatal == nil {
		ls.fatal = err
	}
	ls.cond.Broadcast()
	ls.mu.Unlock()
	wg.Wait()
	close(ls.stopped)
	<-commitDone
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ctx.Err() != nil && errors.Is(ls.fatal, context.Canceled) {
		return nil
	}
	return ls.fatal
}

// poll reads batches while fewer than window messages are pending.
func (ls *laneSet) poll(ctx, workCtx context.Context) error {
	mem := ls.mem
	m, cs := mem.r.m, mem.cs
	retry := newRetry()
	for {
		ls.mu.Lock()
		for ls.pending >= ls.window && ls.fatal == nil && ctx.Err() == nil {
			ls.cond.Wait()
		}
		fatal := ls.fatal
		ls.mu.Unlock()
		if fatal != nil {
			return fatal
		}
		if ctx.Err() != nil {
			return nil
		}
		var pollStart time.Time
		if m.tr != nil {
			pollStart = time.Now()
		}
		b, err := mem.gc.Poll(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if !iggy.IsRetriable(err) && !errors.Is(err, iggy.ErrConnection) {
				return fmt.Errorf("poll %s/%s: %w", cs.Stream, mem.topic, m.rt.explainDenied(err, actConsume, cs.Stream, mem.topic))
			}
			m.metrics.errors.Inc()
			if backoff.Sleep(ctx, retry.Next()) != nil {
				return nil
			}
			continue
		}
		retry.Reset()
		m.metrics.consumed.Add(float64(len(b.Messages)))
		addCtx := workCtx
		var root trace.Span
		if m.tr != nil {
			addCtx, root = mem.startBatch(workCtx, b, pollStart, time.Now())
		}
		err = ls.add(addCtx, b)
		endSpan(root, err)
		if err != nil {
			if workCtx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// add prepares a polled batch and queues its messages in their lanes.
// Messages at offsets already registered (read again after a reconnect)
// are in their lanes already and are skipped.
func (ls *laneSet) add(ctx context.Context, b *iggy.Batch) error {
	mem := ls.mem
	ls.mu.Lock()
	p := ls.parts[b.Partition]
	if p == nil {
		p = &partLog{}
		ls.parts[b.Partition] = p
	}
	from := p.next
	ls.mu.Unlock()
	i := slices.IndexFunc(b.Messages, func(m iggy.Message) bool { return m.Offset >= from })
	if i < 0 {
		return nil
	}
	b.Messages = b.Messages[i:]
	tx, batch, failed, err := mem.prepareRetrying(ctx, b)
	if err != nil {
		return err
	}
	tx.Rollback() // no keyed state (checkLanes): nothing to keep
	if len(failed) > 0 {
		if mem.dlq == nil {
			f := failed[0]
			return terminal(fmt.Errorf("%s/%s partition %d offset %d: %v (on_error = \"stop\"; offset not committed)",
				mem.cs.Stream, mem.topic, b.Partition, f.msg.Offset, f.err))
		}
		if err := mem.deadLetter(ctx, failed); err != nil {
			return err
		}
	}
	count := map[uint64]int{}
	for _, msg := range batch.Messages {
		count[msg.Offset]++
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.schema = batch.Schema
	for _, msg := range b.Messages {
		p.offsets = append(p.offsets, msg.Offset)
		p.left = append(p.left, count[msg.Offset])
	}
	p.next = b.LastOffset() + 1
	p.advance()
	for _, msg := range batch.Messages {
		l := ls.laneOf(b.Partition, msg)
		l.queue = append(l.queue, msg)
		ls.pending++
		ls.push(l)
	}
	ls.cond.Broadcast()
	ls.wakeCommitter()
	return nil
}

// laneOf returns msg's lane, made when missing. ls.mu is held.
func (ls *laneSet) laneOf(partition uint32, msg connector.Message) *lane {
	id := laneID{partition: partition}
	if ls.mode == config.OrderKey {
		if v, ok := msg.Header(iggy.KeyHeader); ok {
			id.key = string(v.Data) // a string key or a binary one, as it is
		}
	} else {
		id.key = fmt.Sprint(msg.Offset % uint64(ls.width))
	}
	l := ls.lanes[id]
	if l == nil {
		l = &lane{id: id}
		ls.lanes[id] = l
	}
	return l
}

// push puts l in the ready queue if it can be written now. ls.mu is held.
func (ls *laneSet) push(l *lane) {
	if l.busy || l.queued || len(l.queue) == 0 || time.Now().Before(l.notBefore) {
		return
	}
	l.queued = true
	ls.ready = append(ls.ready, l)
	ls.cond.Signal()
}

// take waits for a ready lane and claims the front of its queue.
func (ls *laneSet) take(ctx context.Context) (*lane, []connector.Message, connector.Schema, bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for len(ls.ready) == 0 {
		if ctx.Err() != nil || ls.fatal != nil {
			return nil, nil, "", false
		}
		ls.cond.Wait()
	}
	l := ls.ready[0]
	ls.ready = slices.Delete(ls.ready, 0, 1)
	l.queued, l.busy = false, true
	n := min(len(l.queue), ls.batch)
	return l, slices.Clone(l.queue[:n]), ls.schema, true
}

// work writes lanes until ctx ends or delivery fails for good.
func (ls *laneSet) work(ctx, workCtx context.Context) {
	for {
		l, msgs, schema, ok := ls.take(ctx)
		if !ok {
			return
		}
		ctx := workCtx
		var root trace.Span
		if ls.mem.r.m.tr != nil {
			ctx, root = ls.mem.startWrite(workCtx, l.id.partition, msgs)
		}
		err := ls.deliver(ctx, l, msgs, schema)
		endSpan(root, err)
		if err != nil {
			ls.mu.Lock()
			if ls.fatal == nil {
				ls.fatal = err
			}
			ls.cond.Broadcast()
			ls.mu.Unlock()
			return
		}
	}
}

// deliver writes msgs, the front of l, once (retries are the lane's, so
// a failing lane does not hold a worker), and settles or re-queues them.
func (ls *laneSet) deliver(ctx context.Context, l *lane, msgs []connector.Message, schema connector.Schema) error {
	mem := ls.mem
	w := *mem // ffi is per write
	w.cs.MaxRetries = 0
	b := &connector.SinkBatch{Stream: mem.cs.Stream, Topic: mem.topic, Partition: l.id.partition, Schema: schema, Messages: msgs}
	unwritten, down := w.write(ctx, b)
	if ctx.Err() != nil {
		ls.requeue(l, 0, nil, nil)
		return ctx.Err()
	}
	var failedMsgs []connector.Message
	var cause error
	switch {
	case down != nil:
		failedMsgs, cause = msgs, down // the destination: never dead-lettered
	case len(unwritten) > 0:
		cause = unwritten[0].err
		exhausted := l.attempts >= mem.cs.MaxRetries || !slices.ContainsFunc(unwritten, func(f failure) bool { return !f.permanent() })
		if exhausted && mem.dlq != nil {
			if err := mem.deadLetter(ctx, unwritten); err != nil {
				ls.requeue(l, 0, nil, nil)
				return err
			}
			break
		}
		for _, f := range unwritten {
			failedMsgs = append(failedMsgs, f.msg)
		}
	}
	if failedMsgs != nil {
		err := fmt.Errorf("%s/%s partition %d key %q from offset %d: %w (this key waits and is tried again; other keys go on)",
			mem.cs.Stream, mem.topic, l.id.partition, l.id.key, failedMsgs[0].Offset, cause)
		if ls.mode == config.OrderNone {
			err = fmt.Errorf("%s/%s partition %d offset %d: %w (this lane waits and is tried again; other lanes go on)",
				mem.cs.Stream, mem.topic, l.id.partition, failedMsgs[0].Offset, cause)
		}
		mem.r.m.note(err)
		mem.r.m.metrics.errors.Inc()
		cause = err
	}
	ls.requeue(l, len(msgs), failedMsgs, cause)
	return nil
}

// requeue gives l back after a write of its first n messages: failed (a
// subsequence of them, in order) go back to its front and l waits.
func (ls *laneSet) requeue(l *lane, n int, failed []connector.Message, cause error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l.busy = false
	if n == 0 {
		ls.push(l)
		return
	}
	done := l.queue[:n]
	rest := l.queue[n:]
	p := ls.parts[l.id.partition]
	fi := 0
	for _, msg := range done {
		if fi < len(failed) && sameMessage(&failed[fi], &msg) {
			fi++
			continue
		}
		ls.pending--
		if p != nil {
			p.settle(msg.Offset, 1)
		}
	}
	l.queue = append(slices.Clone(failed), rest...)
	if len(failed) > 0 {
		retry := backoff.Backoff{Min: ls.mem.cs.RetryBackoff, Max: ls.mem.cs.MaxRetryBackoff}
		if retry.Min <= 0 {
			retry.Min = retryMin
		}
		d := retry.Min
		for i := uint32(0); i < l.attempts && d < retry.Max; i++ {
			d *= 2
		}
		d = min(d, max(retry.Max, retry.Min))
		l.attempts++
		if l.held == nil {
			l.since = time.Now()
		}
		l.held, l.notBefore = cause, time.Now().Add(d)
		time.AfterFunc(d, func() {
			ls.mu.Lock()
			defer ls.mu.Unlock()
			ls.push(l)
		})
	} else {
		l.attempts, l.held, l.notBefore = 0, nil, time.Time{}
	}
	if len(l.queue) == 0 {
		delete(ls.lanes, l.id)
	} else {
		ls.push(l)
	}
	ls.cond.Broadcast()
	ls.wakeCommitter()
}

// sameMessage tells whether a failure's copy is msg: a transform may make
// several messages of one offset, so the offset alone does not say.
func sameMessage(a, b *connector.Message) bool {
	return a.Offset == b.Offset && a.ID == b.ID && bytes.Equal(a.Payload, b.Payload)
}

func (ls *laneSet) wakeCommitter() {
	select {
	case ls.commits <- struct{}{}:
	default:
	}
}

// commitLoop stores each partition's commit offset as it moves, and once
// more when delivery stops.
func (ls *laneSet) commitLoop(workCtx context.Context) {
	for {
		select {
		case <-ls.commits:
			ls.commitAll(workCtx)
		case <-ls.stopped:
			ls.commitAll(workCtx)
			return
		}
	}
}

func (ls *laneSet) commitAll(ctx context.Context) {
	ls.mu.Lock()
	type due struct {
		partition uint32
		offset    uint64
	}
	var todo []due
	for part, p := range ls.parts {
		if p.dirty {
			todo = append(todo, due{part, p.commit})
			p.dirty = false
		}
	}
	ls.mu.Unlock()
	for _, d := range todo {
		err := ls.mem.gc.Commit(ctx, d.partition, d.offset)
		if err == nil || ctx.Err() != nil {
			continue
		}
		if errors.Is(err, iggy.ErrConsumerGroupPartitionNotOwned) {
			// Another member reads it now; what is queued here is written
			// anyway (a duplicate at worst) and its offsets are forgotten.
			ls.mu.Lock()
			delete(ls.parts, d.partition)
			ls.mu.Unlock()
			continue
		}
		ls.mem.r.m.metrics.errors.Inc()
		ls.mem.r.m.log.Warn("offset commit failed; retrying", "partition", d.partition, "offset", d.offset, "error", err)
		ls.mu.Lock()
		if p := ls.parts[d.partition]; p != nil && !p.dirty {
			p.dirty = true
		}
		ls.mu.Unlock()
		time.AfterFunc(retryMin, ls.wakeCommitter)
	}
}

// LaneStats is what /stats shows of a sink stream/topic delivered in
// lanes (ordering "key" or "none").
type LaneStats struct {
	Stream   string `json:"stream"`
	Topic    string `json:"topic"`
	Ordering string `json:"ordering"`
	// Pending is how many messages are read and not yet settled (at most
	// MaxPending: past that the sink reads no more).
	Pending    int `json:"pending"`
	MaxPending int `json:"max_pending"`
	Lanes      int `json:"lanes"`
	// Held are the lanes waiting after a failed write, oldest first (at
	// most 20).
	Held []HeldLane `json:"held,omitempty"`
}

// HeldLane is a lane waiting after a failed write.
type HeldLane struct {
	Partition uint32    `json:"partition"`
	Key       string    `json:"key"`
	Messages  int       `json:"messages"`
	Attempts  uint32    `json:"attempts"`
	Since     time.Time `json:"since"`
	Error     string    `json:"error"`
}

func (ls *laneSet) stats() LaneStats {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	st := LaneStats{Stream: ls.mem.cs.Stream, Topic: ls.mem.topic, Ordering: string(ls.mode),
		Pending: ls.pending, MaxPending: ls.window, Lanes: len(ls.lanes)}
	for _, l := range ls.lanes {
		if l.held != nil {
			st.Held = append(st.Held, HeldLane{Partition: l.id.partition, Key: l.id.key, Messages: len(l.queue),
				Attempts: l.attempts, Since: l.since, Error: l.held.Error()})
		}
	}
	sort.Slice(st.Held, func(i, j int) bool { return st.Held[i].Since.Before(st.Held[j].Since) })
	if len(st.Held) > 20 {
		st.Held = st.Held[:20]
	}
	return st
}

// addLanes and removeLanes keep the connector's lane sets for Info.
func (m *managed) addLanes(mem *member, ls *laneSet) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lanes == nil {
		m.lanes = map[*member]*laneSet{}
	}
	m.lanes[mem] = ls
}

func (m *managed) removeLanes(mem *member) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.lanes, mem)
}
