package runtime

import (
	"log/slog"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/transform"
)

// Admit checks that the runtime could run c, without running it: its
// path names a connector of its kind, its plugin_config passes the
// connector's spec (every problem at once, each with its file, line and
// key: connector.Spec.Parse), its transforms and stream schemas build,
// and the connector's constructor accepts the configuration (including
// the files it names: see connector.Paths). The API calls it
// before it stores, activates or restarts a configuration, so that no way
// in loads a connector that creating it would refuse.
func (r *Runtime) Admit(c *config.Connector) error {
	kind := connector.Kind(c.Type)
	info, err := resolve(r.opts.Registry, c)
	if err != nil {
		return err
	}
	cc := r.connectorConfig(c, slog.New(slog.DiscardHandler))
	if info.Spec != nil {
		if err := info.Spec.Check(cc.Plugin); err != nil {
			return err
		}
	}
	chain, err := transform.Build(transformSpecs(c))
	if err != nil {
		return err
	}
	_ = chain.Close()
	if kind == connector.KindSource {
		for i, p := range c.Producers {
			if _, err := streamCodec(c, i, p.Schema, p.AvroSchemaJSON, p.AvroSchemaPath, p.StreamSchema); err != nil {
				return err
			}
		}
	} else {
		for i, cs := range c.Consumers {
			if _, err := streamCodec(c, i, cs.Schema, cs.AvroSchemaJSON, cs.AvroSchemaPath, cs.StreamSchema); err != nil {
				return err
			}
		}
	}
	return safely(func() error {
		var err error
		if kind == connector.KindSource {
			_, err = info.NewSource(cc)
		} else {
			_, err = info.NewSink(cc)
		}
		return err
	})
}
