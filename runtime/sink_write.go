package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
)

// write calls Consume with retries and capped exponential backoff up to
// max_retries, narrowing to the messages a connector.MessageErrors names;
// messages whose error is permanent (connector.Permanent, on the entry or
// on the whole error) are not retried. When a whole-batch error persists,
// each remaining message is tried on its own, so one poison message does
// not take its neighbours down with it.
//
// It returns the messages that still fail, to dead-letter; or a non-nil
// down error when the sink, not a message, is failing: the sink said the
// destination is unavailable (connector.Unavailable, on the whole error or
// on an entry, in the last attempt or during isolation), or not one
// message of the batch could be written, no failure is permanent and the
// sink never judged a message on its own. Nothing is dead-lettered then.
func (mem *member) write(ctx context.Context, batch *connector.SinkBatch) (unwritten []failure, down error) {
	w := &batchWrite{mem: mem, batch: batch, pending: batch.Messages}
	err := w.retry(ctx)
	if ctx.Err() != nil {
		return nil, nil
	}
	if err != nil && w.unavailable == nil && w.wholeBatch {
		w.isolate(ctx)
		if ctx.Err() != nil {
			return nil, nil
		}
	}
	return w.settle()
}

// batchWrite is the state of writing one batch: what is written, what is
// settled as failed for good, and what is still pending and why.
type batchWrite struct {
	mem   *member
	batch *connector.SinkBatch

	pending []connector.Message
	errs    []error   // errs[i] is why pending[i] failed last
	failed  []failure // permanent failures, settled
	written int
	// perMessage: the sink judged messages on their own (a MessageErrors).
	perMessage bool
	// wholeBatch: the last error was about the whole call, for more than
	// one message; isolating them may find a poison one.
	wholeBatch bool
	// unavailable is the sink's last word that the destination is down.
	unavailable error
}

// retry calls Consume on the pending messages until none is pending, the
// error is permanent, max_retries is used up or ctx ends; it returns the
// last error (nil when nothing is pending).
func (w *batchWrite) retry(ctx context.Context) error {
	cs, m := w.mem.cs, w.mem.r.m
	retry := backoff.Backoff{Min: cs.RetryBackoff, Max: cs.MaxRetryBackoff}
	if retry.Min <= 0 {
		retry.Min = retryMin
	}
	for attempt := uint32(0); ; attempt++ {
		err := w.mem.consume(ctx, w.sub(w.pending))
		w.classify(err)
		if len(w.pending) == 0 {
			return nil
		}
		if (connector.IsPermanent(err) && w.unavailable == nil) || attempt >= cs.MaxRetries || ctx.Err() != nil {
			return err
		}
		if w.unavailable != nil {
			m.note(fmt.Errorf("destination unavailable; retrying: %w", w.unavailable))
		}
		d := retry.Next()
		m.log.Warn("consume failed; retrying", "stream", w.batch.Stream, "topic", w.batch.Topic,
			"partition", w.batch.Partition, "messages", len(w.pending), "attempt", attempt+1, "error", err, "in", d)
		if err := backoff.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

// classify takes in the result of one Consume of the pending messages:
// the written ones leave pending, permanent failures are settled, and the
// rest stay pending with their errors. It records whether the sink said
// the destination is unavailable, as of this call.
func (w *batchWrite) classify(err error) {
	m := w.mem.r.m
	w.unavailable = nil
	if err == nil {
		m.metrics.processed.Add(float64(len(w.pending)))
		w.written += len(w.pending)
		w.pending, w.errs = nil, nil
		return
	}
	m.metrics.errors.Inc()
	if connector.IsUnavailable(err) {
		w.unavailable = err
	}
	var per connector.MessageErrors
	if !errors.As(err, &per) || len(per) == 0 {
		w.errs = make([]error, len(w.pending))
		for i := range w.errs {
			w.errs[i] = err
		}
		w.wholeBatch = len(w.pending) > 1
		return
	}
	w.perMessage, w.wholeBatch = true, false
	permanent := connector.IsPermanent(err)
	var next []connector.Message
	var nextErrs []error
	for i, msg := range w.pending {
		e, bad := per[i]
		switch {
		case !bad:
			m.metrics.processed.Inc()
			w.written++
		case connector.IsUnavailable(e):
			w.unavailable = e
			next, nextErrs = append(next, msg), append(nextErrs, e)
		case permanent || connector.IsPermanent(e):
			w.failed = append(w.failed, failure{msg, e})
		default:
			next, nextErrs = append(next, msg), append(nextErrs, e)
		}
	}
	w.pending, w.errs = next, nextErrs
}

// isolate tries each pending message on its own. A message written alone
// leaves pending; a permanent failure is settled. A message that fails
// alone with an error that is neither permanent nor Unavailable may have
// met an outage that ended during the isolation, so once another message
// was written it is tried alone once more, and only a message that fails
// both times stays pending (to be dead-lettered). An Unavailable answer
// ends the isolation at once: the destination is down, and what is still
// pending stays so.
func (w *batchWrite) isolate(ctx context.Context) {
	for pass := 0; pass < 2 && len(w.pending) > 0; pass++ {
		if pass > 0 && w.written == 0 {
			return // nothing was written: no evidence against any message
		}
		var next []connector.Message
		var nextErrs []error
		for i, msg := range w.pending {
			err := w.mem.consume(ctx, w.sub([]connector.Message{msg}))
			if ctx.Err() != nil {
				return
			}
			if err == nil {
				w.mem.r.m.metrics.processed.Inc()
				w.written++
				continue
			}
			w.mem.r.m.metrics.errors.Inc()
			var per connector.MessageErrors
			if errors.As(err, &per) {
				w.perMessage = true
			}
			if u := unavailableIn(err); u != nil {
				w.unavailable = u
				w.pending = append(next, w.pending[i:]...)
				w.errs = append(nextErrs, w.errs[i:]...)
				return
			}
			if (failure{msg, err}).permanent() || onlyPermanent(per) {
				w.failed = append(w.failed, failure{msg, err})
				continue
			}
			next, nextErrs = append(next, msg), append(nextErrs, err)
		}
		w.pending, w.errs = next, nextErrs
	}
}

// settle decides the outcome: a down error when the destination is
// unavailable or the sink failed as a whole (see write), else the
// messages that still fail.
func (w *batchWrite) settle() ([]failure, error) {
	if len(w.pending) == 0 {
		return w.failed, nil
	}
	if w.unavailable != nil {
		return nil, fmt.Errorf("destination unavailable: %w", w.unavailable)
	}
	failed := w.failed
	for i, msg := range w.pending {
		failed = append(failed, failure{msg, w.errs[i]})
	}
	if w.written == 0 && !w.perMessage && len(failed) == len(w.batch.Messages) && !slices.ContainsFunc(failed, failure.permanent) {
		return nil, fmt.Errorf("every message of the batch failed after %d retries: %w", w.mem.cs.MaxRetries, failed[0].err)
	}
	return failed, nil
}

// sub is the batch narrowed to msgs.
func (w *batchWrite) sub(msgs []connector.Message) *connector.SinkBatch {
	b := *w.batch
	b.Messages = msgs
	return &b
}

// unavailableIn returns err when it is marked connector.Unavailable, or
// else its first Unavailable entry when it is a connector.MessageErrors.
func unavailableIn(err error) error {
	if connector.IsUnavailable(err) {
		return err
	}
	var per connector.MessageErrors
	if errors.As(err, &per) {
		for _, e := range per {
			if connector.IsUnavailable(e) {
				return e
			}
		}
	}
	return nil
}

// onlyPermanent reports whether per names at least one failure and all
// of them are permanent.
func onlyPermanent(per connector.MessageErrors) bool {
	for _, e := range per {
		if !connector.IsPermanent(e) {
			return false
		}
	}
	return len(per) > 0
}
