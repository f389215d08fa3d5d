package config

import (
	"fmt"
	"strings"
)

// enum is implemented by the string types whose values come from a fixed
// list. Values are matched case-insensitively and stored in canonical form.
type enum interface {
	enumValues() []string
}

// aliased is implemented by enums that accept other spellings.
type aliased interface {
	enumAliases() map[string]string
}

// canonical returns the canonical spelling of s for e, or an error that
// lists the allowed values.
func canonical(e enum, s string) (string, error) {
	ls := strings.ToLower(strings.TrimSpace(s))
	for _, v := range e.enumValues() {
		if ls == v {
			return v, nil
		}
	}
	if a, ok := e.(aliased); ok {
		if v, ok := a.enumAliases()[ls]; ok {
			return v, nil
		}
	}
	msg := fmt.Sprintf("expected one of %s, got %q", strings.Join(quoted(e.enumValues()), ", "), s)
	if sg := suggest(s, e.enumValues()); sg != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", sg)
	}
	return "", fmt.Errorf("%s", msg)
}

func quoted(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = `"` + v + `"`
	}
	return out
}

// Kind is a connector's type: "source" or "sink".
type Kind string

// Connector kinds.
const (
	KindSource Kind = "source"
	KindSink   Kind = "sink"
)

func (Kind) enumValues() []string { return []string{"source", "sink"} }

// plural is the word upstream uses in URLs and JSON maps.
func (k Kind) plural() string { return string(k) + "s" }

// Schema is the encoding of the messages in a stream, named as upstream's
// connector SDK names them.
type Schema string

// Stream schemas.
const (
	SchemaJSON       Schema = "json"
	SchemaRaw        Schema = "raw"
	SchemaText       Schema = "text"
	SchemaProto      Schema = "proto"
	SchemaAvro       Schema = "avro"
	SchemaFlatBuffer Schema = "flatbuffer"
)

func (Schema) enumValues() []string {
	return []string{"json", "raw", "text", "proto", "avro", "flatbuffer"}
}

// Upstream's serde spelling of the FlatBuffer variant is "flat_buffer".
func (Schema) enumAliases() map[string]string {
	return map[string]string{"flat_buffer": "flatbuffer", "protobuf": "proto"}
}

// ConfigFormat labels a connector's plugin_config for the runtime API.
type ConfigFormat string

// Plugin config formats.
const (
	FormatJSON ConfigFormat = "json"
	FormatYAML ConfigFormat = "yaml"
	FormatTOML ConfigFormat = "toml"
	FormatText ConfigFormat = "text"
)

func (ConfigFormat) enumValues() []string { return []string{"json", "yaml", "toml", "text"} }

// ProviderType selects where connector configurations come from.
type ProviderType string

// Provider types.
const (
	ProviderLocal ProviderType = "local"
	ProviderHTTP  ProviderType = "http"
)

func (ProviderType) enumValues() []string { return []string{"local", "http"} }

// LogFormat is the format of the runtime's log lines.
type LogFormat string

// Log formats.
const (
	LogText LogFormat = "text"
	LogJSON LogFormat = "json"
)

func (LogFormat) enumValues() []string { return []string{"text", "json"} }

// LogLevel is the minimum level logged (Ferry extension).
type LogLevel string

func (LogLevel) enumValues() []string { return []string{"debug", "info", "warn", "error"} }

func (LogLevel) enumAliases() map[string]string {
	return map[string]string{"warning": "warn", "trace": "debug"}
}

// StateStorage selects the source state backend.
type StateStorage string

// State backends.
const (
	StorageFile StateStorage = "file"
	StorageHTTP StateStorage = "http"
	// StorageIggy (Ferry extension) keeps the state in an Iggy topic.
	StorageIggy StateStorage = "iggy"
)

func (StateStorage) enumValues() []string { return []string{"file", "http", "iggy"} }

// Transport is an OpenTelemetry exporter transport.
type Transport string

func (Transport) enumValues() []string { return []string{"grpc", "http"} }

// LoadMethod is the HTTP method the state store loads with.
type LoadMethod string

func (LoadMethod) enumValues() []string { return []string{"get", "post"} }

// SaveMethod is the HTTP method the state store saves with.
type SaveMethod string

func (SaveMethod) enumValues() []string { return []string{"put", "post", "patch"} }

// ErrorPolicy says what a sink does with a batch that still fails after
// its retries (Ferry extension).
type ErrorPolicy string

// Error policies.
const (
	// PolicyStop stops the connector (status Error) without committing the
	// failed batch, so nothing is lost; it resumes from there on restart.
	PolicyStop ErrorPolicy = "stop"
	// PolicyDeadLetter sends the failed messages to the dead-letter topic,
	// commits, and goes on.
	PolicyDeadLetter ErrorPolicy = "dead_letter"
)

func (ErrorPolicy) enumValues() []string { return []string{"stop", "dead_letter"} }

func (ErrorPolicy) enumAliases() map[string]string {
	return map[string]string{"dead-letter": "dead_letter", "dlq": "dead_letter"}
}

// Ordering says which messages of a sink stream are delivered in order
// (Ferry extension).
type Ordering string

// Orderings.
const (
	// OrderPartition delivers each partition's messages in offset order,
	// one batch at a time: a failing message holds up its partition
	// (upstream's behaviour, the default).
	OrderPartition Ordering = "partition"
	// OrderKey delivers the messages of each message key in offset order
	// (strict FIFO per key) and different keys in parallel: a failing key
	// holds up only itself.
	OrderKey Ordering = "key"
	// OrderNone promises no order: messages go out in parallel lanes and
	// a failing message holds up only its lane.
	OrderNone Ordering = "none"
)

func (Ordering) enumValues() []string { return []string{"partition", "key", "none"} }
