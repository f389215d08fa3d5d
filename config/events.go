package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Declared event types (Ferry extension). A connector's [[streams]]
// entries name the event types they produce (a source) or consume (a
// sink), and the runtime's config.toml describes each type once:
//
//	# config.toml
//	[events."order.created"]
//	description = "An order was placed"
//	version = "1.2.0"
//	schema_path = "schemas/order.created.json"   # JSON Schema (draft 2020-12 or 07)
//	topics = ["shop/orders"]                      # optional: the topics that carry it
//
//	[events."payment.settled"]
//	format = "avro"                                # or "proto" (with message_type)
//	schema_path = "schemas/payment.avsc"
//
//	# a source's file
//	[[streams]]
//	stream = "shop"
//	topic = "orders"
//	produces = ["order.created"]
//
//	# a sink's file
//	[[streams]]
//	stream = "shop"
//	topics = ["orders"]
//	consumes = ["order.created"]
//
// Absent keys declare nothing: upstream's files load unchanged, and a
// stream that declares nothing is not validated. Package eventtypes
// builds the catalog from these declarations, validates messages and
// renders the AsyncAPI document.

// ProducedEvents is the event-type key of a source's [[streams]] entry.
type ProducedEvents struct {
	// Produces names the event types (keys of config.toml's [events]) of
	// the messages this stream sends. Empty: nothing declared.
	Produces EventTypeNames `toml:"produces" cfg:"noenv"`
}

// ConsumedEvents is the event-type key of a sink's [[streams]] entry.
type ConsumedEvents struct {
	// Consumes names the event types (keys of config.toml's [events]) the
	// sink accepts from these topics. Empty: nothing declared.
	Consumes EventTypeNames `toml:"consumes" cfg:"noenv"`
}

// EventTypeNames is a list of event type names, each checked with
// ValidEventTypeName and given once.
type EventTypeNames []string

func (n *EventTypeNames) bindFrom(b *binder, p path, v any) {
	arr, ok := v.([]any)
	if !ok {
		if s, isStr := v.(string); isStr {
			b.fail(p, "expected an array of event type names, got the string %q; write [%q]", s, s)
			return
		}
		b.fail(p, "expected an array of event type names such as [\"order.created\"], got %s", typeName(v))
		return
	}
	out := make(EventTypeNames, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		switch {
		case !ok:
			b.fail(p.index(i), "expected an event type name (a string), got %s", describe(e))
		case !ValidEventTypeName(s):
			b.fail(p.index(i), "%q is not an event type name: %s", s, eventNameRule)
		case slices.Contains(out, s):
			b.fail(p.index(i), "%q is listed twice", s)
		default:
			out = append(out, s)
		}
	}
	*n = out
}

const eventNameRule = "expected 1 to 200 letters, digits, '.', '-', '_', ':' or '/', starting with a letter or digit"

// ValidEventTypeName reports whether s can name an event type: 1 to 200
// ASCII letters, digits, '.', '-', '_', ':' and '/', starting with a
// letter or a digit (CloudEvents-style types such as "order.created" or
// "com.example.order.created").
func ValidEventTypeName(s string) bool {
	if s == "" || len(s) > 200 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && !strings.ContainsRune(".-_:/", rune(c)) {
			return false
		}
	}
	return true
}

// Event schema formats.
const (
	EventFormatJSONSchema = "json_schema"
	EventFormatAvro       = "avro"
	EventFormatProto      = "proto"
)

// EventType is one [events."NAME"] entry of config.toml.
type EventType struct {
	Name        string `toml:"-"`
	Description string `toml:"description"`
	// Version labels the type's schema for people and the AsyncAPI
	// document ("1.2.0"); it is not interpreted.
	Version string `toml:"version"`
	// Format is the schema language: "json_schema" (the default; draft
	// 2020-12 unless the schema's $schema says draft-07 or another),
	// "avro" (an .avsc schema, read by package codec) or "proto" (a
	// .proto file and MessageType). Empty with a schema_path ending in
	// .avsc or .proto means that format.
	Format string `toml:"format"`
	// SchemaPath is the schema file, made absolute against config.toml's
	// directory (as the other paths of config.toml are). Schema is the
	// schema inline instead (JSON Schema or Avro JSON text). Neither:
	// the type has no schema, and any payload is valid.
	SchemaPath string `toml:"schema_path"`
	Schema     string `toml:"schema"`
	// MessageType is the message in a proto schema ("shop.Order").
	MessageType string `toml:"message_type"`
	// Topics are "stream/topic" entries that carry this type: every
	// source producing to one of them produces it, every sink reading
	// one consumes it, and the topic counts as a producer of its own
	// (someone outside Ferry may write it).
	Topics []string `toml:"topics"`

	// File and Line locate the entry, for errors; Line is 0 when unknown.
	File string `toml:"-"`
	Line int    `toml:"-"`
}

// EventCatalog is config.toml's [events] table, sorted by name.
type EventCatalog []EventType

// Get returns the type named name, or nil.
func (c EventCatalog) Get(name string) *EventType {
	i, ok := slices.BinarySearchFunc(c, name, func(t EventType, n string) int { return strings.Compare(t.Name, n) })
	if !ok {
		return nil
	}
	return &c[i]
}

func (c *EventCatalog) bindFrom(b *binder, p path, v any) {
	t, ok := v.(*table)
	if !ok {
		b.fail(p, "expected a table of event types such as [events.\"order.created\"], got %s", typeName(v))
		return
	}
	dir := ""
	if b.file != "" {
		if abs, err := filepath.Abs(b.file); err == nil {
			dir = filepath.Dir(abs)
		}
	}
	out := make(EventCatalog, 0, len(t.keys))
	for _, name := range t.keys {
		ep := p.key(name)
		if !ValidEventTypeName(name) {
			b.fail(ep, "%q is not an event type name: %s", name, eventNameRule)
			continue
		}
		et, ok := t.vals[name].(*table)
		if !ok {
			b.fail(ep, "expected a table [events.%s], got %s", quoteKey(name), typeName(t.vals[name]))
			continue
		}
		e := EventType{Name: name, File: b.file}
		if b.src != nil {
			e.Line = locate(b.src, ep)
		}
		before := len(b.errs)
		b.bindStruct(ep, et, reflect.ValueOf(&e).Elem())
		if len(b.errs) > before {
			continue
		}
		if e.checkEvent(b, ep, dir) {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	*c = out
}

// checkEvent checks and completes one entry; false when it is unusable.
func (e *EventType) checkEvent(b *binder, p path, dir string) bool {
	before := len(b.errs)
	if e.SchemaPath != "" && e.Schema != "" {
		b.fail(p.key("schema"), "set either schema or schema_path, not both")
	}
	if e.Format == "" {
		switch strings.ToLower(filepath.Ext(e.SchemaPath)) {
		case ".avsc":
			e.Format = EventFormatAvro
		case ".proto":
			e.Format = EventFormatProto
		default:
			e.Format = EventFormatJSONSchema
		}
	}
	switch e.Format {
	case EventFormatJSONSchema, EventFormatAvro:
		if e.MessageType != "" {
			b.fail(p.key("message_type"), `only used with format = "proto"`)
		}
	case EventFormatProto:
		if e.SchemaPath == "" {
			b.fail(p.key("schema_path"), `required with format = "proto": the .proto file`)
		}
		if e.MessageType == "" {
			b.fail(p.key("message_type"), `required with format = "proto": the message type, such as "shop.Order"`)
		}
		if e.Schema != "" {
			b.fail(p.key("schema"), `format = "proto" reads its schema from schema_path`)
		}
	default:
		b.fail(p.key("format"), `expected one of "json_schema", "avro", "proto", got %q`, e.Format)
	}
	if e.Format == EventFormatAvro && e.SchemaPath == "" && e.Schema == "" {
		b.fail(p.key("schema_path"), `required with format = "avro": the .avsc file (or schema, the schema inline)`)
	}
	if e.SchemaPath != "" {
		e.SchemaPath = resolvePath(dir, e.SchemaPath, true)
		if fi, err := os.Stat(e.SchemaPath); err != nil {
			b.fail(p.key("schema_path"), "cannot read the schema file %s: %v", e.SchemaPath, unwrapPathErr(err))
		} else if fi.IsDir() {
			b.fail(p.key("schema_path"), "%s is a directory; expected a schema file", e.SchemaPath)
		}
	}
	for i, tp := range e.Topics {
		stream, topic, ok := strings.Cut(tp, "/")
		if !ok || strings.TrimSpace(stream) == "" || strings.TrimSpace(topic) == "" || strings.Contains(topic, "/") {
			b.fail(p.key("topics").index(i), `expected "stream/topic", got %q`, tp)
		}
	}
	return len(b.errs) == before
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// StreamKeyLine is the 1-based line of key in the i-th [[streams]] entry
// of c's file (such as "produces"), or 0 when it cannot be found (no
// file, or the key came from elsewhere). It reads the file; it is meant
// for error messages.
func (c *Connector) StreamKeyLine(i int, key string) int {
	if c.File == "" {
		return 0
	}
	src, err := os.ReadFile(c.File)
	if err != nil {
		return 0
	}
	return locate(src, path{"streams", i, key})
}
