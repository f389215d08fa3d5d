package sdk

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

type specServer struct {
	pluginpb.UnimplementedPluginServer
	infos []connector.Info
}

func (s *specServer) Spec(context.Context, *pluginpb.SpecRequest) (*pluginpb.SpecResponse, error) {
	first := s.infos[0]
	resp := &pluginpb.SpecResponse{Name: first.Name, Summary: first.Summary}
	for _, info := range s.infos {
		resp.Kinds = append(resp.Kinds, string(info.Kind))
	}
	fields, err := plugin.SpecToProto(first.Spec)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "spec: %v", err)
	}
	resp.Settings = fields
	return resp, nil
}

// config is what a constructor receives, from an OpenRequest.
func config(info connector.Info, req *pluginpb.OpenRequest) (connector.Config, error) {
	values, err := plugin.DecodeConfig(req.ConfigJson)
	if err != nil {
		return connector.Config{}, err
	}
	return connector.Config{Key: req.Key, Name: req.Name, Verbose: req.Verbose, Logger: logger(req.Key),
		Plugin: connector.PluginConfig{Values: values, Source: "plugin_config of " + req.Key}}, nil
}
