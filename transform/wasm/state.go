package wasm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Limits of the keyed state a module keeps through state_put.
const (
	MaxStateKey   = 1 << 10
	MaxStateValue = 1 << 20
	// DefaultStateSize is the default bound of a MemState: keys and values
	// together.
	DefaultStateSize = 64 << 20
)

// ErrStateFull is the error of a put beyond a state's size bound.
var ErrStateFull = errors.New("keyed state is full")

// State is the keyed state behind the host functions state_get,
// state_put and state_delete. Implementations are safe for concurrent
// use: instances of one module share it.
type State interface {
	Get(key []byte) ([]byte, bool)
	Put(key, value []byte) error
	Delete(key []byte)
}

// The state a call sees: the module's own (Config.State), or the one the
// caller puts in the call's context with WithState (a batch's Tx).
type stateKeyType struct{}

// WithState makes the calls made with ctx use st instead of the module's
// state: the runtime passes each batch's Tx.
func WithState(ctx context.Context, st State) context.Context {
	return context.WithValue(ctx, stateKeyType{}, st)
}

// entry is a change to one key; deleted, or set to v.
type entry struct {
	v       []byte
	deleted bool
}

// overlay is one call's changes over a State, applied only when the call
// succeeds: a module that traps halfway leaves no change behind.
type overlay struct {
	base State
	w    map[string]entry
	size int // bytes of keys and values put, bounded by DefaultStateSize
}

func (o *overlay) Get(key []byte) ([]byte, bool) {
	if e, ok := o.w[string(key)]; ok {
		return e.v, !e.deleted
	}
	return o.base.Get(key)
}

func (o *overlay) Put(key, value []byte) error {
	if o.w == nil {
		o.w = map[string]entry{}
	}
	if o.size += len(key) + len(value); o.size > DefaultStateSize {
		return ErrStateFull
	}
	o.w[string(key)] = entry{v: append([]byte(nil), value...)}
	return nil
}

func (o *overlay) Delete(key []byte) {
	if o.w == nil {
		o.w = map[string]entry{}
	}
	o.w[string(key)] = entry{deleted: true}
}

// apply makes the changes in base.
func (o *overlay) apply() error {
	for k, e := range o.w {
		if e.deleted {
			o.base.Delete([]byte(k))
		} else if err := o.base.Put([]byte(k), e.v); err != nil {
			return err
		}
	}
	return nil
}

// MemState is a keyed state in memory, bounded in size, whose changes can
// be made in transactions (Begin): a batch's changes are kept only when the
// batch is committed, and the committed state is saved and loaded whole
// (MarshalBinary, UnmarshalBinary) with the batch's position. Its own Get,
// Put and Delete see and change the committed state at once.
type MemState struct {
	mu    sync.Mutex
	m     map[string][]byte
	size  int
	limit int
	open  []*Tx // begun, neither committed nor rolled back, in order
}

// NewMemState is an empty MemState of at most limit bytes of keys and
// values (DefaultStateSize for 0).
func NewMemState(limit int) *MemState {
	if limit <= 0 {
		limit = DefaultStateSize
	}
	return &MemState{m: map[string][]byte{}, limit: limit}
}

// Get returns the committed value of key; the caller must not change it.
func (s *MemState) Get(key []byte) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[string(key)]
	return v, ok
}

// Put sets key to a copy of value.
func (s *MemState) Put(key, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.put(string(key), append([]byte(nil), value...))
}

func (s *MemState) put(key string, value []byte) error {
	old, had := s.m[key]
	size := s.size + len(value) - len(old)
	if !had {
		size += len(key)
	}
	if size > s.limit {
		return ErrStateFull
	}
	s.m[key] = value
	s.size = size
	return nil
}

// Delete removes key.
func (s *MemState) Delete(key []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delete(string(key))
}

func (s *MemState) delete(key string) {
	if old, had := s.m[key]; had {
		s.size -= len(key) + len(old)
		delete(s.m, key)
	}
}

// Snapshot returns a copy of every committed key and value.
func (s *MemState) Snapshot() map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]byte, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

// Begin starts a transaction: its changes are seen by it and by the
// transactions begun after it, and kept when it commits.
func (s *MemState) Begin() *Tx {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &Tx{s: s, w: map[string]entry{}}
	s.open = append(s.open, t)
	return t
}

// Tx is a transaction on a MemState: one batch's changes.
type Tx struct {
	s *MemState
	w map[string]entry
}

// Get sees the transaction's own changes, then those of the transactions
// begun before it that are still open, then the committed state.
func (t *Tx) Get(key []byte) ([]byte, bool) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if e, ok := t.w[string(key)]; ok {
		return e.v, !e.deleted
	}
	if i := slices.Index(t.s.open, t); i > 0 {
		for j := i - 1; j >= 0; j-- {
			if e, ok := t.s.open[j].w[string(key)]; ok {
				return e.v, !e.deleted
			}
		}
	}
	v, ok := t.s.m[string(key)]
	return v, ok
}

// Put sets key in the transaction. The size bound is checked against the
// committed state and this change.
func (t *Tx) Put(key, value []byte) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.s.size+len(key)+len(value) > t.s.limit {
		return ErrStateFull
	}
	t.w[string(key)] = entry{v: append([]byte(nil), value...)}
	return nil
}

// Delete removes key in the transaction.
func (t *Tx) Delete(key []byte) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.w[string(key)] = entry{deleted: true}
}

// Commit makes the transaction's changes part of the committed state. A
// change that would pass the size bound is left out and reported.
func (t *Tx) Commit() error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if !t.end() {
		return nil
	}
	var err error
	for k, e := range t.w {
		if e.deleted {
			t.s.delete(k)
		} else if perr := t.s.put(k, e.v); perr != nil {
			err = perr
		}
	}
	return err
}

// Rollback drops the transaction's changes.
func (t *Tx) Rollback() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.end()
}

// end takes t out of the open transactions; false when it already was.
func (t *Tx) end() bool {
	i := slices.Index(t.s.open, t)
	if i < 0 {
		return false
	}
	t.s.open = slices.Delete(t.s.open, i, i+1)
	return true
}

// stateMagic starts a saved MemState (version 1).
const stateMagic = "FWS1"

// MarshalBinary is the committed state: "FWS1", the count of keys, then
// each key and value (in key order), each as a uvarint length and bytes.
func (s *MemState) MarshalBinary() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := make([]byte, 0, len(stateMagic)+binary.MaxVarintLen64*(1+2*len(keys))+s.size)
	b = append(b, stateMagic...)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(s.m[k])))
		b = append(b, s.m[k]...)
	}
	return b, nil
}

// UnmarshalBinary replaces the committed state with a saved one and drops
// the open transactions. Bytes that are not a saved state (truncated,
// oversized, a key twice) are an error and change nothing.
func (s *MemState) UnmarshalBinary(b []byte) error {
	if len(b) < len(stateMagic) || string(b[:len(stateMagic)]) != stateMagic {
		return errors.New("wasm state: not a saved keyed state (no FWS1 header)")
	}
	r := b[len(stateMagic):]
	next := func(what string, max uint64) ([]byte, error) {
		n, k := binary.Uvarint(r)
		if k <= 0 || n > uint64(len(r)-k) || n > max {
			return nil, fmt.Errorf("wasm state: a bad %s length at byte %d", what, len(b)-len(r))
		}
		v := r[k : k+int(n)]
		r = r[k+int(n):]
		return v, nil
	}
	count, k := binary.Uvarint(r)
	if k <= 0 || count > uint64(len(r)) {
		return errors.New("wasm state: a bad key count")
	}
	r = r[k:]
	m := make(map[string][]byte, count)
	size := 0
	for i := uint64(0); i < count; i++ {
		key, err := next("key", MaxStateKey)
		if err != nil {
			return err
		}
		val, err := next("value", MaxStateValue)
		if err != nil {
			return err
		}
		if _, dup := m[string(key)]; dup {
			return fmt.Errorf("wasm state: key %q twice", key)
		}
		m[string(key)] = append([]byte(nil), val...)
		size += len(key) + len(val)
	}
	if len(r) != 0 {
		return fmt.Errorf("wasm state: %d bytes after the last key", len(r))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if size > s.limit {
		return fmt.Errorf("wasm state: %d bytes saved, over the bound of %d", size, s.limit)
	}
	s.m, s.size, s.open = m, size, nil
	return nil
}
