package live

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/ferryhq/ferry/iggy"
)

// Stream reads every partition of a topic as one member of a named
// consumer group and hands the messages out one at a time (Next,
// Messages), a poll's worth at a time (NextBatch) or as payloads
// (Payloads).
//
// The group's offset of a partition is stored only for messages the
// caller marked processed (Message.Done, Batch.Done), and only up to the
// first one not yet marked: a restarted Stream resumes right after the
// last processed message and never past an unprocessed one. Stores happen
// in the background soon after Done, on Commit, and on Close.
//
// Ready is closed once every message that was in the topic when the
// Stream started has been processed (counting what the group had stored
// before as processed): the caller's view is caught up.
//
// Next, NextBatch and the iterators are for one goroutine at a time; Done,
// Commit, Ready and Close may be called from any goroutine.
type Stream struct {
	h             *Handle
	stream, topic iggy.Identifier
	group         string
	cfg           streamConfig
	g             *iggy.GroupConsumer
	tr            *tracker

	nextMu sync.Mutex // serialises Next and NextBatch
	buf    []*Message

	commitSem chan struct{} // held while offsets are being stored
	errMu     sync.Mutex
	storeErr  error // a failed background store, without a retry interval

	closing   chan struct{}
	committer chan struct{} // closed when the background storer ends
	closeMu   sync.Mutex
	closed    bool
}

// Stream starts reading stream/topic through the consumer group named
// group, creating the group when it does not exist (the stream and topic
// must exist: see WithInitRetries). It joins the group and reads each
// partition's current end and the group's stored offsets before
// returning; the first poll happens in the first Next.
func (h *Handle) Stream(ctx context.Context, stream, topic iggy.Identifier, group string, opts ...StreamOption) (*Stream, error) {
	cfg := streamConfig{pollConfig: defaultPollConfig()}
	for _, o := range opts {
		if o != nil {
			o.applyStream(&cfg)
		}
	}
	errs := cfg.validate()
	if group == "" || len(group) > 255 {
		errs = append(errs, fmt.Errorf("%w: consumer group name %q, want 1..255 bytes", ErrInvalidOption, group))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c := h.consumer
	td, err := findTopic(ctx, c, stream, topic, &cfg.pollConfig)
	if err != nil {
		return nil, err
	}
	g, err := iggy.NewGroupConsumer(c, stream, topic, iggy.NamedID(group), iggy.WithCreateGroup(),
		iggy.WithPollCount(uint32(cfg.batchLength)), iggy.WithPollInterval(cfg.pollInterval))
	if err != nil {
		return nil, fmt.Errorf("live: stream %s/%s: %w", stream, topic, err)
	}
	s := &Stream{h: h, stream: stream, topic: topic, group: group, cfg: cfg, g: g,
		tr:        newTracker(cfg.allowReplay),
		commitSem: make(chan struct{}, 1),
		closing:   make(chan struct{}),
		committer: make(chan struct{}),
	}
	if err := s.begin(ctx, td); err != nil {
		_ = g.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	go s.storeLoop()
	return s, nil
}

// begin joins the group and records each partition's end and stored
// offset.
func (s *Stream) begin(ctx context.Context, td *iggy.TopicDetails) error {
	if err := s.g.Join(ctx); err != nil {
		return fmt.Errorf("live: stream %s/%s: joining consumer group %q: %w", s.stream, s.topic, s.group, err)
	}
	for i := range td.Partitions {
		p := &td.Partitions[i]
		stored, has, err := s.storedOffset(ctx, p.ID)
		if err != nil {
			return err
		}
		s.tr.begin(p.ID, partitionEnd(p), stored, has)
	}
	_, assigned := s.g.Assignment()
	s.tr.start(assigned)
	return nil
}

// storedOffset reads the group's stored offset of a partition.
func (s *Stream) storedOffset(ctx context.Context, partition uint32) (uint64, bool, error) {
	info, err := s.h.consumer.GetConsumerOffset(ctx, iggy.ConsumerGroup(iggy.NamedID(s.group)), s.stream, s.topic, iggy.Partition(partition))
	switch {
	case errors.Is(err, iggy.ErrConsumerOffsetNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("live: stream %s/%s: reading the stored offset of partition %d: %w", s.stream, s.topic, partition, err)
	}
	return info.StoredOffset, true, nil
}

// Ready is closed once the Stream is caught up: in every partition this
// member reads, every message that was there when the Stream started has
// been marked processed. It is closed at once when there was nothing to
// catch up on. With several members in the group, each member's Ready
// counts the partitions assigned to it as of its latest sync with the
// group (at the start, then at least every 5s while polling).
func (s *Stream) Ready() <-chan struct{} { return s.tr.ready }

// Next returns the next message, polling (and waiting WithPollInterval
// after an empty poll) until there is one or ctx ends. Mark it processed
// with Done once handled. A failed poll is returned, unless
// WithRetryInterval says to retry.
func (s *Stream) Next(ctx context.Context) (*Message, error) {
	s.nextMu.Lock()
	defer s.nextMu.Unlock()
	if err := s.fill(ctx); err != nil {
		return nil, err
	}
	m := s.buf[0]
	s.buf[0] = nil
	s.buf = s.buf[1:]
	return m, nil
}

// NextBatch returns the messages of the next poll (what Next has not
// handed out of it yet, if Next was called). Mark them processed with
// Batch.Done, or one by one.
func (s *Stream) NextBatch(ctx context.Context) (*Batch, error) {
	s.nextMu.Lock()
	defer s.nextMu.Unlock()
	if err := s.fill(ctx); err != nil {
		return nil, err
	}
	b := &Batch{Partition: s.buf[0].Partition}
	n := 0
	for n < len(s.buf) && s.buf[n].Partition == b.Partition {
		n++
	}
	b.Messages = append([]*Message(nil), s.buf[:n]...)
	clear(s.buf[:n])
	s.buf = s.buf[n:]
	return b, nil
}

// Messages iterates over the messages as Next returns them. It ends after
// yielding the first error (ctx's included). Mark each message processed
// with Done.
func (s *Stream) Messages(ctx context.Context) iter.Seq2[*Message, error] {
	return func(yield func(*Message, error) bool) {
		for {
			m, err := s.Next(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(m, nil) {
				return
			}
		}
	}
}

// Payloads iterates over the payloads alone. A payload is marked processed
// when the loop body returns to the iterator for the next one; one the
// body breaks out of the loop on is not, so it is delivered again after a
// restart (at least once). It ends after yielding the first error.
func (s *Stream) Payloads(ctx context.Context) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		for {
			m, err := s.Next(ctx)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(m.Payload, nil) {
				return
			}
			m.Done()
		}
	}
}

// fill polls until s.buf holds a message. s.nextMu is held.
func (s *Stream) fill(ctx context.Context) error {
	for len(s.buf) == 0 {
		if err := s.failure(); err != nil {
			return err
		}
		b, err := s.g.Poll(ctx)
		if err != nil {
			if errors.Is(err, iggy.ErrClosed) {
				return fmt.Errorf("live: stream %s/%s: %w", s.stream, s.topic, iggy.ErrClosed)
			}
			if err := retryOrFail(ctx, s.closing, &s.cfg.pollConfig, "poll", err, "stream", s.stream.String(), "topic", s.topic.String()); err != nil {
				return fmt.Errorf("live: stream %s/%s: poll: %w", s.stream, s.topic, err)
			}
			continue
		}
		_, assigned := s.g.Assignment()
		s.tr.setAssigned(assigned)
		s.accept(ctx, b)
	}
	return nil
}

// accept buffers the messages of b the tracker lets through.
func (s *Stream) accept(ctx context.Context, b *iggy.Batch) {
	if !s.cfg.allowReplay && s.tr.gap(b.Partition, b.Messages[0].Offset) {
		// The partition moved on without us (another member read and
		// stored in between): learn the stored offset, so older messages
		// still in our hands do not move it back.
		// Failing that, go on: the batch must be delivered all the same.
		stored, has, err := s.storedOffset(ctx, b.Partition)
		switch {
		case err != nil:
			s.cfg.logger.Warn("live: could not read the stored offset after a jump in the partition", "error", err)
		case has:
			s.tr.raiseFloor(b.Partition, stored)
		}
	}
	for i := range b.Messages {
		mk, ok := s.tr.admit(b.Partition, b.Messages[i].Offset)
		if !ok {
			continue
		}
		m := fromPoll(b.Partition, &b.Messages[i], false)
		m.mark = mk
		s.buf = append(s.buf, &m)
	}
}

func (s *Stream) failure() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.storeErr
}

// Commit stores now the offsets of what was marked processed (the stores
// otherwise happen in the background soon after Done).
func (s *Stream) Commit(ctx context.Context) error {
	return s.store(ctx)
}

// store stores the pending offsets. One store round runs at a time, and a
// round runs to its end even when ctx ends first, so an older offset can
// never land after a newer one.
func (s *Stream) store(ctx context.Context) error {
	select {
	case s.commitSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("live: stream %s/%s: storing offsets: %w", s.stream, s.topic, ctx.Err())
	}
	done := make(chan error, 1)
	go func() {
		defer func() { <-s.commitSem }()
		done <- s.storeRound(context.WithoutCancel(ctx))
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("live: stream %s/%s: storing offsets: %w", s.stream, s.topic, ctx.Err())
	}
}

func (s *Stream) storeRound(ctx context.Context) error {
	var errs []error
	for _, o := range s.tr.toStore() {
		err := s.g.Commit(ctx, o.partition, o.offset)
		switch {
		case err == nil:
			s.tr.stored(o.partition, o.offset)
		case errors.Is(err, iggy.ErrResourceNotFound):
			// Status 20: this member does not own the partition (any
			// more); its new owner reads on from the stored offset.
			s.cfg.logger.Warn("live: offset not stored: the partition is no longer this member's",
				"stream", s.stream.String(), "topic", s.topic.String(), "partition", o.partition, "offset", o.offset)
			s.tr.drop(o.partition, o.offset)
		default:
			errs = append(errs, fmt.Errorf("live: stream %s/%s: storing offset %d of partition %d: %w",
				s.stream, s.topic, o.offset, o.partition, err))
		}
	}
	return errors.Join(errs...)
}

// storeLoop stores offsets in the background after Done, until Close.
func (s *Stream) storeLoop() {
	defer close(s.committer)
	ctx := context.Background()
	for {
		select {
		case <-s.closing:
			return
		case <-s.tr.wake:
		}
		select {
		case <-s.closing: // Close stores what is left
			return
		default:
		}
		err := s.store(ctx)
		if err == nil {
			continue
		}
		if s.cfg.retryInterval == 0 {
			s.errMu.Lock()
			if s.storeErr == nil {
				s.storeErr = err
			}
			s.errMu.Unlock()
			continue
		}
		s.cfg.logger.Warn("live: storing offsets failed; retrying", "in", s.cfg.retryInterval, "error", err)
		if sleep(ctx, s.closing, s.cfg.retryInterval) != nil {
			return
		}
		select {
		case s.tr.wake <- struct{}{}:
		default:
		}
	}
}

// Close stores the offsets of what was marked processed, leaves the
// consumer group (its partitions go to the other members) and ends Next.
// Messages marked processed after Close are not stored. Close is
// idempotent; the Handle stays open.
func (s *Stream) Close(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.closing)
	select {
	case <-s.committer:
	case <-ctx.Done():
	}
	errStore := s.store(ctx)
	errLeave := s.g.Close(ctx)
	if errLeave != nil {
		errLeave = fmt.Errorf("live: stream %s/%s: leaving consumer group %q: %w", s.stream, s.topic, s.group, errLeave)
	}
	return errors.Join(errStore, errLeave)
}
