package sdk

import (
	"context"
	"fmt"
	"os"
	"sync"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
	"github.com/ferryhq/ferry/transform"
)

// Transformer is a transform plugin's code: ApplyBatch gets a batch and
// returns one transform.Outcome per message (Keep; Out with one message
// to replace it, several to split it, none with Keep false to drop it; Err
// to fail it, which dead-letters it with the reason), or an error that
// fails the whole batch.
type Transformer interface {
	ApplyBatch(ctx context.Context, msgs []connector.Message, schema connector.Schema) ([]transform.Outcome, error)
}

// TransformInfo describes a transform plugin for ServeTransform.
type TransformInfo struct {
	Name, Summary string
	// Spec checks the [transforms.plugin.config] table; nil: no settings.
	Spec *connector.Spec
	// New makes the transform from its checked configuration.
	New func(cfg connector.Config) (Transformer, error)
}

// ServeTransform serves a transform plugin until Ferry closes it, as
// Serve does a source or a sink.
func ServeTransform(info TransformInfo) {
	if info.Name == "" || info.New == nil {
		fmt.Fprintln(os.Stderr, "ferry plugin: sdk.ServeTransform: a transform needs a name and New")
		os.Exit(2)
	}
	if os.Getenv(plugin.MagicCookieKey) != plugin.MagicCookieValue {
		fmt.Fprintf(os.Stderr, "%s is a Ferry transform plugin: name it in a connector file's [transforms.plugin] path (or run `ferry plugin describe %s`); it does not run on its own\n",
			info.Name, os.Args[0])
		os.Exit(1)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: plugin.Handshake,
		Plugins:         goplugin.PluginSet{plugin.PluginName: &transformPlugin{info: info}},
		GRPCServer:      goplugin.DefaultGRPCServer,
	})
}

type transformPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	info TransformInfo
}

func (p *transformPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	as := connector.Info{Kind: connector.Kind(plugin.KindTransform), Name: p.info.Name, Summary: p.info.Summary, Spec: p.info.Spec}
	pluginpb.RegisterPluginServer(s, &specServer{infos: []connector.Info{as}})
	pluginpb.RegisterTransformServer(s, &transformServer{info: p.info, as: as})
	return nil
}

func (p *transformPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, fmt.Errorf("the SDK serves plugins; the host is plugin/host")
}

// transformServer serves a Transformer.
type transformServer struct {
	pluginpb.UnimplementedTransformServer
	info TransformInfo
	as   connector.Info

	mu sync.Mutex
	t  Transformer
}

func (s *transformServer) Open(_ context.Context, req *pluginpb.OpenRequest) (*pluginpb.OpenResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t != nil {
		return nil, status.Error(codes.FailedPrecondition, "the transform is already open")
	}
	cfg, err := config(s.as, req)
	if err != nil {
		return &pluginpb.OpenResponse{Error: plugin.FailureOf(connector.Permanent(err))}, nil
	}
	t, err := safely(func() (Transformer, error) { return s.info.New(cfg) })
	if err != nil {
		return &pluginpb.OpenResponse{Error: plugin.FailureOf(err)}, nil
	}
	s.t = t
	return &pluginpb.OpenResponse{}, nil
}

func (s *transformServer) Apply(ctx context.Context, req *pluginpb.ApplyRequest) (*pluginpb.ApplyResponse, error) {
	s.mu.Lock()
	t := s.t
	s.mu.Unlock()
	if t == nil {
		return nil, status.Error(codes.FailedPrecondition, "Apply before Open")
	}
	msgs, err := plugin.MessagesFromProto(req.Messages)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "messages: %v", err)
	}
	outs, err := safely(func() ([]transform.Outcome, error) { return t.ApplyBatch(ctx, msgs, connector.Schema(req.Schema)) })
	if err != nil {
		return &pluginpb.ApplyResponse{Error: plugin.FailureOf(err)}, nil
	}
	if len(outs) != len(msgs) {
		return &pluginpb.ApplyResponse{Error: plugin.FailureOf(fmt.Errorf("the transform returned %d outcomes for %d messages", len(outs), len(msgs)))}, nil
	}
	resp := &pluginpb.ApplyResponse{Verdicts: make([]*pluginpb.Verdict, len(outs))}
	for i, o := range outs {
		v := &pluginpb.Verdict{}
		switch {
		case o.Err != nil:
			v.Kind, v.Reason = pluginpb.VerdictKind_VERDICT_KIND_FAIL, o.Err.Error()
		case o.Keep:
			v.Kind = pluginpb.VerdictKind_VERDICT_KIND_KEEP
		case len(o.Out) == 0:
			v.Kind = pluginpb.VerdictKind_VERDICT_KIND_DROP
		case len(o.Out) == 1:
			v.Kind, v.Messages = pluginpb.VerdictKind_VERDICT_KIND_REPLACE, plugin.MessagesToProto(o.Out)
		default:
			v.Kind, v.Messages = pluginpb.VerdictKind_VERDICT_KIND_SPLIT, plugin.MessagesToProto(o.Out)
		}
		resp.Verdicts[i] = v
	}
	return resp, nil
}

func (s *transformServer) Close(context.Context, *pluginpb.CloseRequest) (*pluginpb.CloseResponse, error) {
	s.mu.Lock()
	s.t = nil
	s.mu.Unlock()
	return &pluginpb.CloseResponse{}, nil
}
