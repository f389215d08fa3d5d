package runtime

import (
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/codec"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/eventtypes"
	"github.com/ferryhq/ferry/iggy/header"
)

// Validation of declared event types at the edges: a source's messages
// before they are sent, a sink's after they are decoded. A message that
// does not match its type fails like a message that does not convert
// (source) or decode (sink): dead-lettered with the validation error in
// ferry.dlq.error, or stopping the connector with on_error = "stop".
// Streams that declare no type are not checked.

// HeaderEventType is the header that names a message's event type when
// its stream declares several (CloudEvents' Kafka binding name); without
// it, a JSON payload's top-level "type" member does.
const HeaderEventType = "ce_type"

// errInvalidEvent marks a message that is not of a type its stream
// declares, or does not match its type's schema.
var errInvalidEvent = errors.New("invalid event")

// eventChecks are the checks of one connector's streams, from the
// catalog of the runtime's [events] and that connector's declarations:
// its streams' produces / consumes and the event types its spec declares
// (a built-in's, or a plugin's manifest [[events]]).
type eventChecks struct {
	cat *eventtypes.Catalog
	kind,
	key string
}

// newEventChecks builds the checks of c, whose connector's spec is spec
// (nil: none); nil when none of c's streams declares a type (directly,
// through a type's topics, or through the spec). The error names the
// file, line and key of a type c names that does not exist or whose
// schema does not compile (in config.toml, c's file or the plugin's
// manifest).
func newEventChecks(rt *config.Runtime, c *config.Connector, spec *connector.Spec) (*eventChecks, error) {
	if rt == nil || c == nil {
		return nil, nil
	}
	one := *c
	one.Enabled = true
	cat, err := eventtypes.Build(rt, []*config.Connector{&one},
		eventtypes.WithSpecs(func(*config.Connector) (*connector.Spec, error) { return spec, nil }))
	if err != nil {
		return nil, fmt.Errorf("declared event types: %w", err)
	}
	for _, e := range cat.Endpoints {
		if len(e.Types) > 0 {
			kind := eventtypes.KindSink
			if c.Type == config.KindSource {
				kind = eventtypes.KindSource
			}
			return &eventChecks{cat: cat, kind: kind, key: c.Key}, nil
		}
	}
	return nil, nil
}

// stream returns the check of the stream/topic of the connector, whose
// payloads are in schema (with its settings ss) and read with sc (the
// stream's codec; nil when payloads are JSON); nil when that stream
// declares no type. nil-safe.
func (e *eventChecks) stream(stream, topic string, schema config.Schema, ss config.StreamSchema, sc codec.Codec) *eventCheck {
	if e == nil {
		return nil
	}
	for _, ep := range e.cat.Endpoints {
		sameKind := (ep.Kind == eventtypes.KindSource) == (e.kind == eventtypes.KindSource)
		if sameKind && ep.Key == e.key && ep.Stream == stream && ep.Topic == topic && len(ep.Types) > 0 {
			ch := &eventCheck{cat: e.cat, declared: ep.Types, schema: connector.Schema(schema),
				// A framed Avro datum is checked through its JSON form.
				framed: ss.AvroFraming != "" && ss.AvroFraming != "binary"}
			if !isJSONSchema(ch.schema) && sc != nil && sc.Mapped() {
				ch.toJSON = sc.ToJSON
			}
			return ch
		}
	}
	return nil
}

// eventCheck validates the messages of one stream and topic.
type eventCheck struct {
	cat      *eventtypes.Catalog
	declared []string
	// schema is the payloads' schema where check is called: the stream's
	// on the source side; on the sink side JSON when the sink decoded
	// them to JSON (see the sink's prepare), else the stream's.
	schema connector.Schema
	toJSON func(dst, p []byte) ([]byte, error) // the stream codec's, for non-JSON payloads
	framed bool                                // Avro payloads carry a single-object or Confluent frame
}

func isJSONSchema(s connector.Schema) bool {
	return s == "" || s == connector.SchemaJSON || s == connector.SchemaText || s == connector.SchemaRaw
}

// decoded returns the check for payloads already decoded to JSON (the
// sink side of an avro, proto or flatbuffer stream). nil-safe.
func (c *eventCheck) decoded() *eventCheck {
	if c == nil {
		return nil
	}
	d := *c
	d.schema, d.toJSON = connector.SchemaJSON, nil
	return &d
}

// check returns nil when the message (its headers and its payload in
// c.schema) is of a type the stream declares and matches that type's
// schema; else an error wrapping errInvalidEvent and, for a schema
// mismatch, an *eventtypes.ValidationError naming each JSON pointer.
// nil-safe: a nil check accepts everything.
func (c *eventCheck) check(headers []header.Header, payload []byte) error {
	if c == nil {
		return nil
	}
	ce := ""
	if v, ok := header.Get(headers, HeaderEventType); ok {
		s, isText := v.Text()
		if !isText {
			return fmt.Errorf("%w: the %s header is not a string", errInvalidEvent, HeaderEventType)
		}
		ce = s
	}
	doc := payload // the JSON form, when there is one
	if !isJSONSchema(c.schema) {
		doc = nil
		if c.toJSON != nil {
			j, err := c.toJSON(nil, payload)
			if err != nil {
				return fmt.Errorf("%w: the %s payload does not decode: %w", errInvalidEvent, c.schema, err)
			}
			doc = j
		}
	}
	name, err := eventtypes.TypeOf(c.declared, ce, doc)
	if err != nil {
		return fmt.Errorf("%w: %w", errInvalidEvent, err)
	}
	t := c.cat.Get(name)
	switch {
	case c.schema == connector.SchemaAvro && t.Format == config.EventFormatAvro && !c.framed,
		c.schema == connector.SchemaProto && t.Format == config.EventFormatProto:
		err = c.cat.ValidateEncoded(name, c.schema, payload)
	case doc != nil:
		err = c.cat.Validate(name, doc)
	default:
		err = fmt.Errorf("event type %q (%s) cannot check a %s payload, which has no JSON mapping here", name, t.Format, c.schema)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errInvalidEvent, err)
	}
	return nil
}

// checkMessage is check for a connector message. nil-safe.
func (c *eventCheck) checkMessage(m *connector.Message) error {
	return c.check(m.Headers, m.Payload)
}
