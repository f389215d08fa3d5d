package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	rtdebug "runtime/debug"
	"sync"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/ferryhq/ferry/lease"
)

// Status is a connector's state, as upstream's API reports it.
type Status string

// Statuses.
const (
	StatusStarting Status = "Starting"
	StatusRunning  Status = "Running"
	StatusStopping Status = "Stopping"
	StatusStopped  Status = "Stopped"
	StatusError    Status = "Error"
	// StatusStandby (Ferry, [scale_out]): a source waiting for its lease,
	// which another runtime holds.
	StatusStandby Status = "Standby"
)

// Restart backoff of a failing connector.
const (
	restartMin    = time.Second
	restartMax    = time.Minute
	restartStable = time.Minute // running this long resets the backoff
)

// PanicError is a panic inside a connector, recovered by the runtime.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("connector panicked: %v", e.Value) }

// safely runs fn and turns a panic into a *PanicError.
func safely(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: rtdebug.Stack()}
		}
	}()
	return fn()
}

// terminalError ends a connector without an automatic restart: its
// configuration is broken, or its error policy says stop. A restart through
// the API starts it again.
type terminalError struct{ error }

func (e terminalError) Unwrap() error { return e.error }

func terminal(err error) error { return terminalError{err} }

// managed is one configured connector and its supervisor.
type managed struct {
	rt      *Runtime
	kind    connector.Kind
	key     string
	log     *slog.Logger
	metrics *connectorMetrics
	tr      *tracer // nil when telemetry is off (tracing.go)

	restartMu sync.Mutex // serialises Restart and Stop of this connector

	mu        sync.Mutex
	cfg       *config.Connector // nil when its file failed to load
	status    Status
	lastErr   string
	lastErrAt time.Time
	restarts  int
	startedAt time.Time
	stop      context.CancelFunc         // ends the running supervisor
	done      chan struct{}              // closed when the supervisor returns
	lanes     map[*member]*laneSet       // a sink's streams delivered in lanes (sink_lanes.go)
	activity  connector.ActivityReporter // the running instance's, if it reports (activity.go)
	viewer    connector.Viewer           // the running sink's, if it answers lookups (views.go)
	lease     *lease.Lease               // a source's under [scale_out] (scaleout.go)
}

// Info is a connector as the management API shows it.
type Info struct {
	Kind      connector.Kind
	Key       string
	Name      string
	Path      string
	Version   uint64
	Enabled   bool
	Status    Status
	LastError string
	// LastErrorAt is zero when there was no error.
	LastErrorAt time.Time
	Restarts    int
	StartedAt   time.Time
	// Config is the active configuration; nil when it failed to load.
	Config *config.Connector
	// Lanes are a sink's streams delivered with ordering "key" or "none".
	Lanes []LaneStats
}

func (m *managed) info() Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := Info{Kind: m.kind, Key: m.key, Status: m.status, LastError: m.lastErr, LastErrorAt: m.lastErrAt,
		Restarts: m.restarts, StartedAt: m.startedAt, Config: m.cfg}
	for _, ls := range m.lanes { // m.mu before ls.mu: the lane sets never take m.mu while holding theirs
		i.Lanes = append(i.Lanes, ls.stats())
	}
	if m.cfg != nil {
		i.Name, i.Path, i.Version, i.Enabled = m.cfg.Name, m.cfg.Path, m.cfg.Version, m.cfg.Enabled
	}
	return i
}

func (m *managed) setStatus(s Status) {
	m.mu.Lock()
	prev := m.status
	m.status = s
	if s == StatusRunning {
		m.startedAt = time.Now()
	}
	lastErr := m.lastErr
	m.mu.Unlock()
	m.rt.statusChanged(m.kind, prev, s)
	m.rt.events.statusChanged(m.kind, m.key, prev, s, lastErr)
}

// fail records err as the connector's reason and logs it (with the stack
// for a panic).
func (m *managed) fail(err error) {
	m.metrics.errors.Inc()
	var p *PanicError
	if errors.As(err, &p) {
		m.log.Error("connector panicked", "panic", fmt.Sprint(p.Value), "stack", string(p.Stack))
	} else {
		m.log.Error("connector failed", "error", err)
	}
	m.mu.Lock()
	m.lastErr, m.lastErrAt = err.Error(), time.Now()
	m.mu.Unlock()
	m.setStatus(StatusError)
}

// note records err as the connector's last error without changing its
// status: the connector is still running and retrying.
func (m *managed) note(err error) {
	m.mu.Lock()
	m.lastErr, m.lastErrAt = err.Error(), time.Now()
	m.mu.Unlock()
}

// start launches the supervisor. The caller holds no lock.
func (m *managed) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	m.mu.Lock()
	m.stop, m.done = cancel, done
	m.mu.Unlock()
	m.setStatus(StatusStarting)
	go func() {
		defer close(done)
		m.supervise(ctx)
	}()
}

// halt stops the supervisor and waits for the pipeline to drain, or for
// ctx to end.
func (m *managed) halt(ctx context.Context) error {
	m.mu.Lock()
	stop, done := m.stop, m.done
	m.mu.Unlock()
	if stop == nil {
		return nil
	}
	if m.info().Status != StatusError {
		m.setStatus(StatusStopping)
	}
	stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s %s: stop: %w", m.kind, m.key, ctx.Err())
	}
}

// supervise runs the connector until ctx ends, restarting it with capped
// exponential backoff after failures.
func (m *managed) supervise(ctx context.Context) {
	retry := backoff.Backoff{Min: restartMin, Max: restartMax}
	for {
		started := time.Now()
		err := m.runOnce(ctx)
		switch {
		case ctx.Err() != nil:
			if m.info().Status != StatusError || err == nil {
				m.setStatus(StatusStopped)
			}
			return
		case errors.Is(err, connector.ErrEndOfInput):
			m.log.Info("source reached the end of its input")
			m.setStatus(StatusStopped)
			return
		case err == nil:
			m.setStatus(StatusStopped)
			return
		case errors.Is(err, errLeaseLost):
			continue // another runtime holds it now: wait for it again
		}
		m.fail(err)
		var t terminalError
		if errors.As(err, &t) {
			m.log.Warn("connector stopped; restart it through the API once the cause is fixed")
			return
		}
		if time.Since(started) > restartStable {
			retry.Reset()
		}
		d := retry.Next()
		m.log.Info("restarting connector", "in", d)
		if backoff.Sleep(ctx, d) != nil {
			return
		}
		m.mu.Lock()
		m.restarts++
		m.mu.Unlock()
		m.setStatus(StatusStarting)
	}
}

// runOnce builds the connector's pipeline and runs it until ctx ends or it
// fails.
func (m *managed) runOnce(ctx context.Context) error {
	m.mu.Lock()
	cfg := m.cfg
	m.mu.Unlock()
	if cfg == nil {
		return terminal(errors.New("connector configuration did not load"))
	}
	switch m.kind {
	case connector.KindSource:
		if m.rt.cfg.ScaleOut.Enabled {
			return m.runLeased(ctx, func(ctx context.Context) error { return m.runSource(ctx, cfg) })
		}
		return m.runSource(ctx, cfg)
	default:
		return m.runSink(ctx, cfg)
	}
}
