// Package sdk is the Go SDK of Ferry's out-of-process connectors. A plugin
// is a connector written exactly as a built-in one — a connector.Source
// (and connector.Acker) or a connector.Sink, with a connector.Spec — and a
// main that serves it:
//
//	func main() {
//		sdk.Serve(connector.Info{
//			Kind:    connector.KindSink,
//			Name:    "go-sink",
//			Summary: "writes each message as a line of a file",
//			Spec:    spec,
//			NewSink: newSink,
//		})
//	}
//
// Serve speaks hashicorp/go-plugin's handshake and the gRPC services of
// plugin/proto/ferry/plugin/v1/plugin.proto. Ferry checks plugin_config
// against the spec before it starts the plugin (the Spec call sends it);
// the constructor gets the configuration as a built-in's does and parses
// it with Spec.Parse, which also runs the spec's checks and lints, which
// cannot travel.
//
// What the SDK adds to the connector's own contract: a source's Poll is
// called from one goroutine with a context that ends only at Close, as
// in the runtime, while Ferry's Poll calls wait a bounded time for its
// result; Ack and Nack get the batch Poll returned. Anything the plugin
// writes to standard error (its Logger writes there) goes to Ferry's log
// under the connector's key. Standard output belongs to the handshake: do
// not print to it before Serve.
package sdk

import (
	"context"
	"fmt"
	"os"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

// Serve serves the connectors of infos (a source, a sink, or one of
// each) until Ferry closes the plugin. Run by hand, without Ferry's magic
// cookie, it says what it is and exits with status 1.
func Serve(infos ...connector.Info) {
	if err := check(infos); err != nil {
		fmt.Fprintln(os.Stderr, "ferry plugin:", err)
		os.Exit(2)
	}
	if os.Getenv(plugin.MagicCookieKey) != plugin.MagicCookieValue {
		name := infos[0].Name
		fmt.Fprintf(os.Stderr, "%s is a Ferry plugin: name it in a connector file's path (or run `ferry plugin describe %s`); it does not run on its own\n",
			name, os.Args[0])
		os.Exit(1)
	}
	goplugin.Serve(&goplugin.ServeConfig{
		HandshakeConfig: plugin.Handshake,
		Plugins:         goplugin.PluginSet{plugin.PluginName: &grpcPlugin{infos: infos}},
		GRPCServer:      goplugin.DefaultGRPCServer,
	})
}

func check(infos []connector.Info) error {
	if len(infos) == 0 {
		return fmt.Errorf("sdk.Serve: no connector")
	}
	seen := map[connector.Kind]bool{}
	for _, info := range infos {
		switch {
		case info.Name == "":
			return fmt.Errorf("sdk.Serve: a connector without a name")
		case seen[info.Kind]:
			return fmt.Errorf("sdk.Serve: two %ss", info.Kind)
		case info.Kind == connector.KindSource && info.NewSource == nil,
			info.Kind == connector.KindSink && info.NewSink == nil:
			return fmt.Errorf("sdk.Serve: %s %q has no constructor", info.Kind, info.Name)
		case info.Kind != connector.KindSource && info.Kind != connector.KindSink:
			return fmt.Errorf("sdk.Serve: %q: kind %q, want source or sink", info.Name, info.Kind)
		}
		seen[info.Kind] = true
	}
	return nil
}

// grpcPlugin registers the services with go-plugin's gRPC server.
type grpcPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	infos []connector.Info
}

func (p *grpcPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	pluginpb.RegisterPluginServer(s, &specServer{infos: p.infos})
	for _, info := range p.infos {
		switch info.Kind {
		case connector.KindSource:
			pluginpb.RegisterSourceServer(s, &sourceServer{info: info})
		case connector.KindSink:
			pluginpb.RegisterSinkServer(s, &sinkServer{info: info})
		}
	}
	return nil
}

func (p *grpcPlugin) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, fmt.Errorf("the SDK serves plugins; the host is plugin/host")
}

var _ goplugin.GRPCPlugin = (*grpcPlugin)(nil)
