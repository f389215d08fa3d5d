package iggy

import (
	"context"
	"sync"
	"sync/atomic"
)

// Ack reports the outcome of one Send: it is done when all of the send's
// messages are sent, and Err is the first failure, if any.
type Ack struct {
	done    chan struct{}
	pending atomic.Int32
	mu      sync.Mutex
	err     error
}

func newAck(parts int32) *Ack {
	a := &Ack{done: make(chan struct{})}
	a.pending.Store(parts)
	return a
}

func failedAck(err error) *Ack {
	a := newAck(1)
	a.finish(err)
	return a
}

// finish records one part's outcome and closes done after the last.
func (a *Ack) finish(err error) {
	if err != nil {
		a.mu.Lock()
		if a.err == nil {
			a.err = err
		}
		a.mu.Unlock()
	}
	if a.pending.Add(-1) == 0 {
		close(a.done)
	}
}

// Done is closed when every message of the send is sent or has failed.
func (a *Ack) Done() <-chan struct{} { return a.done }

// Err returns the first failure once Done is closed (nil: all sent), and
// nil before.
func (a *Ack) Err() error {
	select {
	case <-a.done:
	default:
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Wait blocks until the send is done or ctx ends, and returns the send's
// error or ctx's. A ctx ending does not cancel the send.
func (a *Ack) Wait(ctx context.Context) error {
	select {
	case <-a.done:
		return a.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}
