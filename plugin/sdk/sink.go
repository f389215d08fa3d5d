package sdk

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// sinkServer serves a connector.Sink.
type sinkServer struct {
	pluginpb.UnimplementedSinkServer
	info connector.Info

	mu   sync.Mutex
	sink connector.Sink
}

func (s *sinkServer) Open(ctx context.Context, req *pluginpb.OpenRequest) (*pluginpb.OpenResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sink != nil {
		return nil, status.Error(codes.FailedPrecondition, "the sink is already open")
	}
	cfg, err := config(s.info, req)
	if err != nil {
		return &pluginpb.OpenResponse{Error: plugin.FailureOf(connector.Permanent(err))}, nil
	}
	sink, err := safely(func() (connector.Sink, error) { return s.info.NewSink(cfg) })
	if err != nil {
		return &pluginpb.OpenResponse{Error: plugin.FailureOf(err)}, nil
	}
	if _, err := safely(func() (struct{}, error) { return struct{}{}, sink.Open(ctx) }); err != nil {
		return &pluginpb.OpenResponse{Error: plugin.FailureOf(err)}, nil
	}
	s.sink = sink
	return &pluginpb.OpenResponse{}, nil
}

func (s *sinkServer) current() connector.Sink {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sink
}

func (s *sinkServer) Consume(ctx context.Context, req *pluginpb.ConsumeRequest) (*pluginpb.ConsumeResponse, error) {
	sink := s.current()
	if sink == nil {
		return nil, status.Error(codes.FailedPrecondition, "Consume before Open")
	}
	msgs, err := plugin.MessagesFromProto(req.Messages)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	for i := range msgs {
		msgs[i].Stream, msgs[i].Topic, msgs[i].Partition = req.Stream, req.Topic, req.Partition
	}
	b := &connector.SinkBatch{Stream: req.Stream, Topic: req.Topic, Partition: req.Partition,
		Schema: connector.Schema(req.Schema), Messages: msgs}
	_, err = safely(func() (struct{}, error) { return struct{}{}, sink.Consume(ctx, b) })
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return consumeResponse(err, len(msgs)), nil
}

// consumeResponse is a Consume's error on the wire.
func consumeResponse(err error, n int) *pluginpb.ConsumeResponse {
	if err == nil {
		return &pluginpb.ConsumeResponse{}
	}
	var per connector.MessageErrors
	if !errors.As(err, &per) || len(per) == 0 {
		return &pluginpb.ConsumeResponse{Error: plugin.FailureOf(err)}
	}
	permanent := connector.IsPermanent(err) // a mark on the whole MessageErrors applies to each
	idx := make([]int, 0, len(per))
	for i := range per {
		if i >= 0 && i < n {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	resp := &pluginpb.ConsumeResponse{}
	for _, i := range idx {
		e := per[i]
		kind := plugin.KindOf(e)
		if permanent && kind == pluginpb.FailureKind_FAILURE_KIND_RETRY {
			kind = pluginpb.FailureKind_FAILURE_KIND_PERMANENT
		}
		resp.Failures = append(resp.Failures, &pluginpb.MessageFailure{Index: uint32(i), Kind: kind, Reason: fmt.Sprint(e)})
	}
	return resp
}

func (s *sinkServer) Close(ctx context.Context, _ *pluginpb.CloseRequest) (*pluginpb.CloseResponse, error) {
	s.mu.Lock()
	sink := s.sink
	s.sink = nil
	s.mu.Unlock()
	if sink == nil {
		return &pluginpb.CloseResponse{}, nil
	}
	if _, err := safely(func() (struct{}, error) { return struct{}{}, sink.Close(ctx) }); err != nil {
		return &pluginpb.CloseResponse{Error: plugin.FailureOf(err)}, nil
	}
	return &pluginpb.CloseResponse{}, nil
}

// safely runs fn and turns a panic into an error, with the stack on
// standard error (Ferry's log).
func safely[T any](fn func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			logger("").Error("connector panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("connector panicked: %v", r)
		}
	}()
	return fn()
}
