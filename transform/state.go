package transform

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/transform/wasm"
)

// Keyed state: a wasm transform keeps a keyed state (state_get, state_put)
// that the runtime checkpoints with the batch. The runtime begins a Tx
// for each batch (Chain.Begin), applies the chain in it (Tx.Context), and
// commits it once the batch is delivered (a source's batch in Iggy with
// its state saved, a sink's batch written), or rolls it back when the
// batch is not: a batch read again does not count twice. The committed
// state of the chain is saved with the batch's position (MarshalState)
// and loaded when the connector starts again (UnmarshalState).

// keeper is a transform with a keyed state.
type keeper interface {
	keyedState() *wasm.MemState
}

// Tx is one batch's changes to the keyed states of a chain's transforms.
// A nil *Tx is a chain without state: its methods do nothing.
type Tx struct {
	parts map[keeper]*wasm.Tx
}

// Begin starts the keyed-state transaction of a batch; nil when no
// transform of c keeps state.
func (c Chain) Begin() *Tx {
	var t *Tx
	for _, s := range c {
		if k, ok := s.(keeper); ok {
			if t == nil {
				t = &Tx{parts: map[keeper]*wasm.Tx{}}
			}
			t.parts[k] = k.keyedState().Begin()
		}
	}
	return t
}

type txKeyType struct{}

// Context is ctx for applying the chain in t (ApplyBatch).
func (t *Tx) Context(ctx context.Context) context.Context {
	if t == nil {
		return ctx
	}
	return context.WithValue(ctx, txKeyType{}, t)
}

// stateFor is the state k's calls use under ctx: its part of the batch's
// Tx, or nil for its own state, changed at once.
func stateFor(ctx context.Context, k keeper) wasm.State {
	if t, ok := ctx.Value(txKeyType{}).(*Tx); ok {
		if p := t.parts[k]; p != nil {
			return p
		}
	}
	return nil
}

// Commit keeps the batch's changes.
func (t *Tx) Commit() error {
	if t == nil {
		return nil
	}
	var errs []error
	for _, p := range t.parts {
		errs = append(errs, p.Commit())
	}
	return errors.Join(errs...)
}

// Rollback drops the batch's changes.
func (t *Tx) Rollback() {
	if t == nil {
		return
	}
	for _, p := range t.parts {
		p.Rollback()
	}
}

// KeepsState reports whether a transform of c keeps a keyed state.
func (c Chain) KeepsState() bool {
	for _, s := range c {
		if _, ok := s.(keeper); ok {
			return true
		}
	}
	return false
}

// chainStateMagic starts a saved chain state (version 1).
const chainStateMagic = "FCS1"

// MarshalState is the committed keyed state of every transform of c that
// keeps one: "FCS1", then per such transform its position in the chain,
// its name and its state (wasm.MemState.MarshalBinary), each a uvarint
// or a uvarint length and bytes.
func (c Chain) MarshalState() ([]byte, error) {
	b := []byte(chainStateMagic)
	for i, s := range c {
		k, ok := s.(keeper)
		if !ok {
			continue
		}
		st, err := k.keyedState().MarshalBinary()
		if err != nil {
			return nil, err
		}
		b = binary.AppendUvarint(b, uint64(i))
		b = binary.AppendUvarint(b, uint64(len(s.Name())))
		b = append(b, s.Name()...)
		b = binary.AppendUvarint(b, uint64(len(st)))
		b = append(b, st...)
	}
	return b, nil
}

// UnmarshalState loads a state MarshalState saved into c's transforms. A
// saved state belongs to the transform at its position with its name; one
// whose transform is gone (the connector's transforms changed) is left
// out, and that transform starts empty. Bytes that are not a saved state
// are an error.
func (c Chain) UnmarshalState(b []byte) error {
	if len(b) < len(chainStateMagic) || string(b[:len(chainStateMagic)]) != chainStateMagic {
		return errors.New("transforms' state: not a saved state (no FCS1 header)")
	}
	r := b[len(chainStateMagic):]
	uvarint := func(what string) (uint64, error) {
		n, k := binary.Uvarint(r)
		if k <= 0 {
			return 0, fmt.Errorf("transforms' state: a bad %s at byte %d", what, len(b)-len(r))
		}
		r = r[k:]
		return n, nil
	}
	chunk := func(what string) ([]byte, error) {
		n, err := uvarint(what + " length")
		if err != nil {
			return nil, err
		}
		if n > uint64(len(r)) {
			return nil, fmt.Errorf("transforms' state: a %s of %d bytes, %d left", what, n, len(r))
		}
		v := r[:n]
		r = r[n:]
		return v, nil
	}
	for len(r) > 0 {
		i, err := uvarint("position")
		if err != nil {
			return err
		}
		name, err := chunk("name")
		if err != nil {
			return err
		}
		st, err := chunk("state")
		if err != nil {
			return err
		}
		if i >= uint64(len(c)) || c[i].Name() != string(name) {
			continue
		}
		if k, ok := c[i].(keeper); ok {
			if err := k.keyedState().UnmarshalBinary(st); err != nil {
				return fmt.Errorf("transforms' state of transform %d (%s): %w", i, name, err)
			}
		}
	}
	return nil
}
