package transform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/ferryhq/ferry/connector"
)

// BatchTransform is a transform that takes a whole batch in one call (the
// wasm transform). A chain hands it every message that the transforms
// before it kept, in order; the transforms after it get what it returns.
// Its per-message Apply (for Chain.Apply) handles keep, drop and replace
// only.
type BatchTransform interface {
	Transform
	// ApplyBatch returns one Outcome per message of msgs, or an error
	// when the call as a whole failed (every message of the batch then
	// fails with it). It must not change msgs.
	ApplyBatch(ctx context.Context, msgs []connector.Message, schema connector.Schema) ([]Outcome, error)
}

// Outcome is what a batch transform made of one message.
type Outcome struct {
	// Keep passes the message on unchanged.
	Keep bool
	// Out are the messages that replace it (one for a replace, any number
	// for a split); with Keep false, no Out and no Err the message is
	// dropped.
	Out []connector.Message
	// Err fails the message: it goes to the dead-letter path.
	Err error
}

// Failure is a message of a batch that a transform failed.
type Failure struct {
	Index int // in the batch given to ApplyBatch
	Err   error
}

// BatchResult is what a chain made of a batch.
type BatchResult struct {
	// Messages are the messages to pass on, in order: a split's messages
	// in the place of the one they came from.
	Messages []connector.Message
	// Schema is the payloads' schema after the chain.
	Schema connector.Schema
	// Failed are the messages that failed, by index, in order.
	Failed []Failure
	// Filtered counts the messages dropped.
	Filtered int
}

type checkedKey struct{}

// CheckedJSON returns ctx marking the batch given to ApplyBatch with it as
// checked: each of its JSON payloads is known to be a valid document (the
// source validated every one, or a sink's decoder did), so the JSON
// transforms find its members without validating it a second time. A
// payload that a plugin or WebAssembly transform made is checked again.
func CheckedJSON(ctx context.Context) context.Context {
	return context.WithValue(ctx, checkedKey{}, true)
}

// item is a message in flight through ApplyBatch.
type item struct {
	m      connector.Message
	from   int
	schema connector.Schema
}

// ApplyBatch runs the chain on a batch: runs of per-message transforms
// on each message as Apply does, and each batch transform once on all the
// messages still kept before it. A message a transform fails is left out
// of the rest of the chain and reported in Failed; msgs is not changed.
// A chain without batch transforms does what Apply does to each message.
func (c Chain) ApplyBatch(ctx context.Context, msgs []connector.Message, schema connector.Schema) BatchResult {
	res := BatchResult{Schema: schema}
	var out payloadArena
	checked := ctx.Value(checkedKey{}) != nil
	if !slices.ContainsFunc(c, isBatchTransform) {
		return c.applyEachInPlace(msgs, schema, res, &out, checked)
	}
	items := make([]item, len(msgs))
	for i := range msgs {
		items[i] = item{msgs[i], i, schema}
	}
	for i := 0; i < len(c) && len(items) > 0; {
		bt, isBatch := c[i].(BatchTransform)
		if !isBatch {
			j := i + 1
			for j < len(c) && !isBatchTransform(c[j]) {
				j++
			}
			items = c[i:j].applyEach(items, &res, &out, checked)
			i = j
			continue
		}
		items = applyBatchTransform(ctx, bt, items, &res)
		checked = false // what it made is not checked
		i++
	}
	res.Messages = make([]connector.Message, len(items))
	for k := range items {
		res.Messages[k] = items[k].m
		res.Schema = items[k].schema
	}
	slices.SortStableFunc(res.Failed, func(a, b Failure) int { return a.Index - b.Index })
	return res
}

// applyEachInPlace is ApplyBatch for a chain of per-message transforms
// only: it copies msgs once and transforms the copies in place.
func (c Chain) applyEachInPlace(msgs []connector.Message, schema connector.Schema, res BatchResult, out *payloadArena, checked bool) BatchResult {
	res.Messages = slices.Clone(msgs)
	kept := res.Messages[:0]
	for i := range res.Messages {
		m := &res.Messages[i]
		s, keep, err := c.apply(m, schema, out, checked)
		switch {
		case err != nil:
			res.Failed = append(res.Failed, Failure{i, err})
		case !keep:
			res.Filtered++
		default:
			res.Schema = s
			kept = append(kept, *m)
		}
	}
	res.Messages = kept
	return res
}

func isBatchTransform(t Transform) bool { _, ok := t.(BatchTransform); return ok }

// applyEach runs per-message transforms c on each item, writing the
// payloads they change into out.
func (c Chain) applyEach(items []item, res *BatchResult, out *payloadArena, checked bool) []item {
	kept := items[:0]
	for k := range items {
		it := &items[k]
		s, keep, err := c.apply(&it.m, it.schema, out, checked)
		switch {
		case err != nil:
			res.Failed = append(res.Failed, Failure{it.from, err})
		case !keep:
			res.Filtered++
		default:
			it.schema = s
			kept = append(kept, *it)
		}
	}
	return kept
}

func applyBatchTransform(ctx context.Context, bt BatchTransform, items []item, res *BatchResult) []item {
	in := make([]connector.Message, len(items))
	for k := range items {
		in[k] = items[k].m
	}
	schema := items[0].schema
	outs, err := bt.ApplyBatch(ctx, in, schema)
	if err == nil && len(outs) != len(in) {
		err = fmt.Errorf("%d outcomes for %d messages", len(outs), len(in))
	}
	if err != nil {
		err = fmt.Errorf("transform %s: %w", bt.Name(), err)
		for _, it := range items {
			res.Failed = append(res.Failed, Failure{it.from, err})
		}
		return nil
	}
	next := make([]item, 0, len(items))
	for k, o := range outs {
		it := items[k]
		switch {
		case o.Err != nil:
			res.Failed = append(res.Failed, Failure{it.from, fmt.Errorf("transform %s: %w", bt.Name(), o.Err)})
		case o.Keep:
			next = append(next, it)
		case len(o.Out) == 0:
			res.Filtered++
		default:
			for _, m := range o.Out {
				next = append(next, item{m, it.from, it.schema})
			}
		}
	}
	return next
}

// Close releases what the chain's transforms hold (a wasm transform's
// compiled module and instances). A chain is not used after Close.
func (c Chain) Close() error {
	var errs []error
	for _, t := range c {
		if cl, ok := t.(io.Closer); ok {
			errs = append(errs, cl.Close())
		}
	}
	return errors.Join(errs...)
}

// Counter is what a transform added to one of its counters (wasm's
// counter_add) since the last Chain.TakeCounters.
type Counter struct {
	Transform string // the transform's table name: "wasm"
	Name      string
	Delta     int64
}

// counterKeeper is a transform with counters.
type counterKeeper interface {
	takeCounters() map[string]int64
}

// TakeCounters returns what the chain's transforms added to their
// counters since the last call, for the runtime's metrics.
func (c Chain) TakeCounters() []Counter {
	var out []Counter
	for _, t := range c {
		if k, ok := t.(counterKeeper); ok {
			for name, d := range k.takeCounters() {
				out = append(out, Counter{Transform: t.Name(), Name: name, Delta: d})
			}
		}
	}
	return out
}
