package connector

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// This file is the decoder connectors used before Spec; only the
// transforms (package transform) still use it. It goes when they declare
// specs too.

// Decode fills v, a pointer to a struct with json tags, from the table. It
// is strict: a key v does not declare, or a value of the wrong type, is an
// error naming the source and the key.
//
// A value an environment variable set, whose type the configuration
// loader inferred (config.EnvValue: a value with an EnvText method),
// fills a string field with the variable's exact text ("0042", "true")
// and any other field with the inferred value (42, true).
//
// Deprecated: connectors declare a Spec and call Spec.Parse.
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
