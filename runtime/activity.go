package runtime

import (
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/connector"
)

// ErrNoActivity is Activity's error for a connector that keeps no record
// of its work, or is not running.
var ErrNoActivity = errors.New("the connector keeps no record of its recent work, or is not running")

// setActivity records the running instance c (nil when it stops) if it
// reports its activity.
func (m *managed) setActivity(c any) {
	a, _ := c.(connector.ActivityReporter)
	m.mu.Lock()
	m.activity = a
	m.mu.Unlock()
}

// Activity returns what a running connector reports of its recent work
// (connector.ActivityReporter: the exec sink's last runs, which ferry hook
// logs shows); ErrNoActivity when it reports none or is not running.
func (r *Runtime) Activity(kind connector.Kind, key string) (any, error) {
	m, err := r.get(kind, key)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	a := m.activity
	m.mu.Unlock()
	if a == nil {
		return nil, fmt.Errorf("%s %q: %w", kind, key, ErrNoActivity)
	}
	return a.Activity(), nil
}
