package host

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// PollWait is how long a plugin's Poll may wait for messages before it
// answers an empty batch; its deadline is PollWait plus call_timeout.
const PollWait = 2 * time.Second

// Source is a source plugin as a connector.Source and connector.Acker.
// When its process fails, Poll returns the failure (marked
// connector.Unavailable) and the runtime restarts the connector from its
// saved state, which starts a new process.
type Source struct {
	sup  *supervisor
	cfg  connector.Config
	json string

	mu      sync.Mutex
	pending map[*connector.Batch]polled // batches polled and not yet acknowledged
}

type polled struct {
	p   proc
	seq uint64
}

// NewSource is the connector.Source of a source plugin of m for cfg,
// whose plugin_config spec has checked. It starts no process: Open does.
func NewSource(m *plugin.Manifest, spec *connector.Spec, cfg connector.Config) (*Source, error) {
	js, err := ConfigJSON(spec, cfg.Plugin.Values)
	if err != nil {
		return nil, err
	}
	return &Source{sup: newSupervisor(m, logger(cfg), false), cfg: cfg, json: js, pending: map[*connector.Batch]polled{}}, nil
}

// Open starts the plugin's process and opens the source with state.
func (s *Source) Open(ctx context.Context, state []byte) error {
	p, err := s.sup.get(ctx)
	if err != nil {
		return err
	}
	req := &pluginpb.OpenRequest{Key: s.cfg.Key, Name: s.cfg.Name, ConfigJson: s.json, State: state, Verbose: s.cfg.Verbose}
	if state != nil && len(state) == 0 {
		req.State = []byte{}
	}
	return s.sup.call(ctx, p, "Open", s.sup.m.Limits.CallTimeout, func(ctx context.Context) error {
		resp, err := p.rpc().source.Open(ctx, req)
		if err != nil {
			return err
		}
		if resp.Error != nil {
			return appError{plugin.FailureError(resp.Error)}
		}
		return nil
	})
}

// Poll asks the plugin for the next batch, again while it answers empty
// batches, until ctx ends.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		p, err := s.sup.get(ctx)
		if err != nil {
			return nil, err
		}
		var resp *pluginpb.PollResponse
		err = s.sup.call(ctx, p, "Poll", PollWait+s.sup.m.Limits.CallTimeout, func(ctx context.Context) error {
			var err error
			resp, err = p.rpc().source.Poll(ctx, &pluginpb.PollRequest{MaxWaitMs: uint32(PollWait / time.Millisecond)})
			if err == nil {
				err = checkPoll(resp)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		s.sup.succeeded()
		switch {
		case resp.Error != nil:
			return nil, plugin.FailureError(resp.Error)
		case resp.EndOfInput:
			return nil, connector.ErrEndOfInput
		case resp.Batch == nil || (len(resp.Batch.Messages) == 0 && resp.Batch.State == nil):
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		msgs, _ := plugin.MessagesFromProto(resp.Batch.Messages) // checked by checkPoll
		b := &connector.Batch{Schema: connector.Schema(resp.Batch.Schema), Messages: msgs, State: resp.Batch.State}
		s.mu.Lock()
		s.pending[b] = polled{p, resp.Batch.Seq}
		s.mu.Unlock()
		return b, nil
	}
}

// checkPoll refuses answers no source may give.
func checkPoll(resp *pluginpb.PollResponse) error {
	if resp.Batch == nil {
		return nil
	}
	if err := plugin.CheckSchema(resp.Batch.Schema); err != nil {
		return garbagef("batch %d: %v", resp.Batch.Seq, err)
	}
	if _, err := plugin.MessagesFromProto(resp.Batch.Messages); err != nil {
		return garbagef("batch %d: %v", resp.Batch.Seq, err)
	}
	return nil
}

func (s *Source) take(b *connector.Batch, remove bool) (polled, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pb, ok := s.pending[b]
	if ok && remove {
		delete(s.pending, b)
	}
	return pb, ok
}

// Ack tells the process that read b that it is delivered.
func (s *Source) Ack(ctx context.Context, b *connector.Batch) error {
	pb, ok := s.take(b, true)
	if !ok {
		return fmt.Errorf("plugin %s: Ack of a batch it did not poll", s.sup.m.Name)
	}
	s.sup.mu.Lock()
	current := s.sup.proc == pb.p
	s.sup.mu.Unlock()
	if !current {
		return fmt.Errorf("plugin %s: the process that read the batch is gone; its Ack is not sent", s.sup.m.Name)
	}
	return s.sup.call(ctx, pb.p, "Ack", s.sup.m.Limits.CallTimeout, func(ctx context.Context) error {
		resp, err := pb.p.rpc().source.Ack(ctx, &pluginpb.AckRequest{Seq: pb.seq})
		if err != nil {
			return err
		}
		if resp.Error != nil {
			return appError{plugin.FailureError(resp.Error)}
		}
		return nil
	})
}

// Nack tells the process that read b that it will be sent again.
func (s *Source) Nack(ctx context.Context, b *connector.Batch, cause error) {
	pb, ok := s.take(b, false)
	if !ok {
		return
	}
	_ = s.sup.call(ctx, pb.p, "Nack", s.sup.m.Limits.CallTimeout, func(ctx context.Context) error {
		_, err := pb.p.rpc().source.Nack(ctx, &pluginpb.NackRequest{Seq: pb.seq, Cause: cause.Error()})
		return err
	})
}

// Close closes the source and ends its process.
func (s *Source) Close(ctx context.Context) error {
	return s.sup.close(ctx, func(ctx context.Context, p proc) error {
		resp, err := p.rpc().source.Close(ctx, &pluginpb.CloseRequest{})
		if err != nil {
			return err
		}
		if resp.Error != nil {
			return appError{plugin.FailureError(resp.Error)}
		}
		return nil
	})
}

// PID is the plugin's process id, or 0 when none runs (for tests and
// `ferry plugin test`).
func (s *Source) PID() int { return s.sup.pid() }

var (
	_ connector.Source = (*Source)(nil)
	_ connector.Acker  = (*Source)(nil)
)
