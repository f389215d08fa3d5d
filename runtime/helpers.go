package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
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

func transformSpecs(c *config.Connector) []transform.Spec {
	var specs []transform.Spec
	for _, t := range c.Transforms {
		if t.Enabled {
			specs = append(specs, transform.Spec{Name: t.Name, Config: t.Config, Source: c.File})
		}
	}
	return specs
}

func connectorConfig(m *managed, c *config.Connector) connector.Config {
	return connector.Config{
		Key: c.Key, Name: c.Name, Verbose: c.Verbose, Logger: m.log,
		Plugin: connector.PluginConfig{Values: c.PluginConfig, Source: c.File},
	}
}

// converter returns how a source's payloads become a stream's schema.
// The same schema, or raw, passes bytes through; text and JSON are both
// UTF-8, so JSON goes to a text stream as it is.
func converter(target connector.Schema) func(connector.Schema, []byte) ([]byte, error) {
	return func(from connector.Schema, p []byte) ([]byte, error) {
		switch {
		case from == target, target == connector.SchemaRaw:
			return p, nil
		case target == connector.SchemaText && from == connector.SchemaJSON:
			return p, nil
		case target == connector.SchemaJSON && from == connector.SchemaText:
			if !json.Valid(p) {
				return nil, errors.New("text payload is not valid JSON")
			}
			return p, nil
		}
		return nil, fmt.Errorf("no conversion from schema %q to %q", from, target)
	}
}

// validate checks a consumed payload against its stream's schema.
func validate(schema connector.Schema, p []byte) error {
	switch schema {
	case connector.SchemaJSON, "":
		if !json.Valid(p) {
			return errors.New("payload is not valid JSON")
		}
	case connector.SchemaText:
		if !utf8.Valid(p) {
			return errors.New("payload is not valid UTF-8 text")
		}
	}
	return nil
}

// fromIggy converts a consumed message.
func fromIggy(im *iggy.Message, stream, topic string, partition uint32) (connector.Message, error) {
	m := connector.Message{
		ID: im.ID, Payload: im.Payload, Stream: stream, Topic: topic, Partition: partition,
		Offset: im.Offset, Checksum: im.Checksum,
		Timestamp:       time.UnixMicro(int64(im.Timestamp)),
		OriginTimestamp: time.UnixMicro(int64(im.OriginTimestamp)),
	}
	if len(im.Headers) > 0 {
		h, err := wire.ParseTLV(im.Headers)
		if err != nil {
			return m, fmt.Errorf("user headers: %w", err)
		}
		m.Headers = h
	}
	return m, nil
}
