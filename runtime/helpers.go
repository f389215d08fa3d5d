package runtime

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/ferryhq/ferry/codec"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/transform"
)

// names lists the built-in connectors of a kind for error messages.
func names(r *connector.Registry, kind connector.Kind) string {
	var out []string
	for _, i := range r.List(kind) {
		out = append(out, i.Name)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// resolve finds the connector c's path names: a built-in, or what the
// registry's resolver finds (an out-of-process plugin, with relative
// paths against c's file's directory).
func resolve(reg *connector.Registry, c *config.Connector) (connector.Info, error) {
	kind := connector.Kind(c.Type)
	dir := ""
	if c.File != "" {
		dir = filepath.Dir(c.File)
	}
	info, ok, err := reg.Resolve(kind, c.Path, dir)
	if err != nil {
		return connector.Info{}, fmt.Errorf("path %q: %w", c.Path, err)
	}
	if !ok {
		return connector.Info{}, fmt.Errorf("path %q names no %s connector (built in: %s)", c.Path, kind, names(reg, kind))
	}
	return info, nil
}

func transformSpecs(c *config.Connector) []transform.Spec {
	var specs []transform.Spec
	for _, t := range c.Transforms {
		if t.Enabled {
			specs = append(specs, transform.Spec{Name: t.Name, Config: t.Config, Source: c.File, Lines: t.Lines})
		}
	}
	return specs
}

func connectorConfig(m *managed, c *config.Connector) connector.Config {
	return m.rt.connectorConfig(c, m.log)
}

// connectorConfig is what the constructor of c's connector receives.
func (r *Runtime) connectorConfig(c *config.Connector, log *slog.Logger) connector.Config {
	return connector.Config{
		Key: c.Key, Name: c.Name, Verbose: c.Verbose, Logger: log,
		Plugin: connector.PluginConfig{Values: c.PluginConfig, Source: c.File,
			Lines: c.PluginConfigLines, Vars: c.PluginConfigVars},
		Paths:    r.paths(),
		StateDir: filepath.Join(r.stateDir(), "data", string(c.Type)+"-"+c.Key),
	}
}

// streamCodec makes the codec of the i-th [[streams]] entry of c, reading
// and compiling its schema files now; an error names the file and entry.
func streamCodec(c *config.Connector, i int, schema config.Schema, avroJSON, avroPath string, ss config.StreamSchema) (codec.Codec, error) {
	opts := codec.Options{
		AvroSchemaJSON: avroJSON, AvroSchemaPath: avroPath, AvroFraming: ss.AvroFraming, AvroSchemaID: ss.AvroSchemaID,
		ProtoSchemaPath: ss.ProtoSchemaPath, ProtoMessage: ss.ProtoMessageType, ProtoIncludePaths: ss.ProtoIncludePaths,
		FlatBufferSchemaPath: ss.FlatBufferSchemaPath, FlatBufferRootTable: ss.FlatBufferRootTable,
	}
	if c.File != "" {
		opts.BaseDir = filepath.Dir(c.File)
	}
	sc, err := codec.New(connector.Schema(schema), opts)
	if err != nil {
		return nil, fmt.Errorf("%s: streams[%d]: %w", c.File, i, err)
	}
	return sc, nil
}

// fromIggy converts a consumed message; it fails when its headers do not
// decode.
func fromIggy(im *iggy.Message, stream, topic string, partition uint32) (connector.Message, error) {
	m := connector.Message{
		ID: im.ID, Payload: im.Payload, Headers: im.Headers, Stream: stream, Topic: topic, Partition: partition,
		Offset: im.Offset, Checksum: im.Checksum, Timestamp: im.Timestamp, OriginTimestamp: im.OriginTimestamp,
	}
	return m, im.HeadersErr
}
