package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/internal/units"
)

// FormatDuration renders d the way the config files write durations,
// humantime style: "5ms", "1s", "1h 30m", "1s 500ms".
func FormatDuration(d time.Duration) string { return units.FormatDuration(d) }

type producerOut struct {
	Stream         string  `toml:"stream" json:"stream"`
	Topic          string  `toml:"topic" json:"topic"`
	Schema         string  `toml:"schema" json:"schema"`
	AvroSchemaJSON *string `toml:"avro_schema_json,omitempty" json:"avro_schema_json"`
	AvroSchemaPath *string `toml:"avro_schema_path,omitempty" json:"avro_schema_path"`
	BatchLength    uint32  `toml:"batch_length" json:"batch_length"`
	LingerTime     string  `toml:"linger_time" json:"linger_time"`
	// Ferry's delivery keys, when set.
	OnError          string   `toml:"on_error,omitempty" json:"on_error,omitempty"`
	DeadLetterStream string   `toml:"dead_letter_stream,omitempty" json:"dead_letter_stream,omitempty"`
	DeadLetterTopic  string   `toml:"dead_letter_topic,omitempty" json:"dead_letter_topic,omitempty"`
	Produces         []string `toml:"produces,omitempty" json:"produces,omitempty"`   // config/events.go
	KeyField         string   `toml:"key_field,omitempty" json:"key_field,omitempty"` // config/keys.go
	KeyTemplate      string   `toml:"key_template,omitempty" json:"key_template,omitempty"`
	KeyRequired      bool     `toml:"key_required,omitempty" json:"key_required,omitempty"`
	streamSchemaOut
}

// streamSchemaOut renders Ferry's schema extension keys when set.
type streamSchemaOut struct {
	AvroFraming          string   `toml:"avro_framing,omitempty" json:"avro_framing,omitempty"`
	AvroSchemaID         uint32   `toml:"avro_schema_id,omitempty,omitzero" json:"avro_schema_id,omitempty"`
	ProtoSchemaPath      string   `toml:"proto_schema_path,omitempty" json:"proto_schema_path,omitempty"`
	ProtoMessageType     string   `toml:"proto_message_type,omitempty" json:"proto_message_type,omitempty"`
	ProtoIncludePaths    []string `toml:"proto_include_paths,omitempty" json:"proto_include_paths,omitempty"`
	FlatBufferSchemaPath string   `toml:"flatbuffer_schema_path,omitempty" json:"flatbuffer_schema_path,omitempty"`
	FlatBufferRootTable  string   `toml:"flatbuffer_root_table,omitempty" json:"flatbuffer_root_table,omitempty"`
}

func schemaOut(s StreamSchema) streamSchemaOut {
	return streamSchemaOut{s.AvroFraming, s.AvroSchemaID, s.ProtoSchemaPath, s.ProtoMessageType,
		s.ProtoIncludePaths, s.FlatBufferSchemaPath, s.FlatBufferRootTable}
}

type consumerOut struct {
	Stream           string   `toml:"stream" json:"stream"`
	Topics           []string `toml:"topics" json:"topics"`
	Schema           string   `toml:"schema" json:"schema"`
	AvroSchemaJSON   *string  `toml:"avro_schema_json,omitempty" json:"avro_schema_json"`
	AvroSchemaPath   *string  `toml:"avro_schema_path,omitempty" json:"avro_schema_path"`
	BatchLength      uint32   `toml:"batch_length" json:"batch_length"`
	PollInterval     string   `toml:"poll_interval" json:"poll_interval"`
	ConsumerGroup    string   `toml:"consumer_group" json:"consumer_group"`
	MaxRetries       *uint32  `toml:"max_retries,omitempty" json:"max_retries,omitempty"`
	RetryBackoff     string   `toml:"retry_backoff,omitempty" json:"retry_backoff,omitempty"`
	MaxRetryBackoff  string   `toml:"max_retry_backoff,omitempty" json:"max_retry_backoff,omitempty"`
	OnError          string   `toml:"on_error,omitempty" json:"on_error,omitempty"`
	DeadLetterStream string   `toml:"dead_letter_stream,omitempty" json:"dead_letter_stream,omitempty"`
	DeadLetterTopic  string   `toml:"dead_letter_topic,omitempty" json:"dead_letter_topic,omitempty"`
	Ordering         string   `toml:"ordering,omitempty" json:"ordering,omitempty"`
	Concurrency      *int     `toml:"ordering_concurrency,omitempty" json:"ordering_concurrency,omitempty"`
	MaxPending       *int     `toml:"max_pending,omitempty" json:"max_pending,omitempty"`
	StartFrom        string   `toml:"start_from,omitempty" json:"start_from,omitempty"`
	Consumes         []string `toml:"consumes,omitempty" json:"consumes,omitempty"` // config/events.go
	streamSchemaOut
}

// streamsOut renders the streams; Ferry's delivery keys only when they
// differ from their defaults, so the output stays upstream-shaped.
func (c *Connector) streamsOut() any {
	if c.Type == KindSource {
		out := make([]producerOut, len(c.Producers))
		for i, s := range c.Producers {
			out[i] = producerOut{Stream: s.Stream, Topic: s.Topic, Schema: string(s.Schema), AvroSchemaJSON: optional(s.AvroSchemaJSON),
				AvroSchemaPath: optional(s.AvroSchemaPath), BatchLength: s.BatchLength, LingerTime: FormatDuration(s.LingerTime),
				OnError: string(s.OnError), DeadLetterStream: s.DeadLetterStream, DeadLetterTopic: s.DeadLetterTopic,
				Produces: s.Produces, KeyField: string(s.KeyField), KeyTemplate: string(s.KeyTemplate), KeyRequired: s.KeyRequired,
				streamSchemaOut: schemaOut(s.StreamSchema)}
		}
		return out
	}
	out := make([]consumerOut, len(c.Consumers))
	for i, s := range c.Consumers {
		o := consumerOut{
			Stream: s.Stream, Topics: s.Topics, Schema: string(s.Schema), AvroSchemaJSON: optional(s.AvroSchemaJSON),
			AvroSchemaPath: optional(s.AvroSchemaPath), BatchLength: s.BatchLength, PollInterval: FormatDuration(s.PollInterval),
			ConsumerGroup: s.ConsumerGroup, Consumes: s.Consumes, streamSchemaOut: schemaOut(s.StreamSchema),
		}
		if o.Topics == nil {
			o.Topics = []string{}
		}
		if s.MaxRetries != DefaultMaxRetries {
			n := s.MaxRetries
			o.MaxRetries = &n
		}
		if s.RetryBackoff != DefaultRetryBackoff {
			o.RetryBackoff = FormatDuration(s.RetryBackoff)
		}
		if s.MaxRetryBackoff != DefaultMaxRetryBackoff {
			o.MaxRetryBackoff = FormatDuration(s.MaxRetryBackoff)
		}
		if s.OnError != PolicyStop && s.OnError != "" {
			o.OnError, o.DeadLetterStream, o.DeadLetterTopic = string(s.OnError), s.DeadLetterStream, s.DeadLetterTopic
		}
		if s.Ordering != OrderPartition && s.Ordering != "" {
			o.Ordering = string(s.Ordering)
			if s.Concurrency != 0 {
				o.Concurrency = &s.Concurrency
			}
			if s.MaxPending != 0 {
				o.MaxPending = &s.MaxPending
			}
		}
		o.StartFrom = s.StartFrom
		out[i] = o
	}
	return out
}

// optional is nil for "" (JSON null, absent in TOML).
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MarshalTOML renders c as a connector file in upstream's format.
func (c Connector) MarshalTOML() ([]byte, error) {
	head := struct {
		Type               string `toml:"type"`
		Key                string `toml:"key"`
		Enabled            bool   `toml:"enabled"`
		Version            uint64 `toml:"version"`
		Name               string `toml:"name"`
		Path               string `toml:"path,omitempty"`
		PluginConfigFormat string `toml:"plugin_config_format,omitempty"`
		Verbose            bool   `toml:"verbose,omitempty"`
		Benchmark          bool   `toml:"benchmark,omitempty"`
		Streams            any    `toml:"streams"`
	}{string(c.Type), c.Key, c.Enabled, c.Version, c.Name, c.Path, string(c.PluginConfigFormat), c.Verbose, c.Benchmark, c.streamsOut()}
	var buf bytes.Buffer
	if err := encodeTOML(&buf, head); err != nil {
		return nil, err
	}
	if c.PluginConfig != nil {
		buf.WriteString("\n")
		if len(c.PluginConfig) == 0 {
			buf.WriteString("[plugin_config]\n")
		} else if err := encodeTOML(&buf, map[string]any{"plugin_config": c.PluginConfig}); err != nil {
			return nil, err
		}
	}
	for _, t := range c.Transforms {
		var tb bytes.Buffer
		cfg := t.Config
		if cfg == nil {
			cfg = map[string]any{"enabled": t.Enabled}
		}
		if err := encodeTOML(&tb, map[string]any{"transforms": map[string]any{t.Name: cfg}}); err != nil {
			return nil, err
		}
		// Each transform is encoded alone to keep their order; drop the
		// parent [transforms] header, which may appear only once.
		s := strings.TrimPrefix(tb.String(), "[transforms]\n")
		buf.WriteString("\n" + s)
	}
	return buf.Bytes(), nil
}

func encodeTOML(buf *bytes.Buffer, v any) error {
	enc := toml.NewEncoder(buf)
	enc.Indent = ""
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode TOML: %w", err)
	}
	return nil
}

// MarshalJSON renders c in upstream's JSON shape (SinkConfig or
// SourceConfig), as the runtime API and the HTTP provider exchange it.
// Transforms keep their order.
func (c Connector) MarshalJSON() ([]byte, error) {
	var tr any
	if len(c.Transforms) > 0 {
		o := make(ordered, 0, len(c.Transforms))
		for _, t := range c.Transforms {
			cfg := t.Config
			if cfg == nil {
				cfg = map[string]any{"enabled": t.Enabled}
			}
			o = append(o, kv{t.Name, jsonSafe(cfg)})
		}
		tr = o
	}
	var format any
	if c.PluginConfigFormat != "" {
		format = string(c.PluginConfigFormat)
	}
	var pc any
	if c.PluginConfig != nil {
		pc = jsonSafe(c.PluginConfig)
	}
	return json.Marshal(ordered{
		{"key", c.Key}, {"enabled", c.Enabled}, {"version", c.Version}, {"name", c.Name}, {"path", c.Path},
		{"transforms", tr}, {"streams", c.streamsOut()}, {"plugin_config_format", format},
		{"plugin_config", pc}, {"verbose", c.Verbose}, {"benchmark", c.Benchmark},
	})
}

// createBody is upstream's CreateSinkConfig / CreateSourceConfig: the
// connector without key and version.
func (c *Connector) createBody() ([]byte, error) {
	full, err := c.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(full, &m); err != nil {
		return nil, err
	}
	o := ordered{}
	for _, k := range []string{"enabled", "name", "path", "transforms", "streams", "plugin_config_format", "plugin_config", "verbose", "benchmark"} {
		o = append(o, kv{k, m[k]})
	}
	return json.Marshal(o)
}

type kv struct {
	k string
	v any
}

// ordered is a JSON object that keeps its key order.
type ordered []kv

func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jsonSafe converts TOML datetimes to RFC 3339 strings, and EnvValues to
// their inferred values.
func jsonSafe(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonSafe(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonSafe(e)
		}
		return out
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case EnvValue:
		return jsonSafe(x.Inferred)
	}
	return v
}
