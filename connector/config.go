package connector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// Config is what a connector's constructor receives.
type Config struct {
	// Key is the connector's key from its configuration file.
	Key string
	// Name is the connector's display name.
	Name string
	// Plugin is the connector's [plugin_config] table.
	Plugin PluginConfig
	// Logger logs with the connector's key attached.
	Logger *slog.Logger
	// Verbose asks the connector to log each message it handles (upstream's
	// `verbose = true`).
	Verbose bool
	// Paths says which files the connector may read and write: a
	// connector that opens files named by its configuration checks each
	// path with Paths.Check first.
	Paths Paths
}

// PluginConfig holds a connector's [plugin_config] table as it was parsed.
type PluginConfig struct {
	// Values are the table's keys and values (strings, numbers, booleans,
	// arrays and nested tables).
	Values map[string]any
	// Source names where the table came from, for error messages, such as
	// "connectors/postgres.toml".
	Source string
	// Table is the table's dotted name in errors; empty means
	// "plugin_config".
	Table string
}

// Decode fills v, a pointer to a struct with json tags, from the table. It
// is strict: a key v does not declare, or a value of the wrong type, is an
// error naming the source and the key. Use Duration for durations written
// as "5s" or "1h 30m".
//
// A value an environment variable set, whose type the configuration
// loader inferred (config.EnvValue: a value with an EnvText method),
// fills a string field with the variable's exact text ("0042", "true")
// and any other field with the inferred value (42, true).
func (p PluginConfig) Decode(v any) error {
	var values any = p.Values
	if t := reflect.TypeOf(v); t != nil && t.Kind() == reflect.Pointer {
		values = resolveEnv(p.Values, t.Elem())
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return p.errorf("", "cannot be read: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			return p.errorf(typeErr.Field, "is %s, want %s", typeErr.Value, typeErr.Type)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			key := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return p.errorf(key, "is not a setting of this connector")
		}
		return p.errorf("", "%v", err)
	}
	return nil
}

// envText is a value set by an environment variable: its text, and the
// value inferred from it (config.EnvValue).
type envText interface {
	EnvText() (raw string, inferred any)
}

// resolveEnv replaces the envText values in v, which Decode will decode
// into type t (nil when unknown): by the text for a string field, by the
// inferred value otherwise.
func resolveEnv(v any, t reflect.Type) any {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if e, ok := v.(envText); ok {
		raw, inferred := e.EnvText()
		if t != nil && t.Kind() == reflect.String {
			return raw
		}
		return resolveEnv(inferred, t)
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = resolveEnv(e, memberType(t, k))
		}
		return out
	case []any:
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = resolveEnv(e, et)
		}
		return out
	}
	return v
}

// memberType is the type encoding/json decodes the member key of an
// object into, for a struct (by json name, exactly, else ignoring case,
// as encoding/json matches) or a map; nil when unknown.
func memberType(t reflect.Type, key string) reflect.Type {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Map:
		return t.Elem()
	case reflect.Struct:
	default:
		return nil
	}
	var folded reflect.Type
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous && f.Tag.Get("json") == "" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return f.Type
		}
		if folded == nil && strings.EqualFold(name, key) {
			folded = f.Type
		}
	}
	return folded
}

func (p PluginConfig) errorf(key, format string, args ...any) error {
	where := p.Table
	if where == "" {
		where = "plugin_config"
	}
	if key != "" {
		where += "." + key
	}
	if p.Source != "" {
		where = p.Source + ": " + where
	}
	return fmt.Errorf("%s %s", where, fmt.Sprintf(format, args...))
}

// Required returns an error naming the key when a required setting is empty.
func (p PluginConfig) Required(key string, value string) error {
	if value == "" {
		return p.errorf(key, "is required")
	}
	return nil
}

// Duration is a time.Duration read from a string such as "250ms", "5s" or
// "1h 30m" (humantime style, as upstream), or from a number of milliseconds.
type Duration time.Duration

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var ms int64
		if err := json.Unmarshal(b, &ms); err != nil {
			return fmt.Errorf("duration %s: want a string such as \"5s\"", b)
		}
		*d = Duration(time.Duration(ms) * time.Millisecond)
		return nil
	}
	v, err := wire.ParseHumanDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
