package connector

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Event schema formats of an EventType (the same words as config.toml's
// [events."NAME"] format key).
const (
	EventFormatJSONSchema = "json_schema"
	EventFormatAvro       = "avro"
	EventFormatProto      = "proto"
)

// EventType is an event type a connector declares in its spec: a source
// produces it, a sink consumes it, on every one of its [[streams]]
// entries' topics (or those Topics names). Package eventtypes merges
// these declarations into the deployment's catalog with config.toml's
// [events."NAME"] entries (which win over a spec's for the same name),
// so the runtime validates the connector's messages against the schema,
// GET /events and GET /asyncapi.yaml list them and `ferry events check`
// checks them. A built-in declares them in code (Spec.DeclareEvents); a
// plugin in its manifest's [[events]] tables (package plugin).
type EventType struct {
	// Name is the type's name ("order.created"): 1 to 200 letters,
	// digits, '.', '-', '_', ':' or '/', starting with a letter or digit,
	// as config.ValidEventTypeName says.
	Name        string
	Description string
	// Version labels the schema ("1.2.0"); it is not interpreted.
	Version string
	// Format is the schema language: EventFormatJSONSchema (the default),
	// EventFormatAvro or EventFormatProto (with SchemaPath and
	// MessageType). Empty with a SchemaPath ending in .avsc or .proto
	// means that format (Check fills it in).
	Format string
	// Schema is the schema inline (JSON Schema or Avro JSON text);
	// SchemaPath is a schema file instead, absolute (a manifest's are
	// made absolute against its directory). Neither: any payload is
	// valid.
	Schema, SchemaPath string
	// MessageType is the message of a proto schema ("shop.Order").
	MessageType string
	// Topics narrows the declaration to these of the connector's topics,
	// each "TOPIC" (on any stream) or "STREAM/TOPIC". Empty: all of them.
	// Unlike config.toml's topics key, it does not make the topic a
	// producer of its own.
	Topics []string

	// Origin says where the declaration was made, for the catalog and
	// errors ("plugin go-source's manifest /p/ferry-plugin.toml"); empty
	// for a built-in (the catalog names the connector). File and Key
	// locate it for error messages: the manifest and "events[0]".
	Origin, File, Key string
}

// DeclareEvents adds event types to s and returns s. Like NewSpec it
// panics on a declaration that cannot work (Check's problems): specs are
// package-level values, and tests load them.
func (s *Spec) DeclareEvents(types ...EventType) *Spec {
	for _, t := range types {
		if err := t.Check(); err != nil {
			panic(fmt.Sprintf("connector: event type %q: %v", t.Name, err))
		}
		for _, o := range s.Events {
			if o.Name == t.Name {
				panic(fmt.Sprintf("connector: event type %q declared twice", t.Name))
			}
		}
		s.Events = append(s.Events, t)
	}
	return s
}

// Check checks a declaration and fills in Format from SchemaPath's
// extension (or EventFormatJSONSchema). The error is a SettingErrors,
// each with the key in error relative to the declaration ("schema_path")
// and, when set, File; a caller prefixes the declaration's own key.
// Whether a JSON Schema is valid against its metaschema is package
// eventtypes' check.
func (t *EventType) Check() error {
	var errs SettingErrors
	fail := func(key, format string, args ...any) {
		errs = append(errs, &SettingError{File: t.File, Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	if !ValidEventTypeName(t.Name) {
		fail("name", "%q is not an event type name: %s", t.Name, eventNameRule)
	}
	if t.SchemaPath != "" && t.Schema != "" {
		fail("schema", "set either schema or schema_path, not both")
	}
	if t.Format == "" {
		switch strings.ToLower(filepath.Ext(t.SchemaPath)) {
		case ".avsc":
			t.Format = EventFormatAvro
		case ".proto":
			t.Format = EventFormatProto
		default:
			t.Format = EventFormatJSONSchema
		}
	}
	switch t.Format {
	case EventFormatJSONSchema, EventFormatAvro:
		if t.MessageType != "" {
			fail("message_type", `only used with format = "proto"`)
		}
		if t.Schema != "" && !json.Valid([]byte(t.Schema)) {
			fail("schema", "the %s schema is not valid JSON", t.Format)
		}
	case EventFormatProto:
		if t.SchemaPath == "" {
			fail("schema_path", `required with format = "proto": the .proto file`)
		}
		if t.MessageType == "" {
			fail("message_type", `required with format = "proto": the message type, such as "shop.Order"`)
		}
		if t.Schema != "" {
			fail("schema", `format = "proto" reads its schema from schema_path`)
		}
	default:
		fail("format", `expected one of "json_schema", "avro", "proto", got %q`, t.Format)
	}
	if t.Format == EventFormatAvro && t.SchemaPath == "" && t.Schema == "" {
		fail("schema_path", `required with format = "avro": the .avsc file (or schema, the schema inline)`)
	}
	if t.SchemaPath != "" && !filepath.IsAbs(t.SchemaPath) {
		fail("schema_path", "%q is not an absolute path", t.SchemaPath)
	}
	for i, tp := range t.Topics {
		stream, topic, hasStream := strings.Cut(tp, "/")
		if !hasStream {
			stream, topic = "x", tp
		}
		if strings.TrimSpace(stream) == "" || strings.TrimSpace(topic) == "" || strings.Contains(topic, "/") {
			fail(fmt.Sprintf("topics[%d]", i), `expected "TOPIC" or "STREAM/TOPIC", got %q`, tp)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// AppliesTo reports whether the declaration covers the connector's
// stream/topic.
func (t *EventType) AppliesTo(stream, topic string) bool {
	if len(t.Topics) == 0 {
		return true
	}
	for _, tp := range t.Topics {
		if tp == stream+"/"+topic || (!strings.Contains(tp, "/") && tp == topic) {
			return true
		}
	}
	return false
}

const eventNameRule = "expected 1 to 200 letters, digits, '.', '-', '_', ':' or '/', starting with a letter or digit"

// ValidEventTypeName is config.ValidEventTypeName's rule, for the
// packages below config: 1 to 200 ASCII letters, digits, '.', '-', '_',
// ':' and '/', starting with a letter or a digit.
func ValidEventTypeName(s string) bool {
	if s == "" || len(s) > 200 || !isAlnumByte(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnumByte(c) && !strings.ContainsRune(".-_:/", rune(c)) {
			return false
		}
	}
	return true
}

func isAlnumByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
