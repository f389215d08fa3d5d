package runtime

// Scale-out ([scale_out], Ferry extension): several runtimes of one
// configuration against one Iggy server. Each source runs where it holds
// its lease (package lease), with its state in Iggy (state/iggystate)
// fenced by the lease's epoch; the other runtimes stand by and take it
// over when the holder stops or dies. Sinks need nothing: their consumer
// groups share the partitions.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ferryhq/ferry/lease"
	"github.com/ferryhq/ferry/state/iggystate"
)

// openIggyState opens state.storage = "iggy" on a connection of its own
// (Saves must not queue behind the connectors' sends).
func (r *Runtime) openIggyState(ctx context.Context) error {
	c, err := r.dial(ctx, "state")
	if err != nil {
		return fmt.Errorf("runtime: state store: connect to iggy: %w", err)
	}
	s, err := iggystate.Open(ctx, c, r.cfg.State.Iggy.Stream, r.cfg.State.Iggy.Topic)
	if err != nil {
		c.Close()
		return fmt.Errorf("runtime: state store in %s/%s: %w", r.cfg.State.Iggy.Stream, r.cfg.State.Iggy.Topic, r.explainDenied(err, actCreateTopic, r.cfg.State.Iggy.Stream, r.cfg.State.Iggy.Topic))
	}
	r.states, r.stateClient = s, c
	return nil
}

// openLeases opens the connection the sources' leases are kept on (a
// renewal every renew_interval per lease, never behind a big send).
func (r *Runtime) openLeases(ctx context.Context) error {
	c, err := r.dial(ctx, "leases")
	if err != nil {
		return fmt.Errorf("runtime: scale_out: connect to iggy: %w", err)
	}
	r.leaseClient = c
	return nil
}

// runLeased runs source m while it holds its lease: it waits (status
// Standby) until it does, fences the source's state at the lease's epoch,
// and stops the source as soon as the lease is lost, which is not a
// failure of the source: the supervisor starts waiting again.
func (m *managed) runLeased(ctx context.Context, run func(context.Context) error) error {
	r := m.rt
	if m.lease == nil {
		host, _ := os.Hostname()
		so := r.cfg.ScaleOut
		l, err := lease.New(r.leaseClient, m.key, lease.WithStream(so.LeaseStream),
			lease.WithHolder(fmt.Sprintf("%s/%d", host, os.Getpid())), lease.WithRenewInterval(so.RenewInterval),
			lease.WithHoldTimeout(so.HoldTimeout), lease.WithTakeoverDelay(so.TakeoverDelay))
		if err != nil {
			return terminal(fmt.Errorf("scale_out: lease of source %s: %w", m.key, err))
		}
		m.lease = l
	}
	m.setStatus(StatusStandby)
	epoch, lost, err := m.lease.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("scale_out: acquire the lease of source %s: %w", m.key, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := m.lease.Release(rctx); err != nil {
			m.log.Warn("releasing the source's lease failed; another runtime takes it over after the takeover delay", "error", err)
		}
	}()
	m.log.Info("holding the source's lease", "epoch", epoch)
	if s, ok := r.states.(*iggystate.Store); ok {
		if err := s.Claim(ctx, m.key, epoch); err != nil {
			return fmt.Errorf("scale_out: fence the state of source %s at epoch %d: %w", m.key, epoch, err)
		}
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-lost:
			cancel(m.lease.LostReason())
		case <-sctx.Done():
		}
	}()
	err = run(sctx)
	if cause := context.Cause(sctx); ctx.Err() == nil && cause != nil && errors.Is(cause, lease.ErrLost) {
		m.log.Warn("the source's lease was lost; standing by", "reason", cause)
		return errLeaseLost
	}
	return err
}

// errLeaseLost ends a leased source's run when its lease moved away: the
// supervisor waits for the lease again at once (no backoff, no Error).
var errLeaseLost = errors.New("the source's lease was lost")

// fenced reports whether a state save was refused because a newer
// holder of the source's lease wrote its state: the source must stop.
func fenced(err error) bool { return errors.Is(err, iggystate.ErrFenced) }
