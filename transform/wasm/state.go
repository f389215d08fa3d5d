package wasm

import (
	"errors"
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

// MemState is a State in memory, bounded in size.
type MemState struct {
	mu    sync.Mutex
	m     map[string][]byte
	size  int
	limit int
}

// NewMemState is an empty MemState of at most limit bytes of keys and
// values (DefaultStateSize for 0).
func NewMemState(limit int) *MemState {
	if limit <= 0 {
		limit = DefaultStateSize
	}
	return &MemState{m: map[string][]byte{}, limit: limit}
}

// Get returns the value of key; the caller must not change it.
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
	old, had := s.m[string(key)]
	size := s.size + len(value) - len(old)
	if !had {
		size += len(key)
	}
	if size > s.limit {
		return ErrStateFull
	}
	s.m[string(key)] = append([]byte(nil), value...)
	s.size = size
	return nil
}

// Delete removes key.
func (s *MemState) Delete(key []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, had := s.m[string(key)]; had {
		s.size -= len(key) + len(old)
		delete(s.m, string(key))
	}
}

// Snapshot returns a copy of every key and value.
func (s *MemState) Snapshot() map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]byte, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}
