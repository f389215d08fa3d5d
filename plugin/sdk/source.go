package sdk

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// sourceServer serves a connector.Source. One goroutine (poller) calls
// its Poll, one call per Poll request of Ferry, with a context that ends
// at Close; a request that waits longer than its max_wait is answered
// with an empty batch, and the next request takes the result of the
// same call.
type sourceServer struct {
	pluginpb.UnimplementedSourceServer
	info connector.Info

	mu      sync.Mutex // guards what follows; pollMu serialises Poll requests
	src     connector.Source
	acker   connector.Acker
	stop    context.CancelFunc
	want    chan struct{}
	results chan pollResult
	done    chan struct{} // closed when the poller returns
	pending map[uint64]*connector.Batch
	seq     uint64
	ended   bool

	pollMu      sync.Mutex
	outstanding bool // the poller was asked and has not answered yet
}

type pollResult struct {
	b   *connector.Batch
	err error
}

func (s *sourceServer) Open(ctx context.Context, req *pluginpb.OpenRequest) (*pluginpb.OpenResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.src != nil {
		return nil, status.Error(codes.FailedPrecondition, "the source is already open")
	}
	cfg, err := config(s.info, req)
	if err != nil {
		return &pluginpb.OpenResponse{Error: plugin.FailureOf(connector.Permanent(err))}, nil
	}
	src, err := safely(func() (connector.Source, error) { return s.info.NewSource(cfg) })
	if err != nil {
		return &pluginpb.OpenResponse{Error: plugin.FailureOf(err)}, nil
	}
	var state []byte
	if req.State != nil {
		state = req.State
		if state == nil {
			state = []byte{}
		}
	}
	if _, err := safely(func() (struct{}, error) { return struct{}{}, src.Open(ctx, state) }); err != nil {
		return &pluginpb.OpenResponse{Error: plugin.FailureOf(err)}, nil
	}
	pollCtx, stop := context.WithCancel(context.Background())
	s.src, s.stop = src, stop
	s.acker, _ = src.(connector.Acker)
	s.want, s.results, s.done = make(chan struct{}), make(chan pollResult, 1), make(chan struct{})
	s.pending = map[uint64]*connector.Batch{}
	go s.poller(pollCtx)
	return &pluginpb.OpenResponse{}, nil
}

func (s *sourceServer) poller(ctx context.Context) {
	defer close(s.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.want:
		}
		b, err := safely(func() (*connector.Batch, error) { return s.src.Poll(ctx) })
		s.results <- pollResult{b, err}
		if ctx.Err() != nil {
			return
		}
	}
}

func (s *sourceServer) Poll(ctx context.Context, req *pluginpb.PollRequest) (*pluginpb.PollResponse, error) {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	s.mu.Lock()
	src, ended := s.src, s.ended
	s.mu.Unlock()
	if src == nil {
		return nil, status.Error(codes.FailedPrecondition, "Poll before Open")
	}
	if ended {
		return &pluginpb.PollResponse{EndOfInput: true}, nil
	}
	if !s.outstanding {
		select {
		case s.want <- struct{}{}:
			s.outstanding = true
		case <-s.done:
			return nil, status.Error(codes.FailedPrecondition, "the source is closed")
		}
	}
	wait := time.Duration(req.MaxWaitMs) * time.Millisecond
	if wait <= 0 {
		wait = time.Second
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var r pollResult
	select {
	case r = <-s.results:
		s.outstanding = false
	case <-timer.C:
		return &pluginpb.PollResponse{Batch: &pluginpb.Batch{}}, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	switch {
	case errors.Is(r.err, connector.ErrEndOfInput):
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
		return &pluginpb.PollResponse{EndOfInput: true}, nil
	case r.err != nil:
		return &pluginpb.PollResponse{Error: plugin.FailureOf(r.err)}, nil
	case r.b == nil:
		return &pluginpb.PollResponse{Batch: &pluginpb.Batch{}}, nil
	}
	s.mu.Lock()
	s.seq++
	seq := s.seq
	if s.acker != nil {
		s.pending[seq] = r.b
	}
	s.mu.Unlock()
	pb := &pluginpb.Batch{Seq: seq, Schema: string(r.b.Schema), Messages: plugin.MessagesToProto(r.b.Messages), State: r.b.State}
	if r.b.State != nil && len(r.b.State) == 0 {
		pb.State = []byte{} // present, empty
	}
	return &pluginpb.PollResponse{Batch: pb}, nil
}

func (s *sourceServer) batch(seq uint64) (connector.Acker, *connector.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acker, s.pending[seq]
}

func (s *sourceServer) Ack(ctx context.Context, req *pluginpb.AckRequest) (*pluginpb.AckResponse, error) {
	acker, b := s.batch(req.Seq)
	if acker == nil {
		return &pluginpb.AckResponse{}, nil
	}
	if b == nil {
		return nil, status.Errorf(codes.NotFound, "no batch %d is waiting for an ack", req.Seq)
	}
	s.mu.Lock()
	delete(s.pending, req.Seq)
	s.mu.Unlock()
	if _, err := safely(func() (struct{}, error) { return struct{}{}, acker.Ack(ctx, b) }); err != nil {
		return &pluginpb.AckResponse{Error: plugin.FailureOf(err)}, nil
	}
	return &pluginpb.AckResponse{}, nil
}

func (s *sourceServer) Nack(ctx context.Context, req *pluginpb.NackRequest) (*pluginpb.NackResponse, error) {
	acker, b := s.batch(req.Seq)
	if acker != nil && b != nil {
		_, _ = safely(func() (struct{}, error) { acker.Nack(ctx, b, errors.New(req.Cause)); return struct{}{}, nil })
	}
	return &pluginpb.NackResponse{}, nil
}

func (s *sourceServer) Close(ctx context.Context, _ *pluginpb.CloseRequest) (*pluginpb.CloseResponse, error) {
	s.mu.Lock()
	src, stop, done := s.src, s.stop, s.done
	s.src = nil
	s.mu.Unlock()
	if src == nil {
		return &pluginpb.CloseResponse{}, nil
	}
	stop()
	select {
	case <-done:
	case <-ctx.Done():
		return &pluginpb.CloseResponse{Error: plugin.FailureOf(errors.New("Poll did not return after its context ended; the source is not closed"))}, nil
	}
	if _, err := safely(func() (struct{}, error) { return struct{}{}, src.Close(ctx) }); err != nil {
		return &pluginpb.CloseResponse{Error: plugin.FailureOf(err)}, nil
	}
	return &pluginpb.CloseResponse{}, nil
}
