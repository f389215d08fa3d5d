// Package gather owns the one way a source collects the items a
// background reader hands it into a batch: wait for the first, then take
// more until the batch is full or a short linger passes. The CDC sources
// (PostgreSQL, MariaDB) poll with it.
package gather

import (
	"context"
	"time"
)

// Batch returns carry (items gathered by an earlier call that ended with
// its context) plus what arrives on items: it waits for one item when
// carry is empty, then takes more until counted of them (the items for
// which counts is true) reach max, linger has passed since the wait, or
// ctx ends. An error from errc before the first item is returned.
//
// When ctx ends, Batch returns ctx.Err() and everything gathered as
// rest, for the caller to pass as carry next time: nothing taken off the
// channel is lost.
func Batch[T any](ctx context.Context, items <-chan T, errc <-chan error, carry []T,
	counts func(T) bool, max int, linger time.Duration) (taken []T, counted int, err error) {
	taken = carry
	if len(taken) == 0 {
		select {
		case it := <-items:
			taken = append(taken, it)
		case err := <-errc:
			return nil, 0, err
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	for _, it := range taken {
		if counts(it) {
			counted++
		}
	}
	t := time.NewTimer(linger)
	defer t.Stop()
	for counted < max {
		select {
		case it := <-items:
			taken = append(taken, it)
			if counts(it) {
				counted++
			}
		case <-t.C:
			return taken, counted, nil
		case <-ctx.Done():
			return taken, counted, ctx.Err()
		}
	}
	return taken, counted, nil
}
