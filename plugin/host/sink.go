package host

import (
	"context"
	"errors"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// Sink is a sink plugin as a connector.Sink. When its process fails,
// Consume returns the failure marked connector.Unavailable, so nothing is
// dead-lettered and nothing committed; the runtime retries the batch, and
// the retry starts a new process (after the manifest's restart backoff),
// opens it and delivers the batch again. After the stream's max_retries
// the runtime restarts the connector with its own backoff.
type Sink struct {
	sup  *supervisor
	cfg  connector.Config
	json string
}

// NewSink is the connector.Sink of a sink plugin of m for cfg, whose
// plugin_config spec has checked. It starts no process: Open does.
func NewSink(m *plugin.Manifest, spec *connector.Spec, cfg connector.Config) (*Sink, error) {
	js, err := ConfigJSON(spec, cfg.Plugin.Values)
	if err != nil {
		return nil, err
	}
	s := &Sink{cfg: cfg, json: js}
	s.sup = newSupervisor(m, logger(cfg), true)
	s.sup.open = func(ctx context.Context, p proc) error {
		resp, err := p.rpc().sink.Open(ctx, &pluginpb.OpenRequest{Key: cfg.Key, Name: cfg.Name, ConfigJson: js, Verbose: cfg.Verbose})
		if err != nil {
			return err
		}
		if resp.Error != nil {
			return appError{plugin.FailureError(resp.Error)}
		}
		return nil
	}
	return s, nil
}

// Open starts the plugin's process and opens the sink.
func (s *Sink) Open(ctx context.Context) error {
	_, err := s.sup.get(ctx)
	return err
}

// Consume sends the batch to the plugin and maps its answer to the
// connector.Sink contract.
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	p, err := s.sup.get(ctx)
	if err != nil {
		return err
	}
	req := &pluginpb.ConsumeRequest{Stream: b.Stream, Topic: b.Topic, Partition: b.Partition, Schema: string(b.Schema),
		Messages: plugin.MessagesToProto(b.Messages)}
	var resp *pluginpb.ConsumeResponse
	err = s.sup.call(ctx, p, "Consume", s.sup.m.Limits.CallTimeout, func(ctx context.Context) error {
		var err error
		resp, err = p.rpc().sink.Consume(ctx, req)
		if err == nil {
			err = checkConsume(resp, len(b.Messages))
		}
		return err
	})
	if err != nil {
		return err
	}
	s.sup.succeeded()
	if resp.Error != nil {
		return plugin.FailureError(resp.Error)
	}
	if len(resp.Failures) == 0 {
		return nil
	}
	per := connector.MessageErrors{}
	for _, f := range resp.Failures {
		per[int(f.Index)] = plugin.FailureError(&pluginpb.Failure{Kind: f.Kind, Reason: f.Reason})
	}
	return per
}

// checkConsume refuses answers no sink may give: failures of messages the
// batch does not have, or twice the same message.
func checkConsume(resp *pluginpb.ConsumeResponse, n int) error {
	seen := make(map[uint32]bool, len(resp.Failures))
	for _, f := range resp.Failures {
		if int64(f.Index) >= int64(n) {
			return garbagef("a failure of message %d of a batch of %d", f.Index, n)
		}
		if seen[f.Index] {
			return garbagef("two failures of message %d", f.Index)
		}
		seen[f.Index] = true
	}
	if resp.Error != nil && len(resp.Failures) > 0 {
		return garbage{errors.New("both an error of the whole batch and failures of messages")}
	}
	return nil
}

// Close closes the sink and ends its process.
func (s *Sink) Close(ctx context.Context) error {
	return s.sup.close(ctx, func(ctx context.Context, p proc) error {
		resp, err := p.rpc().sink.Close(ctx, &pluginpb.CloseRequest{})
		if err != nil {
			return err
		}
		if resp.Error != nil {
			return appError{plugin.FailureError(resp.Error)}
		}
		return nil
	})
}

// PID is the plugin's process id, or 0 when none runs.
func (s *Sink) PID() int { return s.sup.pid() }

var _ connector.Sink = (*Sink)(nil)
