package runtime

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/connector"
)

// ErrNoView is View's error for a sink that keeps no keyed state
// (connector.Viewer), or is not running.
var ErrNoView = errors.New("the sink answers no point lookups (it is no derive sink), or is not running")

// ErrNoKey is View's error for a key the sink's state has no value for.
var ErrNoKey = errors.New("no value for this key")

// setViewer records the running sink c (nil when it stops) if it answers
// point lookups.
func (m *managed) setViewer(c any) {
	v, _ := c.(connector.Viewer)
	m.mu.Lock()
	m.viewer = v
	m.mu.Unlock()
}

// View answers a point lookup from a running sink's state
// (connector.Viewer: the derive sink's groups): ErrNotFound for an
// unknown sink, ErrNoView when it keeps no such state or is not running,
// ErrNoKey when the key has no value.
func (r *Runtime) View(key, lookup string) (json.RawMessage, error) {
	m, err := r.get(connector.KindSink, key)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	v := m.viewer
	m.mu.Unlock()
	if v == nil {
		return nil, fmt.Errorf("sink %q: %w", key, ErrNoView)
	}
	val, ok := v.View(lookup)
	if !ok {
		return nil, fmt.Errorf("sink %q, key %q: %w", key, lookup, ErrNoKey)
	}
	return val, nil
}
