package iggy

import (
	"context"
	"sync"
)

// WithPrefetch has the consumer read the next batch as soon as Poll has
// returned one, so the server's read and the network round trip overlap
// the caller's work on the batch it has; the next Poll then returns at
// once when that batch is there. At most one batch is read ahead, from
// where the returned one ended, as the next Poll would have read it. It is
// not committed (committing stays the caller's), so a batch read ahead
// and dropped by Close or a crash is delivered again. A failure met while
// reading ahead (a lost connection) is what the next Poll returns. Not
// with WithAutoCommit: the server would store the offset of a batch the
// caller has not seen. Default off.
func WithPrefetch() ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.prefetch = true })
}

// aheadState is the batch a consumer WithPrefetch is reading ahead.
type aheadState struct {
	mu      sync.Mutex
	result  chan aheadResult // buffered; nil when nothing is read ahead
	cancel  context.CancelFunc
	done    chan struct{} // closed when the read ahead has returned
	stopped bool          // Close: read nothing ahead any more
}

type aheadResult struct {
	b   *Batch
	err error
}

// pollAhead is Poll WithPrefetch: it takes the batch read ahead (or polls
// when there is none) and starts reading the next one.
func (g *GroupConsumer) pollAhead(ctx context.Context) (*Batch, error) {
	a := &g.ahead
	a.mu.Lock()
	result := a.result
	a.mu.Unlock()
	var r aheadResult
	if result == nil {
		g.pollMu.Lock()
		r.b, r.err = g.poll(ctx)
		g.pollMu.Unlock()
	} else {
		select {
		case r = <-result:
		case <-ctx.Done():
			return nil, ctx.Err() // what is read ahead stays for the next Poll
		}
		a.mu.Lock()
		a.result = nil
		a.mu.Unlock()
	}
	if r.err == nil {
		a.start(g)
	}
	return r.b, r.err
}

// start reads the next batch in a goroutine of its own, under pollMu as
// any poll, with a context that only stop ends.
func (a *aheadState) start(g *GroupConsumer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	result, done := make(chan aheadResult, 1), make(chan struct{})
	a.result, a.cancel, a.done = result, cancel, done
	go func() {
		defer close(done)
		defer cancel()
		g.pollMu.Lock()
		b, err := g.poll(ctx)
		g.pollMu.Unlock()
		if err != nil && ctx.Err() != nil {
			err = ErrClosed
		}
		result <- aheadResult{b, err}
	}()
}

// stop ends a read ahead and waits for it to return (Close). A Poll
// waiting for it gets ErrClosed.
func (a *aheadState) stop() {
	a.mu.Lock()
	a.stopped = true
	cancel, done := a.cancel, a.done
	a.result = nil
	a.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
