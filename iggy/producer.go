package iggy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/internal/backoff"
)

// Producer batches messages for one topic and sends them in the
// background. Send hands over a group of messages and returns an *Ack that
// completes when every message of the group has been sent (or failed), so
// a caller can acknowledge its own source only once the data is in Iggy.
//
// Messages wait in a buffer per destination partition until a batch is
// full (WithBatchLength, WithBatchBytes), the oldest message has waited
// WithLinger, or Flush or Close is called. The buffer is bounded
// (WithMaxBuffered); Send blocks while it is full. One batch is in flight
// at a time (the connection is lockstep); batches that fail with a
// retriable error are sent again (WithSendRetries), so delivery is
// at-least-once.
type Producer struct {
	c             *Client
	stream, topic Identifier
	cfg           producerConfig
	ctx           context.Context // cancelled by a Close whose context ends
	cancel        context.CancelFunc

	mu       sync.Mutex
	routes   map[route]*queue
	order    []*queue // routes in creation order, for fair draining
	msgs     int      // buffered and in flight
	bytes    int
	space    chan struct{} // closed and replaced when space frees
	wake     chan struct{}
	flushing int
	closed   bool
	done     chan struct{} // closed when the sender goroutine ends
}

// route is where a batch goes: an explicit partition, or balanced.
type route struct {
	balanced  bool
	partition uint32
}

type queue struct {
	route   route
	parts   []part
	n       int
	bytes   int
	firstAt time.Time
	lastAck *Ack
}

type part struct {
	ack  *Ack
	msgs []Message
}

// NewProducer starts a producer for stream/topic on c. It does not touch
// the network until the first Send.
func NewProducer(c *Client, stream, topic Identifier, opts ...ProducerOption) (*Producer, error) {
	cfg := producerConfig{
		batchLength: 1000, batchBytes: 4 << 20, linger: 5 * time.Millisecond,
		maxMessages: 100_000, maxBytes: 64 << 20, partitioning: Balanced(),
		retries: 5, sendTimeout: c.cfg.requestTimeout,
	}
	for _, o := range opts {
		if o != nil {
			o.applyProducer(&cfg)
		}
	}
	var errs []error
	if err := checkIDs(wire.CmdSendMessages, stream, topic); err != nil {
		errs = append(errs, err)
	}
	if cfg.batchLength < 1 || cfg.batchBytes < 1 || cfg.maxMessages < 1 || cfg.maxBytes < 1 {
		errs = append(errs, fmt.Errorf("%w: batch length %d, batch bytes %d, max buffered %d messages and %d bytes must all be positive",
			errConfig, cfg.batchLength, cfg.batchBytes, cfg.maxMessages, cfg.maxBytes))
	}
	if cfg.batchBytes > maxFrameSize-4096 {
		errs = append(errs, fmt.Errorf("%w: batch bytes %d exceed the frame limit", errConfig, cfg.batchBytes))
	}
	if cfg.linger < 0 || cfg.retries < 0 || cfg.sendTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: linger %s and retries %d must not be negative, send timeout %s must be positive",
			errConfig, cfg.linger, cfg.retries, cfg.sendTimeout))
	}
	if err := cfg.partitioning.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: partitioning: %w", errConfig, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := &Producer{
		c: c, stream: stream, topic: topic, cfg: cfg,
		routes: map[route]*queue{},
		space:  make(chan struct{}),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	go p.run()
	return p, nil
}

// Send hands msgs to the producer and returns an Ack for them. It blocks
// while the buffer is full, until there is room or ctx ends (the Ack then
// carries ctx's error). Invalid messages fail the Ack at once and nothing
// of the group is sent. The producer copies the Message values but not
// their payloads or headers: do not change those until the Ack is done.
// Zero ids and origin timestamps are filled in as SendMessages does.
func (p *Producer) Send(ctx context.Context, msgs ...Message) *Ack {
	if len(msgs) == 0 {
		return failedAck(fmt.Errorf("iggy: producer: no messages: %w", ErrInvalidMessagesCount))
	}
	own := append([]Message(nil), msgs...)
	if err := prepareMessages(own); err != nil {
		return failedAck(fmt.Errorf("iggy: producer: %w", err))
	}
	size := 0
	for i := range own {
		size += own[i].FrameSize()
	}
	routes, err := p.routeAll(ctx, own)
	if err != nil {
		return failedAck(err)
	}

	p.mu.Lock()
	for !p.closed && p.msgs > 0 && (p.msgs+len(own) > p.cfg.maxMessages || p.bytes+size > p.cfg.maxBytes) {
		space := p.space
		p.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return failedAck(fmt.Errorf("iggy: producer: waiting for buffer space: %w", ctx.Err()))
		}
		p.mu.Lock()
	}
	if p.closed {
		p.mu.Unlock()
		return failedAck(fmt.Errorf("iggy: producer: %w", ErrClosed))
	}
	ack := newAck(1) // held until every part is queued
	now := time.Now()
	for start := 0; start < len(own); {
		end := start + 1
		for end < len(own) && routes[end] == routes[start] {
			end++
		}
		q := p.queue(routes[start])
		if q.n == 0 {
			q.firstAt = now
		}
		ack.pending.Add(1)
		q.parts = append(q.parts, part{ack: ack, msgs: own[start:end]})
		for i := start; i < end; i++ {
			q.bytes += own[i].FrameSize()
		}
		q.n += end - start
		q.lastAck = ack
		start = end
	}
	p.msgs += len(own)
	p.bytes += size
	p.mu.Unlock()
	p.signal()
	ack.finish(nil)
	return ack
}

// routeAll picks each message's route. Consecutive messages with one
// route stay together.
func (p *Producer) routeAll(ctx context.Context, msgs []Message) ([]route, error) {
	base := route{balanced: true}
	switch p.cfg.partitioning.Kind {
	case wire.PartitionByID:
		base = route{partition: p.cfg.partitioning.PartitionID}
	case wire.PartitionByMessageKey:
		rp, err := p.c.resolvePartition(ctx, p.stream, p.topic, p.cfg.partitioning)
		if err == nil && rp.Kind != wire.PartitionByID {
			err = fmt.Errorf("routing by key needs the partition count of topic %s, which this user may not read (grant read_topic): %w",
				p.topic, ErrUnauthorized)
		}
		if err != nil {
			return nil, fmt.Errorf("iggy: producer: %w", err)
		}
		base = route{partition: rp.PartitionID}
	}
	routes := make([]route, len(msgs))
	for i := range msgs {
		routes[i] = base
		if p.cfg.key == nil {
			continue
		}
		k := p.cfg.key(&msgs[i])
		if len(k) == 0 {
			continue
		}
		if len(k) > 255 {
			return nil, fmt.Errorf("iggy: producer: message %d: key is %d bytes, at most 255: %w", i, len(k), wire.ErrInvalidKeyValueLength)
		}
		rp, err := p.c.resolvePartition(ctx, p.stream, p.topic, ByKey(k))
		if err == nil && rp.Kind != wire.PartitionByID {
			err = fmt.Errorf("routing by key needs the partition count of topic %s, which this user may not read (grant read_topic): %w",
				p.topic, ErrUnauthorized)
		}
		if err != nil {
			return nil, fmt.Errorf("iggy: producer: %w", err)
		}
		routes[i] = route{partition: rp.PartitionID}
	}
	return routes, nil
}

func (p *Producer) queue(r route) *queue {
	q := p.routes[r]
	if q == nil {
		q = &queue{route: r}
		p.routes[r] = q
		p.order = append(p.order, q)
	}
	return q
}

func (p *Producer) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Flush sends everything buffered now without waiting for linger, and
// waits until it is all sent (or failed) or ctx ends. It returns ctx's
// error or nil; per-send failures are reported by their Acks.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.flushing++
	var acks []*Ack
	for _, q := range p.order {
		if q.lastAck != nil {
			acks = append(acks, q.lastAck)
		}
	}
	p.mu.Unlock()
	p.signal()
	defer func() {
		p.mu.Lock()
		p.flushing--
		p.mu.Unlock()
	}()
	for _, a := range acks {
		select {
		case <-a.done:
		case <-ctx.Done():
			return fmt.Errorf("iggy: producer flush: %w", ctx.Err())
		}
	}
	return nil
}

// Close stops taking messages, sends what is buffered and waits for it.
// If ctx ends first, the batch in flight is abandoned (its connection is
// dropped, and the client dials again) and every message not yet sent
// fails with ErrClosed. Close is idempotent; the client is
// left open.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	closeReady(p.space)
	p.mu.Unlock()
	p.signal()
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		p.cancel()
		<-p.done
		return fmt.Errorf("iggy: producer close: %w", ctx.Err())
	}
}

// run is the sender: it takes ready batches one at a time and sends them.
func (p *Producer) run() {
	defer close(p.done)
	defer p.cancel()
	var batch []Message
	var parts []part
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		q, wait := p.ready(time.Now())
		if q == nil {
			if p.closed && p.msgs == 0 {
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			if wait > 0 {
				timer.Reset(wait)
			} else {
				timer.Stop()
			}
			select {
			case <-p.wake:
			case <-timer.C:
			case <-p.ctx.Done():
			}
			continue
		}
		batch, parts = q.take(batch[:0], parts[:0], p.cfg.batchLength, p.cfg.batchBytes)
		p.mu.Unlock()

		err := p.sendBatch(q.route, batch)
		size := 0
		for i := range batch {
			size += batch[i].FrameSize()
		}
		for _, pt := range parts {
			pt.ack.finish(err)
		}
		clear(batch) // drop references to payloads
		clear(parts)
		p.mu.Lock()
		p.msgs -= len(batch)
		p.bytes -= size
		closeReady(p.space)
		p.space = make(chan struct{})
		p.mu.Unlock()
	}
}

// ready returns a queue whose batch should go now, or how long until one
// will (0: nothing buffered). Queues are scanned in order from the one
// after the last taken, so a busy partition cannot starve the others.
func (p *Producer) ready(now time.Time) (*queue, time.Duration) {
	wait := time.Duration(0)
	hurry := p.flushing > 0 || p.closed || p.ctx.Err() != nil
	for _, q := range p.order {
		if q.n == 0 {
			continue
		}
		due := q.firstAt.Add(p.cfg.linger)
		if hurry || q.n >= p.cfg.batchLength || q.bytes >= p.cfg.batchBytes || !now.Before(due) {
			// rotate: move q to the back
			for i, o := range p.order {
				if o == q {
					copy(p.order[i:], p.order[i+1:])
					p.order[len(p.order)-1] = q
					break
				}
			}
			return q, 0
		}
		if d := due.Sub(now); wait == 0 || d < wait {
			wait = d
		}
	}
	return nil, wait
}

// take moves up to maxN messages and maxBytes bytes (at least one message)
// from q into batch, splitting a part at the boundary.
func (q *queue) take(batch []Message, parts []part, maxN, maxBytes int) ([]Message, []part) {
	bytes := 0
	for len(q.parts) > 0 && len(batch) < maxN {
		pt := &q.parts[0]
		k := 0
		for k < len(pt.msgs) && len(batch) < maxN {
			sz := pt.msgs[k].FrameSize()
			if len(batch) > 0 && bytes+sz > maxBytes {
				break
			}
			batch = append(batch, pt.msgs[k])
			bytes += sz
			k++
		}
		if k == 0 {
			break
		}
		if k < len(pt.msgs) {
			pt.ack.pending.Add(1) // the rest stays queued as its own part
			parts = append(parts, part{ack: pt.ack, msgs: pt.msgs[:k]})
			pt.msgs = pt.msgs[k:]
			break
		}
		parts = append(parts, *pt)
		q.parts[0] = part{}
		q.parts = q.parts[1:]
	}
	q.n -= len(batch)
	q.bytes -= bytes
	if q.n == 0 {
		q.parts = nil
	}
	return batch, parts
}

// sendBatch sends one batch, retrying retriable failures.
func (p *Producer) sendBatch(r route, batch []Message) error {
	part := Balanced()
	if !r.balanced {
		part = ToPartition(r.partition)
	}
	retry := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for attempt := 0; ; attempt++ {
		if p.ctx.Err() != nil {
			return fmt.Errorf("iggy: producer: %w before the batch was sent", ErrClosed)
		}
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.sendTimeout)
		_, err := p.c.SendMessages(ctx, p.stream, p.topic, part, batch)
		cancel()
		if err == nil || attempt >= p.cfg.retries || !IsRetriable(err) || p.ctx.Err() != nil {
			if err != nil && p.ctx.Err() != nil {
				err = fmt.Errorf("iggy: producer: %w (closed before the batch was sent: %w)", ErrClosed, err)
			}
			return err
		}
		wait := retry.Next()
		p.c.log.Warn("iggy: producer batch failed, retrying", "attempt", attempt+1, "retry_in", wait, "error", err)
		_ = backoff.Sleep(p.ctx, wait) // a close is seen at the top of the loop
	}
}
