package eventtypes

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/didyoumean"
)

// Endpoint kinds.
const (
	KindSource = "source"
	KindSink   = "sink"
	KindHook   = "hook"
	// KindTopic is a topic a type's entry names: a producer that may be
	// outside Ferry.
	KindTopic = "topic"
)

// HookPrefix starts the key of the sinks `ferry hook create` makes.
const HookPrefix = "hook-"

// Endpoint is one connector stream on one topic, or a topic a type's
// entry names (Kind "topic", no Key).
type Endpoint struct {
	Kind   string `json:"kind"`
	Key    string `json:"key,omitempty"`
	Plugin string `json:"plugin,omitempty"`
	Stream string `json:"stream"`
	Topic  string `json:"topic"`
	// Schema is the stream's payload schema (json, avro, ...).
	Schema string `json:"schema,omitempty"`
	// Types are the event types of this endpoint: declared on the stream,
	// then those whose entry names the topic.
	Types []string `json:"types,omitempty"`
}

// Address is "stream/topic".
func (e Endpoint) Address() string { return e.Stream + "/" + e.Topic }

func (e Endpoint) String() string {
	if e.Kind == KindTopic {
		return "topic " + e.Address()
	}
	return fmt.Sprintf("%s %s (%s)", e.Kind, e.Key, e.Address())
}

// Type is one declared event type.
type Type struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version,omitempty"`
	Format      string `json:"format"`
	// Schema is the schema document: JSON Schema or Avro JSON; for a
	// proto type, the .proto file's text as a JSON string. Empty: no
	// schema.
	Schema      json.RawMessage `json:"schema,omitempty"`
	MessageType string          `json:"message_type,omitempty"`
	SchemaFile  string          `json:"schema_file,omitempty"`
	Topics      []string        `json:"topics,omitempty"`
	// Origin is where the declaration in use was made: "config FILE:LINE"
	// for config.toml's [events."NAME"], "plugin NAME's manifest FILE
	// (events[i])" or "the spec of connector NAME" for a connector's spec.
	Origin string `json:"origin,omitempty"`
	// Shadowed are the other declarations of the same name, which this
	// one overrides (config.toml's over a spec's, or the first spec's
	// over a later one with the same schema): each an origin, followed by
	// " (a different schema)" when its schema differs.
	Shadowed  []string   `json:"shadowed,omitempty"`
	Producers []Endpoint `json:"producers"`
	Consumers []Endpoint `json:"consumers"`

	v *validator // nil in a catalog read back with ParseCatalog
}

// Catalog is the event types of a deployment and who produces and
// consumes them. It is read-only after Build; its methods are safe for
// concurrent use.
type Catalog struct {
	// Types are sorted by name.
	Types []*Type `json:"types"`
	// Endpoints are every enabled connector stream on every topic,
	// sources first, then by key, declaring types or not.
	Endpoints []Endpoint `json:"endpoints"`
	// Server is the Iggy server's address, for the AsyncAPI document.
	Server string `json:"server,omitempty"`
}

// Get returns the type named name, or nil.
func (c *Catalog) Get(name string) *Type {
	i, ok := slices.BinarySearchFunc(c.Types, name, func(t *Type, n string) int { return strings.Compare(t.Name, n) })
	if !ok {
		return nil
	}
	return c.Types[i]
}

// Names lists the types' names, sorted.
func (c *Catalog) Names() []string {
	out := make([]string, len(c.Types))
	for i, t := range c.Types {
		out[i] = t.Name
	}
	return out
}

// Option changes what Build reads besides the configuration.
type Option func(*buildOptions)

type buildOptions struct {
	spec func(*config.Connector) (*connector.Spec, error)
}

// WithSpecs makes Build read the event types each connector's spec
// declares (connector.Spec.Events: a built-in's, or a plugin's manifest
// [[events]]): spec returns the spec of a connector's path, nil when it
// has none or the path names nothing; an error is reported at the
// connector's path.
func WithSpecs(spec func(*config.Connector) (*connector.Spec, error)) Option {
	return func(o *buildOptions) { o.spec = spec }
}

// WithRegistry is WithSpecs with the specs reg resolves a connector's
// path to (connector.Registry.Resolve, relative paths against the
// connector file's directory): built-ins, and plugins when reg has
// package plugin/host's resolver. A path that names nothing declares
// nothing (running the connector reports it).
func WithRegistry(reg *connector.Registry) Option {
	return WithSpecs(func(cc *config.Connector) (*connector.Spec, error) {
		dir := ""
		if cc.File != "" {
			dir = filepath.Dir(cc.File)
		}
		info, ok, err := reg.Resolve(connector.Kind(cc.Type), cc.Path, dir)
		if err != nil || !ok {
			return nil, err
		}
		return info.Spec, nil
	})
}

// Build makes the catalog of rt's [events], the event types the
// connectors' specs declare (with WithSpecs or WithRegistry) and the
// connectors' streams. Disabled connectors are left out. The error, when
// not nil, is a config.Errors naming the file, line and key of each
// problem (an unknown type name, a schema that does not compile, in
// config.toml, a connector file or a plugin's manifest; two specs
// declaring one name with different schemas); the catalog is returned
// anyway, without the streams and types at fault.
//
// A name declared more than once: config.toml's [events."NAME"] wins
// over any spec's (the spec's declaration still says the connector
// produces or consumes it; a different schema is listed in Shadowed and
// is a warning of Check); between specs, the first connector's (sources
// first, then by key) wins, the same schema from elsewhere is listed in
// Shadowed, and a different one is an error.
func Build(rt *config.Runtime, connectors []*config.Connector, opts ...Option) (*Catalog, error) {
	var o buildOptions
	for _, opt := range opts {
		opt(&o)
	}
	c := &Catalog{}
	var errs config.Errors
	failed := map[string]bool{} // types whose entry is reported already
	if rt != nil {
		if rt.Iggy.Embedded() {
			c.Server = rt.Iggy.EmbeddedAddress
		} else {
			c.Server = rt.Iggy.Address
		}
		for i := range rt.Events {
			et := &rt.Events[i]
			t, err := newType(et)
			if err != nil {
				errs = append(errs, &config.FieldError{File: et.File, Line: et.Line,
					Key: eventKey(et.Name, schemaKey(et)), Msg: err.Error()})
				failed[et.Name] = true
				continue
			}
			t.Origin = "config " + et.File
			if et.Line > 0 {
				t.Origin += fmt.Sprintf(":%d", et.Line)
			}
			c.Types = append(c.Types, t)
		}
	}
	conns := slices.Clone(connectors)
	sort.SliceStable(conns, func(i, j int) bool {
		if conns[i].Type != conns[j].Type {
			return conns[i].Type == config.KindSource
		}
		return conns[i].Key < conns[j].Key
	})
	declared := map[*config.Connector][]connector.EventType{} // by the connectors' specs
	if o.spec != nil {
		errs = append(errs, c.addSpecTypes(conns, o.spec, declared, failed)...)
	}
	sort.Slice(c.Types, func(i, j int) bool { return c.Types[i].Name < c.Types[j].Name })
	byTopic := map[string][]string{} // "stream/topic" -> types declared on it
	for _, t := range c.Types {
		for _, tp := range t.Topics {
			byTopic[tp] = append(byTopic[tp], t.Name)
		}
	}
	for _, cc := range conns {
		if cc == nil || !cc.Enabled {
			continue
		}
		errs = append(errs, c.addConnector(cc, byTopic, failed, declared[cc])...)
	}
	for _, e := range c.Endpoints {
		for _, name := range e.Types {
			t := c.Get(name)
			if e.Kind == KindSource {
				t.Producers = append(t.Producers, e)
			} else {
				t.Consumers = append(t.Consumers, e)
			}
		}
	}
	for _, t := range c.Types {
		for _, tp := range t.Topics {
			if !slices.ContainsFunc(t.Producers, func(e Endpoint) bool { return e.Address() == tp }) {
				stream, topic, _ := strings.Cut(tp, "/")
				t.Producers = append(t.Producers, Endpoint{Kind: KindTopic, Stream: stream, Topic: topic, Types: []string{t.Name}})
			}
		}
		t.Producers, t.Consumers = nonNil(t.Producers), nonNil(t.Consumers)
	}
	if c.Endpoints == nil {
		c.Endpoints = []Endpoint{}
	}
	if c.Types == nil {
		c.Types = []*Type{}
	}
	if len(errs) > 0 {
		return c, errs
	}
	return c, nil
}

func nonNil(e []Endpoint) []Endpoint {
	if e == nil {
		return []Endpoint{}
	}
	return e
}

func eventKey(name, key string) string {
	return "events." + quoteKey(name) + "." + key
}

func schemaKey(et *config.EventType) string {
	if et.SchemaPath == "" {
		return "schema"
	}
	return "schema_path"
}

// quoteKey quotes a TOML key unless it is bare.
func quoteKey(k string) string {
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Sprintf("%q", k)
		}
	}
	return k
}

// newType reads and compiles one entry's schema.
func newType(et *config.EventType) (*Type, error) {
	t := &Type{Name: et.Name, Description: et.Description, Version: et.Version, Format: et.Format,
		MessageType: et.MessageType, SchemaFile: et.SchemaPath, Topics: slices.Clone(et.Topics)}
	if t.Format == "" {
		t.Format = config.EventFormatJSONSchema
	}
	doc, err := loadSchema(et)
	if err != nil {
		return nil, err
	}
	switch {
	case len(doc) == 0:
	case t.Format == config.EventFormatProto:
		t.Schema, _ = json.Marshal(string(doc))
	default:
		if !json.Valid(doc) {
			return nil, fmt.Errorf("the %s schema is not valid JSON", t.Format)
		}
		t.Schema = json.RawMessage(doc)
	}
	if t.v, err = compile(t, et); err != nil {
		return nil, err
	}
	return t, nil
}

// addConnector adds cc's endpoints; errors for names not in the catalog.
// fromSpec are the types cc's spec declares (in the catalog already,
// or failed).
func (c *Catalog) addConnector(cc *config.Connector, byTopic map[string][]string, failed map[string]bool, fromSpec []connector.EventType) config.Errors {
	var errs config.Errors
	kind := KindSink
	switch {
	case cc.Type == config.KindSource:
		kind = KindSource
	case strings.HasPrefix(cc.Key, HookPrefix) && cc.PluginName() == "exec":
		kind = KindHook
	}
	add := func(i int, key string, stream, topic string, schema config.Schema, declared []string) {
		e := Endpoint{Kind: kind, Key: cc.Key, Plugin: cc.PluginName(), Stream: stream, Topic: topic, Schema: string(schema)}
		for j, name := range declared {
			if c.Get(name) == nil {
				if !failed[name] {
					errs = append(errs, c.unknown(cc, i, key, j, name))
				}
				continue
			}
			e.Types = append(e.Types, name)
		}
		for _, name := range byTopic[e.Address()] {
			if !slices.Contains(e.Types, name) {
				e.Types = append(e.Types, name)
			}
		}
		for _, d := range fromSpec {
			if d.AppliesTo(stream, topic) && c.Get(d.Name) != nil && !slices.Contains(e.Types, d.Name) {
				e.Types = append(e.Types, d.Name)
			}
		}
		c.Endpoints = append(c.Endpoints, e)
	}
	for i, s := range cc.Producers {
		add(i, "produces", s.Stream, s.Topic, s.Schema, s.Produces)
	}
	for i, s := range cc.Consumers {
		for k, topic := range s.Topics {
			declared := s.Consumes
			if k > 0 {
				// Report unknown names once per stream entry.
				declared = slices.DeleteFunc(slices.Clone(declared), func(n string) bool { return c.Get(n) == nil })
			}
			add(i, "consumes", s.Stream, topic, s.Schema, declared)
		}
	}
	return errs
}

func (c *Catalog) unknown(cc *config.Connector, i int, key string, j int, name string) *config.FieldError {
	msg := fmt.Sprintf("unknown event type %q", name)
	if s := didyoumean.Closest(name, c.Names()); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	msg += fmt.Sprintf(" (event types are declared in the runtime's config.toml as [events.%s])", quoteKey(name))
	return &config.FieldError{File: cc.File, Line: cc.StreamKeyLine(i, key),
		Key: fmt.Sprintf("streams[%d].%s[%d]", i, key, j), Msg: msg}
}

// Validate checks a JSON payload against the type named name: its JSON
// Schema, or the JSON mapping of its Avro or Protobuf schema. A type
// without a schema accepts any JSON. The error is a *ValidationError, or
// wraps ErrUnknownType.
func (c *Catalog) Validate(name string, payload []byte) error {
	t := c.Get(name)
	if t == nil || t.v == nil {
		return fmt.Errorf("%w %q", ErrUnknownType, name)
	}
	return t.v.validateJSON(name, payload)
}

// ValidateEncoded checks a payload in schema, its stream's payload
// schema: an Avro or Protobuf payload of a type of that format is
// decoded with the type's schema; JSON (and text) payloads are checked
// as Validate does. Other combinations are an error: the caller converts
// the payload to JSON first (runtime.eventCheck does, with the stream's
// codec).
func (c *Catalog) ValidateEncoded(name string, schema connector.Schema, payload []byte) error {
	t := c.Get(name)
	if t == nil || t.v == nil {
		return fmt.Errorf("%w %q", ErrUnknownType, name)
	}
	switch {
	case schema == "" || schema == connector.SchemaJSON || schema == connector.SchemaText:
		return t.v.validateJSON(name, payload)
	case schema == connector.SchemaAvro && t.Format == config.EventFormatAvro,
		schema == connector.SchemaProto && t.Format == config.EventFormatProto:
		return t.v.validateEncoded(name, payload)
	}
	return fmt.Errorf("event type %q (%s) cannot check a %s payload: convert it to JSON first", name, t.Format, schema)
}

// TypeOf tells which of declared a message is: the only one, else the
// ce_type header, else the JSON payload's top-level "type" member; the
// name must be one of declared; the error says why none applies.
func TypeOf(declared []string, ceType string, payload []byte) (name string, err error) {
	switch {
	case len(declared) == 1 && ceType == "":
		return declared[0], nil
	case len(declared) == 0:
		return "", fmt.Errorf("the stream declares no event type")
	}
	how := "its ce_type header"
	if ceType == "" {
		var doc struct {
			Type *string `json:"type"`
		}
		if json.Unmarshal(payload, &doc) != nil || doc.Type == nil {
			return "", fmt.Errorf("the message names no event type (a ce_type header or a top-level \"type\" member) and the stream declares several: %s",
				strings.Join(declared, ", "))
		}
		ceType, how = *doc.Type, "its \"type\" member"
	}
	if !slices.Contains(declared, ceType) {
		return "", fmt.Errorf("the message is of event type %q (%s), which the stream does not declare (it declares %s)",
			ceType, how, strings.Join(declared, ", "))
	}
	return ceType, nil
}

// ParseCatalog reads a catalog saved as JSON (GET /events, `ferry events
// list --json`), for Compare. Its types cannot Validate (schemas are not
// compiled). Errors name what is wrong.
func ParseCatalog(data []byte) (*Catalog, error) {
	var c Catalog
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("not a catalog (the JSON of GET /events): %w", err)
	}
	for i, t := range c.Types {
		if t == nil || t.Name == "" {
			return nil, fmt.Errorf("types[%d]: a type needs a name", i)
		}
		if !config.ValidEventTypeName(t.Name) {
			return nil, fmt.Errorf("types[%d]: %q is not an event type name", i, t.Name)
		}
		switch t.Format {
		case config.EventFormatJSONSchema, config.EventFormatAvro, config.EventFormatProto:
		default:
			return nil, fmt.Errorf("types[%d] (%s): format %q is not known", i, t.Name, t.Format)
		}
		if len(t.Schema) > 0 && !json.Valid(t.Schema) {
			return nil, fmt.Errorf("types[%d] (%s): the schema is not JSON", i, t.Name)
		}
	}
	sort.Slice(c.Types, func(i, j int) bool { return c.Types[i].Name < c.Types[j].Name })
	for i := 1; i < len(c.Types); i++ {
		if c.Types[i].Name == c.Types[i-1].Name {
			return nil, fmt.Errorf("type %q is listed twice", c.Types[i].Name)
		}
	}
	return &c, nil
}
