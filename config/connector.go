package config

import (
	"cmp"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Connector is one connector's configuration: one file in config_dir
// (one version of it), or one entry from the HTTP provider.
type Connector struct {
	Type    Kind   // source or sink
	Key     string // unique per type; letters, digits, '-', '_', '.'
	Enabled bool
	Version uint64
	Name    string
	// Path names the plugin. Upstream it is a shared library; Ferry maps it
	// to a built-in or out-of-process connector (see PluginName).
	Path string
	// PluginConfigFormat labels PluginConfig for the API (optional).
	PluginConfigFormat ConfigFormat
	// PluginConfig is the [plugin_config] table as plain Go values
	// (map[string]any, []any, string, int64, float64, bool, time.Time),
	// for the connector to decode with its own spec. Nil when absent.
	PluginConfig map[string]any
	// PluginConfigLines are the 1-based lines in File of the plugin_config
	// keys, by key path within the table ("timeout", "headers.Accept",
	// "tables[1]"; "" is the [plugin_config] header), so the connector's
	// spec check can name them (connector.PluginConfig.Lines). Nil when
	// the configuration did not come from a TOML file.
	PluginConfigLines map[string]int
	// PluginConfigVars name the IGGY_CONNECTORS_*_PLUGIN_CONFIG_* variable
	// that set a plugin_config key, by key path.
	PluginConfigVars map[string]string
	// Transforms are the [transforms.*] tables in file order.
	Transforms []Transform
	Verbose    bool
	Benchmark  bool
	// Producers are a source's [[streams]]; Consumers are a sink's.
	Producers []ProducerStream
	Consumers []ConsumerStream
	// File is the file this version was read from (empty for HTTP).
	File string
	// CreatedAt is when this version was created (the file's modification
	// time for local files); zero when unknown.
	CreatedAt time.Time
}

// Transform is one [transforms.<name>] table. Config holds the whole table
// (including "enabled") for the transform to decode with its own spec.
type Transform struct {
	Name    string
	Enabled bool
	Config  map[string]any
	// Lines are the 1-based lines in the file of the table's keys, by key
	// path within the table ("fields[0].key"; "" is the table itself), as
	// PluginConfigLines are for plugin_config. Nil when the configuration
	// did not come from a TOML file.
	Lines map[string]int
}

// TransformNames are the transforms upstream's SDK defines, and Ferry's
// wasm (WebAssembly modules, package transform/wasm) and plugin
// (transform plugins, package plugin/host).
var TransformNames = []string{
	"add_fields", "delete_fields", "filter_fields", "update_fields",
	"unwrap_envelope", "proto_convert", "avro_convert", "flat_buffer_convert",
	"wasm", "plugin",
}

// TransformAliases are other spellings of transform names, accepted and
// stored under the upstream name.
var TransformAliases = map[string]string{"flatbuffer_convert": "flat_buffer_convert"}

// ProducerStream is a source's [[streams]] entry: where it produces to.
type ProducerStream struct {
	Stream         string        `toml:"stream" cfg:"required"`
	Topic          string        `toml:"topic" cfg:"required"`
	Schema         Schema        `toml:"schema"`
	AvroSchemaJSON string        `toml:"avro_schema_json"`
	AvroSchemaPath string        `toml:"avro_schema_path"`
	BatchLength    uint32        `toml:"batch_length"`
	LingerTime     time.Duration `toml:"linger_time"`
	StreamSchema
	ProducedEvents // Ferry extension: produces = [...] (config/events.go)
	StreamKey      // Ferry extension: key_field, key_template, key_required (config/keys.go)

	// Ferry extensions: delivery. OnError says what happens to a polled
	// message that cannot be sent to this stream: one that does not
	// convert to its schema, or that Iggy would refuse (an empty or
	// oversized payload, headers over the limit). "dead_letter", the
	// default for sources (empty means it too; a sink's default is
	// "stop"), sends it to the dead-letter topic and the rest of the
	// batch on; "stop" sends nothing of the batch and sets the source to
	// status Error naming the message. See DeadLetterTarget.
	OnError ErrorPolicy `toml:"on_error"`
	// DeadLetterStream and DeadLetterTopic receive those messages with
	// on_error = "dead_letter"; empty means Stream and
	// "<key>_dead_letter", as for sinks.
	DeadLetterStream string `toml:"dead_letter_stream"`
	DeadLetterTopic  string `toml:"dead_letter_topic"`
}

// DeadLetterTarget returns the stream and topic that receive the messages
// of s that cannot be sent, for the source with key, its defaults
// applied; ok is false with on_error = "stop". (A source's delivery keys
// keep their zero values when unset, so a source file reads back as
// upstream's shape.)
func (s *ProducerStream) DeadLetterTarget(key string) (stream, topic string, ok bool) {
	if s.OnError == PolicyStop {
		return "", "", false
	}
	return cmp.Or(s.DeadLetterStream, s.Stream), cmp.Or(s.DeadLetterTopic, DefaultDeadLetterTopic(key)), true
}

// StreamSchema holds Ferry's extension keys of a [[streams]] entry for
// the schemas upstream configures only in its *_convert transforms: a
// proto stream's .proto file and message type, a flatbuffer stream's
// binary schema, and how Avro datums are framed. Relative paths are
// resolved against the connector file's directory.
type StreamSchema struct {
	// AvroFraming is "binary" (default: a bare datum, as upstream),
	// "single_object" or "confluent".
	AvroFraming string `toml:"avro_framing"`
	// AvroSchemaID is the registry id written with the confluent framing
	// (and checked on read when not zero).
	AvroSchemaID uint32 `toml:"avro_schema_id"`
	// ProtoSchemaPath is a .proto file compiled at start-up, and
	// ProtoMessageType the message in it; without them a proto payload
	// is a google.protobuf.Any, as upstream reads it.
	ProtoSchemaPath   string   `toml:"proto_schema_path"`
	ProtoMessageType  string   `toml:"proto_message_type"`
	ProtoIncludePaths []string `toml:"proto_include_paths"`
	// FlatBufferSchemaPath is a binary schema (.bfbs, from `flatc
	// --binary --schema`); FlatBufferRootTable overrides its root_type.
	FlatBufferSchemaPath string `toml:"flatbuffer_schema_path"`
	FlatBufferRootTable  string `toml:"flatbuffer_root_table"`
}

func (s *ProducerStream) setDefaults() {
	s.Schema, s.BatchLength, s.LingerTime = SchemaJSON, 1000, 5*time.Millisecond
}

func (*ProducerStream) keyHints() map[string]string {
	return map[string]string{
		"topics":        `a source produces to one topic: use topic = "name" (add another [[streams]] for more)`,
		"batch_size":    "use batch_length (renamed in upstream's current format)",
		"send_interval": "use linger_time (renamed in upstream's current format)",
		"poll_interval": "poll_interval is a sink key; sources use linger_time",
		"max_retries":   "max_retries is a sink key; a source retries a failed send until it succeeds",
		"retry_backoff": "retry_backoff is a sink key; a source retries a failed send until it succeeds",
	}
}

// ConsumerStream is a sink's [[streams]] entry: what it consumes, and
// (Ferry extensions) what happens when the sink fails.
type ConsumerStream struct {
	Stream         string   `toml:"stream" cfg:"required"`
	Topics         []string `toml:"topics" cfg:"required"`
	Schema         Schema   `toml:"schema"`
	AvroSchemaJSON string   `toml:"avro_schema_json"`
	AvroSchemaPath string   `toml:"avro_schema_path"`
	StreamSchema
	BatchLength  uint32        `toml:"batch_length"`
	PollInterval time.Duration `toml:"poll_interval"`
	// ConsumerGroup defaults to "iggy-connect-sink-<key>", as upstream.
	ConsumerGroup string `toml:"consumer_group"`

	// Ferry extensions: delivery. Offsets are committed only after the
	// sink accepts a batch. A failing batch is retried MaxRetries times,
	// waiting RetryBackoff, doubling up to MaxRetryBackoff; then OnError
	// applies.
	MaxRetries      uint32        `toml:"max_retries"`
	RetryBackoff    time.Duration `toml:"retry_backoff"`
	MaxRetryBackoff time.Duration `toml:"max_retry_backoff"`
	OnError         ErrorPolicy   `toml:"on_error"`
	// DeadLetterStream and DeadLetterTopic receive the failed messages
	// when OnError is "dead_letter". The stream defaults to Stream; the
	// topic defaults to "<key>_dead_letter".
	DeadLetterStream string `toml:"dead_letter_stream"`
	DeadLetterTopic  string `toml:"dead_letter_topic"`

	// Ordering is "partition" (the default), "key" or "none"; with "key"
	// and "none", Concurrency batches are in the sink at once (default
	// DefaultConcurrency) and MaxPending messages at most are read ahead
	// of the committed offset, per partition (default 10 × batch_length).
	Ordering    Ordering `toml:"ordering"`
	Concurrency int      `toml:"ordering_concurrency"`
	MaxPending  int      `toml:"max_pending"`
	// StartFrom is where a consumer group with no stored offset starts:
	// "first" (the default: the oldest message the topic holds), "now"
	// (only messages sent from then on) or an offset ("42"). A group that
	// has stored an offset goes on from it whatever StartFrom says.
	StartFrom string `toml:"start_from"`

	ConsumedEvents // Ferry extension: consumes = [...] (config/events.go)
}

// DefaultConcurrency is how many batches a sink stream with ordering
// "key" or "none" has in the sink at once.
const DefaultConcurrency = 16

// Default delivery settings of a sink stream (Ferry extensions).
const (
	DefaultMaxRetries      = 3
	DefaultRetryBackoff    = 100 * time.Millisecond
	DefaultMaxRetryBackoff = 10 * time.Second
)

func (s *ConsumerStream) setDefaults() {
	s.Schema, s.BatchLength, s.PollInterval = SchemaJSON, 1000, 5*time.Millisecond
	s.MaxRetries, s.RetryBackoff, s.MaxRetryBackoff = DefaultMaxRetries, DefaultRetryBackoff, DefaultMaxRetryBackoff
	s.OnError = PolicyStop
	s.Ordering = OrderPartition
}

func (*ConsumerStream) keyHints() map[string]string {
	return map[string]string{
		"topic":       `a sink reads a list of topics: use topics = ["name"]`,
		"batch_size":  "use batch_length (renamed in upstream's current format)",
		"linger_time": "linger_time is a source key; sinks use poll_interval",
	}
}

// DefaultConsumerGroup is the consumer group of a sink that names none.
func DefaultConsumerGroup(key string) string { return "iggy-connect-sink-" + key }

// DefaultDeadLetterTopic is the dead-letter topic of a connector's
// [[streams]] entry that names none.
func DefaultDeadLetterTopic(key string) string { return key + "_dead_letter" }

// PluginName is the connector implementation Path names: the file name
// without directories, "lib" prefix, "iggy_connector_" prefix, "_source" /
// "_sink" suffix or library extension. "target/release/libiggy_connector_
// random_source" and "random" both give "random".
func (c *Connector) PluginName() string {
	n := filepath.Base(filepath.ToSlash(c.Path))
	if i := strings.LastIndexByte(n, '/'); i >= 0 {
		n = n[i+1:]
	}
	for _, ext := range []string{".so", ".dylib", ".dll"} {
		n = strings.TrimSuffix(n, ext)
	}
	n = strings.TrimPrefix(n, "lib")
	n = strings.TrimPrefix(n, "iggy_connector_")
	n = strings.TrimSuffix(n, "_"+string(c.Type))
	return n
}

// connectorDoc is the shape of a connector file shared by both kinds.
type connectorDoc struct {
	Type               Kind           `toml:"type" cfg:"required,noenv"`
	Key                string         `toml:"key" cfg:"required,noenv"`
	Enabled            bool           `toml:"enabled"`
	Version            uint64         `toml:"version"`
	Name               string         `toml:"name"`
	Path               string         `toml:"path"`
	PluginConfigFormat ConfigFormat   `toml:"plugin_config_format"`
	PluginConfig       map[string]any `toml:"plugin_config" cfg:"noenv"`
	Transforms         transforms     `toml:"transforms" cfg:"noenv"`
	Verbose            bool           `toml:"verbose"`
	Benchmark          bool           `toml:"benchmark"`
}

func (*connectorDoc) keyHints() map[string]string {
	return map[string]string{
		"config":        "use [plugin_config] (older upstream releases used [config])",
		"config_format": "use plugin_config_format (older upstream releases used config_format)",
		"id":            "use key (older upstream releases used id)",
	}
}

type sourceDoc struct {
	connectorDoc
	Streams []ProducerStream `toml:"streams" cfg:"required"`
}

type sinkDoc struct {
	connectorDoc
	Streams []ConsumerStream `toml:"streams" cfg:"required"`
}

// transforms decodes [transforms.*] keeping file order.
type transforms []Transform

func (ts *transforms) bindFrom(b *binder, p path, v any) {
	t, ok := v.(*table)
	if !ok {
		b.fail(p, "expected a table of transforms such as [transforms.add_fields], got %s", typeName(v))
		return
	}
	for _, name := range t.keys {
		tp := p.key(name)
		key := name
		if canon, ok := TransformAliases[name]; ok {
			name = canon
		}
		if !slices.Contains(TransformNames, name) {
			msg := "unknown transform"
			if s := suggest(name, TransformNames); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				msg += "; known transforms: " + strings.Join(TransformNames, ", ")
			}
			b.fail(tp, "%s", msg)
			continue
		}
		tt, ok := t.vals[key].(*table)
		if !ok {
			b.fail(tp, "expected a table [transforms.%s], got %s", key, typeName(t.vals[key]))
			continue
		}
		tr := Transform{Name: name, Enabled: true, Config: tt.plain()}
		tr.Lines = keyLines(b.src, tp, tr.Config)
		if ev, ok := tt.get("enabled"); ok {
			bv, isBool := ev.(bool)
			if !isBool {
				b.fail(tp.key("enabled"), "expected true or false, got %s", describe(ev))
				continue
			}
			tr.Enabled = bv
		}
		*ts = append(*ts, tr)
	}
}

// bindConnector decodes a connector document. kind, when not empty, is the
// type the caller expects (the HTTP provider knows it from the response);
// key likewise.
func bindConnector(b *binder, t *table, kind Kind, key string) *Connector {
	if kind == "" {
		tv, ok := t.get("type")
		if !ok {
			b.fail(path{"type"}, `required key is missing; expected "source" or "sink"`)
			return nil
		}
		s, _ := tv.(string)
		k, err := canonical(Kind(""), s)
		if err != nil {
			if _, isStr := tv.(string); !isStr {
				b.fail(path{"type"}, `expected "source" or "sink", got %s`, describe(tv))
			} else {
				b.fail(path{"type"}, "%v", err)
			}
			return nil
		}
		kind = Kind(k)
	} else if !t.has("type") {
		t.set("type", string(kind))
	}
	if key != "" && !t.has("key") {
		t.set("key", key)
	}
	var c Connector
	switch kind {
	case KindSource:
		d := sourceDoc{connectorDoc: connectorDoc{Enabled: true}}
		b.bindStruct(path{}, t, reflect.ValueOf(&d).Elem())
		c = d.connector()
		c.Producers = d.Streams
	default:
		d := sinkDoc{connectorDoc: connectorDoc{Enabled: true}}
		b.bindStruct(path{}, t, reflect.ValueOf(&d).Elem())
		c = d.connector()
		c.Consumers = d.Streams
	}
	if c.Type != kind && c.Type != "" {
		b.fail(path{"type"}, "expected %q here, got %q", kind, c.Type)
	}
	c.Type = kind
	if key != "" && c.Key != key {
		b.fail(path{"key"}, "expected %q (the key it is listed under), got %q", key, c.Key)
	}
	return &c
}

func (t *table) has(k string) bool { _, ok := t.vals[k]; return ok }

func (d *connectorDoc) connector() Connector {
	return Connector{
		Type: d.Type, Key: d.Key, Enabled: d.Enabled, Version: d.Version, Name: d.Name, Path: d.Path,
		PluginConfigFormat: d.PluginConfigFormat, PluginConfig: d.PluginConfig,
		Transforms: []Transform(d.Transforms), Verbose: d.Verbose, Benchmark: d.Benchmark,
	}
}

// finish fills the defaults that depend on other keys.
func (c *Connector) finish() {
	if c.Name == "" {
		c.Name = c.Key
	}
	for i := range c.Consumers {
		s := &c.Consumers[i]
		if s.ConsumerGroup == "" {
			s.ConsumerGroup = DefaultConsumerGroup(c.Key)
		}
		if s.OnError == PolicyDeadLetter {
			if s.DeadLetterStream == "" {
				s.DeadLetterStream = s.Stream
			}
			if s.DeadLetterTopic == "" {
				s.DeadLetterTopic = DefaultDeadLetterTopic(c.Key)
			}
		}
	}
}

// ValidKey reports whether key is a valid connector key: 1 to 128 bytes
// of ASCII letters, digits, '-', '_' and '.', starting with a letter or a
// digit (upstream's rule; the key becomes part of file names and URLs).
func ValidKey(key string) bool {
	if key == "" || len(key) > 128 || !isAlnum(key[0]) {
		return false
	}
	for i := 1; i < len(key); i++ {
		if c := key[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validate checks what the types alone do not.
func (c *Connector) validate(b *binder) {
	if c.Key != "" && !ValidKey(c.Key) {
		b.fail(path{"key"}, "expected 1 to 128 letters, digits, '-', '_' or '.', starting with a letter or digit; got %q", c.Key)
	}
	sp := path{"streams"}
	if b.has(sp) && len(c.Producers)+len(c.Consumers) == 0 {
		b.fail(sp, "expected at least one [[streams]] entry")
	}
	for i, s := range c.Producers {
		p := sp.index(i)
		nonEmpty(b, p.key("stream"), s.Stream)
		nonEmpty(b, p.key("topic"), s.Topic)
		checkBatch(b, p.key("batch_length"), s.BatchLength)
		checkAvro(b, p, s.AvroSchemaJSON, s.AvroSchemaPath)
		s.StreamSchema.check(b, p, s.Schema)
		c.checkSourceDeadLetter(b, p, &s)
	}
	for i, s := range c.Consumers {
		p := sp.index(i)
		nonEmpty(b, p.key("stream"), s.Stream)
		if b.has(p.key("topics")) && len(s.Topics) == 0 {
			b.fail(p.key("topics"), "expected at least one topic")
		}
		for j, t := range s.Topics {
			nonEmpty(b, p.key("topics").index(j), t)
		}
		checkBatch(b, p.key("batch_length"), s.BatchLength)
		checkAvro(b, p, s.AvroSchemaJSON, s.AvroSchemaPath)
		s.StreamSchema.check(b, p, s.Schema)
		if s.PollInterval <= 0 {
			b.fail(p.key("poll_interval"), `expected a duration above zero, such as "5ms"`)
		}
		if s.Concurrency < 0 || s.Concurrency > 1024 {
			b.fail(p.key("ordering_concurrency"), "expected 1 to 1024, got %d", s.Concurrency)
		}
		if s.MaxPending < 0 {
			b.fail(p.key("max_pending"), "expected a number of messages above zero, got %d", s.MaxPending)
		}
		if s.Ordering == OrderPartition {
			for _, k := range []string{"ordering_concurrency", "max_pending"} {
				if b.has(p.key(k)) {
					b.fail(p.key(k), `only used with ordering = "key" or "none"`)
				}
			}
		}
		if _, err := ParseStartFrom(s.StartFrom); err != nil {
			b.fail(p.key("start_from"), "%v", err)
		}
		if s.MaxRetryBackoff < s.RetryBackoff {
			b.fail(p.key("max_retry_backoff"), "must not be shorter than retry_backoff (%s)", FormatDuration(s.RetryBackoff))
		}
		if s.OnError != PolicyDeadLetter {
			for _, k := range []string{"dead_letter_stream", "dead_letter_topic"} {
				if b.has(p.key(k)) {
					b.fail(p.key(k), `only used with on_error = "dead_letter"`)
				}
			}
		} else if s.DeadLetterStream == s.Stream && slices.Contains(s.Topics, s.DeadLetterTopic) {
			b.fail(p.key("dead_letter_topic"), "must differ from the topics the sink reads, or failed messages would be consumed again")
		}
	}
}

// checkSourceDeadLetter checks a source stream's dead-letter keys: only
// with on_error = "dead_letter", and not naming a topic the source
// produces to (the failed messages would be mixed with the ones sent).
func (c *Connector) checkSourceDeadLetter(b *binder, p path, s *ProducerStream) {
	stream, topic, ok := s.DeadLetterTarget(c.Key)
	if !ok {
		for _, k := range []string{"dead_letter_stream", "dead_letter_topic"} {
			if b.has(p.key(k)) {
				b.fail(p.key(k), `only used with on_error = "dead_letter"`)
			}
		}
		return
	}
	for _, o := range c.Producers {
		if o.Stream == stream && o.Topic == topic {
			b.fail(p.key("dead_letter_topic"), "must differ from the topics the source produces to (%s/%s), or failed messages would be mixed with the ones sent", stream, topic)
			return
		}
	}
}

func nonEmpty(b *binder, p path, s string) {
	if strings.TrimSpace(s) == "" && b.has(p) {
		b.fail(p, "expected a non-empty string")
	}
}

func checkBatch(b *binder, p path, n uint32) {
	if n == 0 {
		b.fail(p, "expected an integer of at least 1")
	}
}

func checkAvro(b *binder, p path, inline, file string) {
	if inline != "" && file != "" {
		b.fail(p.key("avro_schema_path"), "set either avro_schema_json or avro_schema_path, not both")
	}
}

// check reports schema keys that do not belong to the stream's schema.
func (s *StreamSchema) check(b *binder, p path, schema Schema) {
	only := func(key string, want Schema) {
		if b.has(p.key(key)) && schema != want {
			b.fail(p.key(key), "only used with schema = %q", want)
		}
	}
	for _, k := range []string{"avro_framing", "avro_schema_id"} {
		only(k, SchemaAvro)
	}
	for _, k := range []string{"proto_schema_path", "proto_message_type", "proto_include_paths"} {
		only(k, SchemaProto)
	}
	for _, k := range []string{"flatbuffer_schema_path", "flatbuffer_root_table"} {
		only(k, SchemaFlatBuffer)
	}
	switch s.AvroFraming {
	case "", "binary", "single_object", "confluent":
	default:
		b.fail(p.key("avro_framing"), `expected one of "binary", "single_object", "confluent", got %q`, s.AvroFraming)
	}
	switch {
	case s.ProtoSchemaPath != "" && s.ProtoMessageType == "":
		b.fail(p.key("proto_schema_path"), "needs proto_message_type (the message type to read, such as \"shop.Order\")")
	case s.ProtoSchemaPath == "" && s.ProtoMessageType != "":
		b.fail(p.key("proto_message_type"), "needs proto_schema_path")
	}
	if s.FlatBufferRootTable != "" && s.FlatBufferSchemaPath == "" {
		b.fail(p.key("flatbuffer_root_table"), "only used with flatbuffer_schema_path")
	}
}

// resolve anchors the schema paths to dir.
func (s *StreamSchema) resolve(dir string) {
	s.ProtoSchemaPath = resolvePath(dir, s.ProtoSchemaPath, true)
	s.FlatBufferSchemaPath = resolvePath(dir, s.FlatBufferSchemaPath, true)
	for i, p := range s.ProtoIncludePaths {
		s.ProtoIncludePaths[i] = resolvePath(dir, p, true)
	}
}

// StartFrom is a parsed start_from: First, Now, or an Offset.
type StartFrom struct {
	Now    bool
	Offset uint64 // with Now false: the first offset to read (0 = first)
}

// ParseStartFrom parses a start_from value: "" or "first", "now", or an
// offset in decimal.
func ParseStartFrom(v string) (StartFrom, error) {
	switch v {
	case "", "first":
		return StartFrom{}, nil
	case "now":
		return StartFrom{Now: true}, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return StartFrom{}, fmt.Errorf(`expected "first", "now" or an offset such as "42", got %q`, v)
	}
	return StartFrom{Offset: n}, nil
}
