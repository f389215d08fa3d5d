package iggy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/internal/backoff"
)

// GroupConsumer reads a topic as one member of a consumer group. The
// server assigns the group's partitions among its members; the consumer
// learns its share with SyncConsumerGroup (at start, every resync
// interval, when a poll answers with the resync sentinel, and on
// ErrConsumerGroupMemberNotFound or ErrConsumerGroupPartitionNotOwned) and
// polls its partitions round robin, each with an explicit partition id.
//
// Offsets are committed only when the caller says so (Commit, or
// Batch.Commit), never past what the caller committed: the consumer reads
// ahead from its own position, and a partition it gains (or regains after
// a reconnect) resumes after the group's committed offset, so anything not
// committed is delivered again (at-least-once). WithAutoCommit switches to
// the server storing the offset of every poll instead.
//
// Poll is for one goroutine at a time; Commit and Close may be called
// from any goroutine. WithPrefetch reads the next batch while the caller
// handles the one Poll returned.
type GroupConsumer struct {
	c                    *Client
	stream, topic, group Identifier
	cfg                  consumerConfig
	closing              chan struct{}

	pollMu     sync.Mutex     // serialises Poll
	idleRounds int            // empty rounds in a row (under pollMu): the idle back-off
	bg         sync.WaitGroup // requests left running by shielded

	mu         sync.Mutex
	joined     bool
	joinTried  bool // a join was sent, maybe abandoned by shielded
	epoch      uint64
	generation uint64
	partitions []uint32
	next       int
	positions  map[uint32]uint64 // next offset to read, per partition read so far
	started    map[uint32]bool   // partitions whose start (WithStartAt...) is settled
	lastSync   time.Time
	needSync   bool
	closed     bool
	left       bool // Close finished: left the group, or never joined

	ahead aheadState // WithPrefetch: the batch being read ahead

	closeMu sync.Mutex // serialises Close
	// bgIdle is closed once bg is at zero: made by a Close that waits for
	// the requests left running and kept, under closeMu, for the next
	// Close when ctx ended first. One waiter at a time: a WaitGroup must
	// not be added to while another goroutine may still be in its Wait.
	bgIdle chan struct{}
}

// ConsumerOption configures a GroupConsumer.
type ConsumerOption interface{ applyConsumer(*consumerConfig) }

type consumerOption func(*consumerConfig)

func (f consumerOption) applyConsumer(c *consumerConfig) { f(c) }

type consumerConfig struct {
	create         bool
	autoCommit     bool
	count          uint32
	pollInterval   time.Duration
	resyncInterval time.Duration
	start          *startPoint // nil: the first message
	wake           func() <-chan struct{}
	prefetch       bool
}

// startPoint is where a group starts on a partition it has stored no
// offset for: the end of the partition (end), or offset.
type startPoint struct {
	end    bool
	offset uint64
}

// WithCreateGroup creates the group when it does not exist; the group must
// then be given by name. Default off: a missing group is an error.
func WithCreateGroup() ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.create = true })
}

// WithAutoCommit has the server store the offset of the last message of
// every poll, before the caller has handled it (at-most-once for what the
// caller had not finished). Default off: offsets are stored only by Commit.
func WithAutoCommit() ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.autoCommit = true })
}

// WithPollCount sets the most messages one poll returns. Default 1000.
func WithPollCount(n uint32) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.count = n })
}

// WithPollInterval sets how long Poll waits after a round in which every
// partition was empty (or none was assigned), doubling while they stay
// empty up to IdleBackoffMax. Default 100ms.
func WithPollInterval(d time.Duration) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.pollInterval = d })
}

// WithResyncInterval sets how often the consumer re-reads its assignment.
// Default 5s, as the Go SDK.
func WithResyncInterval(d time.Duration) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.resyncInterval = d })
}

// WithStartAtEnd starts the group, on each partition it has stored no
// offset for, after the last message the partition holds when this
// consumer first polls it: only messages sent from then on are
// delivered. The start is stored as the group's offset at once, so a
// restart does not move it; but an empty partition has no offset to
// store (Iggy cannot store "before 0"), so until something is committed
// there a new consumer starts at its end again. Default: the first
// message.
func WithStartAtEnd() ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.start = &startPoint{end: true} })
}

// WithStartAt starts the group at offset on each partition it has stored
// no offset for (stored as offset-1 at once; 0 is the first message).
// An offset past the end of a partition starts at its end.
func WithStartAt(offset uint64) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.start = &startPoint{offset: offset} })
}

// WithWake gives the consumer a way to learn that the topic has new
// messages: wake returns a channel that is closed at the topic's next
// append (an embedded broker's AppendSignal; nil when it cannot tell).
// A Poll that found every partition empty then returns as soon as the
// channel closes, instead of after the poll interval; it still polls
// again after the longer of the poll interval and WakeFallback, so a
// missed signal only costs time.
func WithWake(wake func() <-chan struct{}) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.wake = wake })
}

// WakeFallback is the longest a consumer WithWake sleeps on an empty
// round without a signal.
const WakeFallback = 250 * time.Millisecond

// IdleBackoffMax is the longest a consumer without WithWake waits between
// empty rounds: the wait starts at the poll interval and doubles while
// every partition stays empty, and a batch resets it, so an idle consumer
// costs little and a busy one polls at once (a poll interval longer than
// this is kept as it is).
const IdleBackoffMax = 250 * time.Millisecond

// NewGroupConsumer prepares a member of group on stream/topic. It joins
// the group (creating it with WithCreateGroup) on Join or the first Poll.
func NewGroupConsumer(c *Client, stream, topic, group Identifier, opts ...ConsumerOption) (*GroupConsumer, error) {
	cfg := consumerConfig{count: 1000, pollInterval: 100 * time.Millisecond, resyncInterval: 5 * time.Second}
	for _, o := range opts {
		if o != nil {
			o.applyConsumer(&cfg)
		}
	}
	var errs []error
	if err := checkIDs(wire.CmdJoinConsumerGroup, stream, topic, group); err != nil {
		errs = append(errs, err)
	}
	if _, numeric := group.Numeric(); cfg.create && numeric {
		errs = append(errs, fmt.Errorf("%w: WithCreateGroup needs the group by name, got id %s", errConfig, group))
	}
	if cfg.prefetch && cfg.autoCommit {
		errs = append(errs, fmt.Errorf("%w: WithPrefetch and WithAutoCommit together would commit a batch before Poll returns it", errConfig))
	}
	if cfg.count == 0 || cfg.pollInterval <= 0 || cfg.resyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w: poll count %d, poll interval %s and resync interval %s must be positive",
			errConfig, cfg.count, cfg.pollInterval, cfg.resyncInterval))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &GroupConsumer{c: c, stream: stream, topic: topic, group: group, cfg: cfg,
		closing: make(chan struct{}), positions: map[uint32]uint64{}, started: map[uint32]bool{}}, nil
}

// Batch is what one Poll returns: messages of one partition, in offset
// order.
type Batch struct {
	Partition uint32
	Messages  []Message
	// CurrentOffset is the partition's highest offset when it was polled.
	CurrentOffset uint64
	g             *GroupConsumer
}

// LastOffset returns the offset of the batch's last message.
func (b *Batch) LastOffset() uint64 { return b.Messages[len(b.Messages)-1].Offset }

// Commit stores the batch's last offset as the group's committed offset
// of its partition.
func (b *Batch) Commit(ctx context.Context) error {
	return b.g.Commit(ctx, b.Partition, b.LastOffset())
}

// Join joins the group (creating it with WithCreateGroup) and reads this
// member's assignment now rather than at the first Poll (and settles the
// start of WithStartAtEnd and WithStartAt on its partitions).
func (g *GroupConsumer) Join(ctx context.Context) error {
	g.pollMu.Lock()
	defer g.pollMu.Unlock()
	if g.isClosed() {
		return ErrClosed
	}
	parts, err := g.ensure(ctx)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if err := g.settleStart(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// Poll returns the next non-empty batch from the partitions assigned to
// this member, waiting (WithPollInterval between empty rounds) until there
// is one or ctx ends. Connection failures are returned (the client
// reconnects; call Poll again); membership changes are handled inside.
func (g *GroupConsumer) Poll(ctx context.Context) (*Batch, error) {
	if g.cfg.prefetch {
		return g.pollAhead(ctx)
	}
	g.pollMu.Lock()
	defer g.pollMu.Unlock()
	return g.poll(ctx)
}

// poll is Poll under pollMu.
func (g *GroupConsumer) poll(ctx context.Context) (*Batch, error) {
	empty := 0
	var woken <-chan struct{} // taken before a round, so an append during it is seen
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if g.isClosed() {
			return nil, ErrClosed
		}
		parts, err := g.ensure(ctx)
		if err != nil {
			return nil, err
		}
		if empty == 0 && g.cfg.wake != nil {
			woken = g.cfg.wake()
		}
		if len(parts) == 0 || empty >= len(parts) {
			empty = 0
			if err := g.idle(ctx, woken); err != nil {
				return nil, err
			}
			if len(parts) == 0 {
				g.markResync()
			}
			continue
		}
		p, strategy := g.pick(parts)
		if err := g.settleStart(ctx, p); err != nil {
			return nil, err
		}
		var reply *PollReply
		err = g.shielded(ctx, func(ctx context.Context) (err error) {
			reply, err = g.c.PollMessages(ctx, PollRequest{
				Consumer: ConsumerGroup(g.group), Stream: g.stream, Topic: g.topic,
				Partition: Partition(p), Strategy: strategy, Count: g.cfg.count, AutoCommit: g.cfg.autoCommit,
			})
			return err
		})
		switch {
		case errors.Is(err, ErrConsumerGroupMemberNotFound):
			g.mu.Lock()
			g.joined = false
			g.mu.Unlock()
			continue
		case errors.Is(err, ErrConsumerGroupPartitionNotOwned):
			g.markResync()
			continue
		case errors.Is(err, ErrConnection):
			// The session is gone with the connection: join again and read
			// from the committed offsets, not from this member's position,
			// even if the client has not reconnected yet.
			g.mu.Lock()
			g.joined = false
			g.epoch = 0
			g.mu.Unlock()
			return nil, err
		case err != nil:
			return nil, err
		case reply.PartitionID == wire.PollResync:
			g.markResync()
			continue
		case len(reply.Messages) == 0:
			empty++
			continue
		}
		last := reply.Messages[len(reply.Messages)-1].Offset
		g.mu.Lock()
		if slices.Contains(g.partitions, p) {
			g.positions[p] = last + 1
		}
		g.mu.Unlock()
		g.idleRounds = 0
		return &Batch{Partition: p, Messages: reply.Messages, CurrentOffset: reply.CurrentOffset, g: g}, nil
	}
}

// pick returns the next partition round robin and where to read it from.
func (g *GroupConsumer) pick(parts []uint32) (uint32, PollingStrategy) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := parts[g.next%len(parts)]
	g.next++
	if pos, ok := g.positions[p]; ok {
		return p, AtOffset(pos)
	}
	return p, Next()
}

// settleStart stores the group's start on partition p (WithStartAtEnd,
// WithStartAt) the first time this consumer polls p, when the group has
// stored no offset for it; a partition that has one, or no start option,
// is read from the group's offset as always.
func (g *GroupConsumer) settleStart(ctx context.Context, p uint32) error {
	g.mu.Lock()
	done := g.cfg.start == nil || g.started[p]
	g.mu.Unlock()
	if done {
		return nil
	}
	var stored bool
	err := g.shielded(ctx, func(ctx context.Context) error {
		_, err := g.c.GetConsumerOffset(ctx, ConsumerGroup(g.group), g.stream, g.topic, Partition(p))
		stored = err == nil
		if errors.Is(err, ErrConsumerOffsetNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("iggy: group consumer: read the group's offset on partition %d: %w", p, err)
	}
	if !stored {
		if err := g.storeStart(ctx, p); err != nil {
			return err
		}
	}
	g.mu.Lock()
	g.started[p] = true
	g.mu.Unlock()
	return nil
}

// storeStart stores the start offset on p: the partition's last offset
// for the end, offset-1 for an offset (capped at the last offset).
// Nothing is stored on an empty partition, or for offset 0: reading from
// the first message is where a group without an offset begins anyway.
func (g *GroupConsumer) storeStart(ctx context.Context, p uint32) error {
	var details *TopicDetails
	err := g.shielded(ctx, func(ctx context.Context) (err error) {
		details, err = g.c.GetTopic(ctx, g.stream, g.topic)
		return err
	})
	if err != nil {
		return fmt.Errorf("iggy: group consumer: read partition %d's end: %w", p, err)
	}
	i := slices.IndexFunc(details.Partitions, func(pi PartitionInfo) bool { return pi.ID == p })
	if i < 0 {
		return fmt.Errorf("iggy: group consumer: topic %s has no partition %d", g.topic, p)
	}
	part := details.Partitions[i]
	if part.MessagesCount == 0 && part.CurrentOffset == 0 {
		return nil // empty: nothing to skip
	}
	offset := part.CurrentOffset
	if !g.cfg.start.end {
		if g.cfg.start.offset == 0 {
			return nil
		}
		offset = min(offset, g.cfg.start.offset-1)
	}
	err = g.shielded(ctx, func(ctx context.Context) error {
		return g.c.StoreConsumerOffset(ctx, ConsumerGroup(g.group), g.stream, g.topic, Partition(p), offset)
	})
	if err != nil {
		return fmt.Errorf("iggy: group consumer: store the start offset %d on partition %d: %w", offset, p, err)
	}
	return nil
}

func (g *GroupConsumer) markResync() {
	g.mu.Lock()
	g.needSync = true
	g.mu.Unlock()
}

func (g *GroupConsumer) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// idle waits after an empty round: the poll interval, or with WithWake
// until the topic's next append (woken) or WakeFallback.
func (g *GroupConsumer) idle(ctx context.Context, woken <-chan struct{}) error {
	if woken == nil {
		// Back off while the partitions stay empty: the poll interval,
		// doubling to IdleBackoffMax; data resets it (Poll).
		d := g.cfg.pollInterval
		for i := 0; i < g.idleRounds && d < IdleBackoffMax; i++ {
			d *= 2
		}
		g.idleRounds++
		return g.sleep(ctx, max(g.cfg.pollInterval, min(d, IdleBackoffMax)))
	}
	t := time.NewTimer(max(g.cfg.pollInterval, WakeFallback))
	defer t.Stop()
	select {
	case <-woken:
		return nil
	case <-t.C:
		return nil
	case <-g.closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *GroupConsumer) sleep(ctx context.Context, d time.Duration) error {
	return backoff.SleepOr(ctx, d, g.closing, ErrClosed)
}

// ensure joins (after a reconnect too) and re-syncs when due, and returns
// the partitions to poll.
func (g *GroupConsumer) ensure(ctx context.Context) ([]uint32, error) {
	for range 3 {
		epoch := g.c.connEpoch()
		g.mu.Lock()
		joined := g.joined && g.epoch == epoch
		due := g.needSync || time.Since(g.lastSync) >= g.cfg.resyncInterval
		parts := g.partitions
		g.mu.Unlock()
		if !joined {
			if err := g.join(ctx); err != nil {
				return nil, err
			}
			epoch = g.c.connEpoch() // the connection the join went out on
			g.mu.Lock()
			if g.epoch != epoch {
				// A new session: the server forgot what this member read, so
				// read again from the committed offsets.
				clear(g.positions)
			}
			g.joined, g.epoch = true, epoch
			g.mu.Unlock()
			due = true
		}
		if !due {
			return parts, nil
		}
		var a *GroupAssignment
		err := g.shielded(ctx, func(ctx context.Context) (err error) {
			a, err = g.c.SyncConsumerGroup(ctx, g.stream, g.topic, g.group)
			return err
		})
		if errors.Is(err, ErrConsumerGroupMemberNotFound) {
			g.mu.Lock()
			g.joined = false
			g.mu.Unlock()
			continue
		}
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		if a.Generation != g.generation || !slices.Equal(a.Partitions, g.partitions) {
			for p := range g.positions {
				if !slices.Contains(a.Partitions, p) {
					delete(g.positions, p)
				}
			}
		}
		g.generation, g.partitions = a.Generation, a.Partitions
		g.lastSync, g.needSync = time.Now(), false
		parts = g.partitions
		g.mu.Unlock()
		return parts, nil
	}
	return nil, fmt.Errorf("iggy: group consumer: not a member of group %s right after joining it: %w", g.group, ErrConsumerGroupMemberNotFound)
}

func (g *GroupConsumer) join(ctx context.Context) error {
	g.mu.Lock()
	g.joinTried = true
	g.mu.Unlock()
	return g.shielded(ctx, g.joinOrCreate)
}

func (g *GroupConsumer) joinOrCreate(ctx context.Context) error {
	err := g.c.JoinConsumerGroup(ctx, g.stream, g.topic, g.group)
	if err == nil || !g.cfg.create || !errors.Is(err, ErrConsumerGroupNotFound) {
		return err
	}
	_, err = g.c.CreateConsumerGroup(ctx, g.stream, g.topic, g.group.Name())
	if err != nil && !errors.Is(err, ErrConsumerGroupNameAlreadyExists) {
		return err
	}
	return g.c.JoinConsumerGroup(ctx, g.stream, g.topic, g.group)
}

// shielded runs one request so that ctx ending does not cut it short: a
// request cut mid-flight drops the connection, and with it this member's
// place in the group, setting off a rebalance. fn runs in the background
// with the client's request timeout; shielded returns fn's error, or ctx's
// at once if ctx ends first (fn's result is then dropped: a poll's
// messages are read again by the next Poll).
func (g *GroupConsumer) shielded(ctx context.Context, fn func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	g.bg.Add(1)
	go func() {
		defer g.bg.Done()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.c.cfg.requestTimeout)
		defer cancel()
		done <- fn(rctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Commit stores offset as the group's committed offset on partition: the
// last offset the caller has finished with. It refuses an offset this
// consumer has not delivered yet. When the partition has moved to another
// member (a rebalance), the error matches
// ErrConsumerGroupPartitionNotOwned and the consumer re-reads its
// assignment before its next poll; the messages are delivered again to
// the partition's new owner.
func (g *GroupConsumer) Commit(ctx context.Context, partition uint32, offset uint64) error {
	g.mu.Lock()
	pos, ok := g.positions[partition]
	g.mu.Unlock()
	if ok && offset >= pos {
		return fmt.Errorf("iggy: group consumer: commit of offset %d on partition %d, but only offsets below %d were delivered: %w",
			offset, partition, pos, ErrInvalidOffset)
	}
	err := g.shielded(ctx, func(ctx context.Context) error {
		return g.c.StoreConsumerOffset(ctx, ConsumerGroup(g.group), g.stream, g.topic, Partition(partition), offset)
	})
	if !errors.Is(err, ErrResourceNotFound) {
		return err
	}
	// Status 20 also means a missing stream, topic or group: tell them
	// apart by asking for this member's assignment now.
	g.markResync()
	var a *GroupAssignment
	serr := g.shielded(ctx, func(ctx context.Context) (err error) {
		a, err = g.c.SyncConsumerGroup(ctx, g.stream, g.topic, g.group)
		return err
	})
	if errors.Is(serr, ErrConsumerGroupMemberNotFound) || (serr == nil && !slices.Contains(a.Partitions, partition)) {
		return &notOwnedError{partition: partition, err: err}
	}
	return err
}

// notOwnedError is a commit refused because the partition is no longer
// this member's. It matches ErrConsumerGroupPartitionNotOwned and the
// server's error (ErrResourceNotFound).
type notOwnedError struct {
	partition uint32
	err       error
}

func (e *notOwnedError) Error() string {
	return fmt.Sprintf("iggy: group consumer: commit on partition %d: the partition is no longer assigned to this member (%v)", e.partition, e.err)
}

func (e *notOwnedError) Unwrap() []error { return []error{ErrConsumerGroupPartitionNotOwned, e.err} }

// Assignment returns the partitions this member polled from at its last
// sync, and the group generation.
func (g *GroupConsumer) Assignment() (generation uint64, partitions []uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.generation, slices.Clone(g.partitions)
}

// Close leaves the group (so its partitions go to the other members) and
// stops Poll. The client is left open. If ctx ends (or the leave fails)
// first, Close returns the error and a later Close tries the leave again;
// once it has left, Close returns nil.
func (g *GroupConsumer) Close(ctx context.Context) error {
	g.closeMu.Lock()
	defer g.closeMu.Unlock()
	g.mu.Lock()
	if g.left {
		g.mu.Unlock()
		return nil
	}
	if !g.closed {
		g.closed = true
		close(g.closing)
	}
	g.mu.Unlock()
	g.ahead.stop()  // a batch read ahead is dropped: it was not committed
	g.pollMu.Lock() // wait for a Poll in progress
	defer g.pollMu.Unlock()
	if g.bgIdle == nil {
		idle := make(chan struct{})
		g.bgIdle = idle
		go func() { g.bg.Wait(); close(idle) }()
	}
	select {
	case <-g.bgIdle: // an abandoned join may have landed: leave after it
		g.bgIdle = nil
	case <-ctx.Done():
		return fmt.Errorf("iggy: group consumer close: %w", ctx.Err())
	}
	g.mu.Lock()
	tried := g.joinTried
	g.mu.Unlock()
	var err error
	if tried {
		err = g.shielded(ctx, func(ctx context.Context) error {
			return g.c.LeaveConsumerGroup(ctx, g.stream, g.topic, g.group)
		})
		g.bg.Wait()
		if errors.Is(err, ErrConsumerGroupMemberNotFound) || errors.Is(err, ErrClosed) {
			err = nil // not a member (any more), or the client's connection is gone with the membership
		}
	}
	if err != nil {
		return fmt.Errorf("iggy: group consumer close: leaving group %s: %w", g.group, err)
	}
	g.mu.Lock()
	g.left = true
	g.mu.Unlock()
	return nil
}
