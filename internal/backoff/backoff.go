// Package backoff is Ferry's one retry schedule: wait Min after the first
// failure, then Factor times longer after each further one, never more
// than Max, optionally spread by jitter, and start again at Min after a
// success (Reset). Sleep is Ferry's one sleep that ends with a context
// (SleepOr also with a stop channel).
//
// A retry loop keeps its own decisions (which errors are worth another
// try, how many tries, what to log, a Retry-After that replaces the
// computed wait) and asks the schedule only how long to wait:
//
//	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
//	for {
//		err := try()
//		if err == nil || !retriable(err) {
//			return err
//		}
//		d := b.Next()
//		log.Warn("failed; retrying", "error", err, "in", d)
//		if backoff.Sleep(ctx, d) != nil {
//			return err
//		}
//	}
//
// It is written here rather than taken from github.com/cenkalti/backoff/v5
// because that package fits the shape of these loops poorly: its Retry
// runs an operation and decides on its own when to stop (after a minute
// by default), while every Ferry loop decides per attempt and most retry
// until stopped; its ExponentialBackOff is randomized by default (±50%,
// above MaxInterval at the cap) where Ferry's logs and tests want the
// schedule itself; and what Ferry needs of it is the forty lines below,
// not another module.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential schedule of waits. Set the fields, then
// call Next for each wait; the zero value waits 0 every time. A Backoff is
// not safe for concurrent use: each retry loop has its own.
type Backoff struct {
	// Min is the first wait, and the first again after Reset. With Min 0
	// every wait is 0.
	Min time.Duration
	// Max caps every wait. A Max below Min (0 included) is Min: the
	// schedule is then constant.
	Max time.Duration
	// Factor multiplies the wait after each Next. Default (0) 2; values
	// below 1 are 1.
	Factor float64
	// Jitter, from 0 to 1, draws each wait at random from
	// [d×(1−Jitter), d], d being the scheduled wait, so that many clients
	// retrying one server spread out; a wait never exceeds Max. Default 0:
	// each wait is exactly the schedule's, which tests and logs rely on.
	Jitter float64

	next time.Duration // the scheduled wait Next returns; 0 = not started
}

// Next returns the wait to use now and moves the schedule on: Min,
// Min×Factor, Min×Factor², ..., capped at Max.
func (b *Backoff) Next() time.Duration {
	d := b.next
	if d == 0 {
		d = b.Min
	}
	b.next = b.grow(d)
	return b.jitter(d)
}

// Reset starts the schedule again at Min; call it after a success.
func (b *Backoff) Reset() { b.next = 0 }

// Wait sleeps for Next() or until ctx ends, and returns ctx.Err() if ctx
// ended first (or had already ended), nil otherwise.
func (b *Backoff) Wait(ctx context.Context) error { return Sleep(ctx, b.Next()) }

func (b *Backoff) grow(d time.Duration) time.Duration {
	limit := max(b.Max, b.Min)
	f := b.Factor
	if f == 0 {
		f = 2
	}
	if next := float64(d) * max(f, 1); next < float64(limit) {
		return time.Duration(next)
	}
	return limit
}

func (b *Backoff) jitter(d time.Duration) time.Duration {
	j := min(max(b.Jitter, 0), 1)
	if j == 0 || d <= 0 {
		return d
	}
	return d - time.Duration(rand.Float64()*j*float64(d))
}

// Sleep waits for d or until ctx ends, and returns ctx.Err() if ctx ended
// first (or had already ended), nil otherwise. A d of 0 or less does not
// wait.
func Sleep(ctx context.Context, d time.Duration) error { return SleepOr(ctx, d, nil, nil) }

// SleepOr is Sleep that also ends when stop is closed, returning stopErr
// then: for a caller whose Close is a channel rather than a context. A nil
// stop is never closed.
func SleepOr(ctx context.Context, d time.Duration, stop <-chan struct{}, stopErr error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-stop:
		return stopErr
	default:
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return stopErr
	}
}
