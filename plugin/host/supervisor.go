package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/ferryhq/ferry/plugin"
)

// supervisor owns the plugin process of one connector: it starts it,
// bounds each call by the manifest's call_timeout, and kills the process
// when it fails — exits, misses a deadline, or answers what the contract
// does not allow. A sink's supervisor starts a new process (and opens it
// again) for the next call, after the manifest's restart backoff; a
// source's does not, since the runtime restarts a failed source from its
// saved state.
type supervisor struct {
	m       *plugin.Manifest
	log     *slog.Logger
	respawn bool
	// open opens a freshly started process (a sink's Open call).
	open func(ctx context.Context, p proc) error

	startMu   sync.Mutex // serialises starts; taken before mu
	mu        sync.Mutex
	proc      proc
	started   bool // a process was started once
	closed    bool
	retry     backoff.Backoff
	notBefore time.Time // the next start waits until then
	lastFail  error
}

func newSupervisor(m *plugin.Manifest, log *slog.Logger, respawn bool) *supervisor {
	return &supervisor{m: m, log: log, respawn: respawn,
		retry: backoff.Backoff{Min: m.Limits.RestartBackoff, Max: m.Limits.MaxRestartBackoff}}
}

// errClosed is returned by calls after Close.
var errClosed = errors.New("the plugin connector is closed")

// get returns the running process, starting one when there is none (and
// the supervisor may), after the restart backoff.
func (s *supervisor) get(ctx context.Context) (proc, error) {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	s.mu.Lock()
	p, closed, started, wait, last := s.proc, s.closed, s.started, time.Until(s.notBefore), s.lastFail
	s.mu.Unlock()
	switch {
	case closed:
		return nil, errClosed
	case p != nil:
		return p, nil
	case started && !s.respawn:
		return nil, connector.Unavailable(fmt.Errorf("plugin %s: its process is gone: %w", s.m.Name, last))
	}
	if wait > 0 {
		if err := backoff.Sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
	if started {
		s.log.Info("starting the plugin's process again", "plugin", s.m.Name, "after", last)
	}
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	p, err := start(s.m, s.log)
	if err == nil && s.open != nil {
		if err = s.call(ctx, p, "Open", s.m.Limits.CallTimeout, func(ctx context.Context) error { return s.open(ctx, p) }); err != nil {
			p.kill("its Open failed")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed(err)
		if connector.IsUnavailable(err) || ctx.Err() != nil {
			return nil, err
		}
		return nil, connector.Unavailable(err)
	}
	if s.closed {
		p.kill("the connector was closed")
		return nil, errClosed
	}
	s.proc = p
	return p, nil
}

// failed schedules the next start after a failure.
func (s *supervisor) failed(err error) {
	s.lastFail = err
	s.notBefore = time.Now().Add(s.retry.Next())
}

// broken kills p after a failure of what it did, and returns the error
// the call reports: marked Unavailable, so that a sink's batch is kept
// (not dead-lettered) and delivered again.
func (s *supervisor) broken(p proc, reason string) error {
	p.kill(reason)
	err := fmt.Errorf("plugin %s: %s; its process was killed", s.m.Name, reason)
	if s.respawn {
		err = fmt.Errorf("%w and is started again", err)
	}
	s.mu.Lock()
	if s.proc == p {
		s.proc = nil
		s.failed(err)
	}
	s.mu.Unlock()
	s.log.Warn("plugin process failed", "plugin", s.m.Name, "error", err)
	return connector.Unavailable(err)
}

// call runs one call on p within timeout. A call that fails because of
// the process — it exited, it did not answer in time, the connection
// broke — kills it (broken). A call whose own ctx ended returns ctx's
// error and leaves the process alone.
func (s *supervisor) call(ctx context.Context, p proc, what string, timeout time.Duration, fn func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := fn(cctx)
	if err == nil {
		return nil
	}
	var app appError
	if errors.As(err, &app) {
		return app.error // the plugin answered, with its own error
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		// The caller's deadline passed and gRPC saw it before ctx's timer
		// fired (under load the timer lags): the caller's time ran out,
		// not the plugin's.
		return context.DeadlineExceeded
	}
	select {
	case <-p.dead():
		return s.broken(p, fmt.Sprintf("%s failed: %s", what, p.why()))
	default:
	}
	var g garbage
	if errors.As(err, &g) { // what it said, even if it exited since
		return s.broken(p, fmt.Sprintf("%s answered what the protocol does not allow: %v", what, g.error))
	}
	if exit := p.exited(); exit != "" {
		return s.broken(p, fmt.Sprintf("its process exited (%s) during %s%s", exit, what, p.lastWords()))
	}
	if errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return s.broken(p, fmt.Sprintf("%s was not answered within call_timeout (%s): the plugin hangs", what, timeout))
	}
	if st, ok := status.FromError(err); ok {
		// Give an exit a moment to be seen: a broken connection is most
		// often a process that just died.
		time.Sleep(50 * time.Millisecond)
		if exit := p.exited(); exit != "" {
			return s.broken(p, fmt.Sprintf("its process exited (%s) during %s%s", exit, what, p.lastWords()))
		}
		return s.broken(p, fmt.Sprintf("%s failed: %s: %s", what, st.Code(), oneLine(st.Message())))
	}
	return s.broken(p, fmt.Sprintf("%s failed: %v", what, err))
}

// succeeded resets the restart backoff after a call went through.
func (s *supervisor) succeeded() {
	s.mu.Lock()
	s.retry.Reset()
	s.mu.Unlock()
}

// close ends the process: closeFn (the Close call) within the call
// timeout, then go-plugin's shutdown.
func (s *supervisor) close(ctx context.Context, closeFn func(context.Context, proc) error) error {
	s.mu.Lock()
	p := s.proc
	s.proc, s.closed = nil, true
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	var err error
	if closeFn != nil {
		err = s.call(ctx, p, "Close", s.m.Limits.CallTimeout, func(ctx context.Context) error { return closeFn(ctx, p) })
	}
	p.shutdown()
	return err
}

// appError is an error the plugin answered (a Failure field), as opposed
// to a failure of the call.
type appError struct{ error }

func (e appError) Unwrap() error { return e.error }

// garbage is an answer the protocol does not allow.
type garbage struct{ error }

func (e garbage) Unwrap() error { return e.error }

func garbagef(format string, args ...any) error { return garbage{fmt.Errorf(format, args...)} }

// pid is the running process's id, or 0.
func (s *supervisor) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid()
}

// logger is the connector's logger, or one that discards.
func logger(cfg connector.Config) *slog.Logger {
	if cfg.Logger != nil {
		return cfg.Logger
	}
	return slog.New(slog.DiscardHandler)
}
