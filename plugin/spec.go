package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/units"
	"github.com/ferryhq/ferry/plugin/pluginpb"
)

var typesToProto = map[connector.Type]pluginpb.FieldType{
	connector.TypeString:   pluginpb.FieldType_FIELD_TYPE_STRING,
	connector.TypeInt:      pluginpb.FieldType_FIELD_TYPE_INT,
	connector.TypeFloat:    pluginpb.FieldType_FIELD_TYPE_FLOAT,
	connector.TypeBool:     pluginpb.FieldType_FIELD_TYPE_BOOL,
	connector.TypeDuration: pluginpb.FieldType_FIELD_TYPE_DURATION,
	connector.TypeSize:     pluginpb.FieldType_FIELD_TYPE_SIZE,
	connector.TypeEnum:     pluginpb.FieldType_FIELD_TYPE_ENUM,
	connector.TypeList:     pluginpb.FieldType_FIELD_TYPE_LIST,
	connector.TypeMap:      pluginpb.FieldType_FIELD_TYPE_MAP,
	connector.TypeObject:   pluginpb.FieldType_FIELD_TYPE_OBJECT,
	connector.TypeAny:      pluginpb.FieldType_FIELD_TYPE_ANY,
	connector.TypeEither:   pluginpb.FieldType_FIELD_TYPE_EITHER,
}

// typeNames are the spellings of field types a manifest's [[settings]]
// accept, as connector.Type names them plus short forms.
var typeNames = map[string]connector.Type{
	"string": connector.TypeString, "int": connector.TypeInt, "integer": connector.TypeInt,
	"float": connector.TypeFloat, "number": connector.TypeFloat, "bool": connector.TypeBool,
	"boolean": connector.TypeBool, "duration": connector.TypeDuration, "size": connector.TypeSize,
	"byte size": connector.TypeSize, "enum": connector.TypeEnum, "list": connector.TypeList,
	"map": connector.TypeMap, "object": connector.TypeObject, "any": connector.TypeAny,
	"value": connector.TypeAny, "either": connector.TypeEither,
}

// SpecToProto is the Spec call's form of a spec's fields. Checks and
// lints are Go functions and do not travel: a plugin runs them itself
// when it opens.
func SpecToProto(s *connector.Spec) ([]*pluginpb.Field, error) {
	if s == nil {
		return nil, nil
	}
	out := make([]*pluginpb.Field, 0, len(s.Fields))
	for _, f := range s.Fields {
		pf, err := FieldToProto(f)
		if err != nil {
			return nil, err
		}
		out = append(out, pf)
	}
	return out, nil
}

// FieldToProto is the Spec call's form of one field.
func FieldToProto(f connector.Field) (*pluginpb.Field, error) {
	t, ok := typesToProto[f.Type]
	if !ok {
		return nil, fmt.Errorf("field %q: unknown type %q", f.Name, f.Type)
	}
	pf := &pluginpb.Field{Name: f.Name, Type: t, Doc: f.Doc, Required: f.Required, Secret: f.Secret,
		Values: f.Values, Aliases: f.Aliases, Numbers: f.Numbers, Min: f.Min, Max: f.Max}
	var err error
	if pf.DefaultJson, err = valueJSON(f.Default); err != nil {
		return nil, fmt.Errorf("field %q: default: %w", f.Name, err)
	}
	if pf.ExampleJson, err = valueJSON(f.Example); err != nil {
		return nil, fmt.Errorf("field %q: example: %w", f.Name, err)
	}
	if f.Elem != nil {
		if pf.Elem, err = FieldToProto(*f.Elem); err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
	}
	for _, sub := range f.Fields {
		p, err := FieldToProto(sub)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		pf.Fields = append(pf.Fields, p)
	}
	for _, alt := range f.Alternatives {
		p, err := FieldToProto(alt)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", f.Name, err)
		}
		pf.Alternatives = append(pf.Alternatives, p)
	}
	return pf, nil
}

// valueJSON renders a default or an example as default_json does:
// durations as text ("5s"), everything else as JSON.
func valueJSON(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case time.Duration:
		v = units.FormatDuration(x)
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// SpecFromProto turns the Spec call's fields into a spec the runtime
// checks plugin_config with. It fails on what a spec cannot hold (an
// unknown type, an enum without values, a default of the wrong type), in
// words that name the field.
func SpecFromProto(fields []*pluginpb.Field) (spec *connector.Spec, err error) {
	fs := make([]connector.Field, 0, len(fields))
	for i, pf := range fields {
		f, err := FieldFromProto(pf)
		if err != nil {
			return nil, fmt.Errorf("settings[%d]: %w", i, err)
		}
		fs = append(fs, f)
	}
	defer func() {
		if r := recover(); r != nil {
			spec, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return connector.NewSpec(fs...), nil
}

// FieldFromProto turns one field of the Spec call into a connector.Field.
func FieldFromProto(pf *pluginpb.Field) (connector.Field, error) {
	if pf == nil {
		return connector.Field{}, errors.New("an empty field")
	}
	var t connector.Type
	for ct, p := range typesToProto {
		if p == pf.Type {
			t = ct
		}
	}
	if t == "" {
		return connector.Field{}, fmt.Errorf("field %q: type %v is not one of the field types", pf.Name, pf.Type)
	}
	f := connector.Field{Name: pf.Name, Type: t, Doc: pf.Doc, Required: pf.Required, Secret: pf.Secret,
		Values: slices.Clone(pf.Values), Numbers: pf.Numbers, Min: pf.Min, Max: pf.Max}
	if len(pf.Aliases) > 0 {
		f.Aliases = maps.Clone(pf.Aliases)
	}
	if pf.Elem != nil {
		e, err := FieldFromProto(pf.Elem)
		if err != nil {
			return f, fmt.Errorf("field %q: element: %w", pf.Name, err)
		}
		f.Elem = &e
	}
	for _, sub := range pf.Fields {
		s, err := FieldFromProto(sub)
		if err != nil {
			return f, fmt.Errorf("field %q: %w", pf.Name, err)
		}
		f.Fields = append(f.Fields, s)
	}
	for _, alt := range pf.Alternatives {
		a, err := FieldFromProto(alt)
		if err != nil {
			return f, fmt.Errorf("field %q: %w", pf.Name, err)
		}
		f.Alternatives = append(f.Alternatives, a)
	}
	var err error
	if f.Default, err = fieldValue(f, pf.DefaultJson); err != nil {
		return f, fmt.Errorf("field %q: default_json: %w", pf.Name, err)
	}
	if f.Example, err = fieldValue(f, pf.ExampleJson); err != nil {
		return f, fmt.Errorf("field %q: example_json: %w", pf.Name, err)
	}
	return f, nil
}

// fieldValue reads a default or an example given as JSON into the Go
// type a connector.Field holds, by parsing it with the field itself.
func fieldValue(f connector.Field, text string) (v any, err error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	raw, err := decodeJSON([]byte(text))
	if err != nil {
		return nil, err
	}
	return ParseValue(f, raw)
}

// ParseValue reads raw (a value as TOML or JSON give it: string, int64,
// float64, bool, []any, map[string]any) into the Go type a
// connector.Field's Default holds (int, time.Duration, int64 for a size,
// []string for a list of strings …), checking it with the field's own
// rules.
func ParseValue(f connector.Field, raw any) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("%v", r)
		}
	}()
	g := f
	g.Name, g.Required, g.Default, g.Example, g.Check = "v", false, nil, nil, nil
	spec := &connector.Spec{Fields: []connector.Field{g}}
	set, err := spec.Parse(connector.PluginConfig{Values: map[string]any{"v": raw}, Table: "value"})
	if err != nil {
		var se connector.SettingErrors
		if errors.As(err, &se) && len(se) > 0 {
			return nil, errors.New(se[0].Msg)
		}
		return nil, err
	}
	return held(f, set.Value("v")), nil
}

// held converts a parsed value to the type a Default holds where they
// differ: lists of strings or ints, and maps of strings.
func held(f connector.Field, v any) any {
	switch x := v.(type) {
	case []any:
		switch {
		case f.Elem != nil && (f.Elem.Type == connector.TypeString || f.Elem.Type == connector.TypeEnum):
			out := make([]string, len(x))
			for i, e := range x {
				out[i], _ = e.(string)
			}
			return out
		case f.Elem != nil && f.Elem.Type == connector.TypeInt:
			out := make([]int, len(x))
			for i, e := range x {
				out[i], _ = e.(int)
			}
			return out
		}
	case map[string]any:
		if f.Type == connector.TypeMap && f.Elem != nil && f.Elem.Type == connector.TypeString {
			out := make(map[string]string, len(x))
			for k, e := range x {
				out[k], _ = e.(string)
			}
			return out
		}
	}
	return v
}

// decodeJSON decodes JSON into the values a plugin_config holds: integers
// as int64, other numbers as float64.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("more than one JSON value")
	}
	return plainNumbers(v), nil
}

// DecodeConfig decodes an OpenRequest's config_json into the values a
// connector.PluginConfig holds.
func DecodeConfig(configJSON string) (map[string]any, error) {
	if strings.TrimSpace(configJSON) == "" {
		return map[string]any{}, nil
	}
	v, err := decodeJSON([]byte(configJSON))
	if err != nil {
		return nil, fmt.Errorf("config_json: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("config_json: want a JSON object, got %s", strings.TrimSpace(configJSON)[:1])
	}
	return m, nil
}

func plainNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = plainNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = plainNumbers(x[k])
		}
	}
	return v
}
