package connector

import (
	"fmt"
	"log/slog"
	"sort"
	"time"
)

// Settings are a plugin_config that passed its Spec: every field parsed,
// defaults applied. The getters take a field name of the spec and panic
// on a name the spec does not declare or a getter of another type (a
// connector's own bug, which its tests find at once).
type Settings struct {
	fields []Field
	values map[string]any  // parsed values and defaults
	set    map[string]bool // keys the configuration wrote
	pc     PluginConfig
	key    string // key path of this table within plugin_config
}

func (s *Settings) get(name string, types ...Type) any {
	f := field(s.fields, name)
	if f == nil {
		panic(fmt.Sprintf("connector: setting %q is not in the spec", join(s.key, name)))
	}
	for _, t := range types {
		if f.Type == t {
			return s.values[name]
		}
	}
	panic(fmt.Sprintf("connector: setting %q is a %s, not a %v", join(s.key, name), f.Type, types))
}

// Has reports whether the configuration set the key (not only its default).
func (s *Settings) Has(name string) bool {
	s.get(name, s.typeOf(name))
	return s.set[name]
}

func (s *Settings) typeOf(name string) Type {
	if f := field(s.fields, name); f != nil {
		return f.Type
	}
	return ""
}

// String returns a string or an enum field ("" when unset without default).
func (s *Settings) String(name string) string {
	v, _ := s.get(name, TypeString, TypeEnum).(string)
	return v
}

// Int returns an int field.
func (s *Settings) Int(name string) int {
	v, _ := s.get(name, TypeInt).(int)
	return v
}

// Float returns a float field.
func (s *Settings) Float(name string) float64 {
	v, _ := s.get(name, TypeFloat).(float64)
	return v
}

// Bool returns a bool field.
func (s *Settings) Bool(name string) bool {
	v, _ := s.get(name, TypeBool).(bool)
	return v
}

// Duration returns a duration field.
func (s *Settings) Duration(name string) time.Duration {
	v, _ := s.get(name, TypeDuration).(time.Duration)
	return v
}

// Size returns a byte size field.
func (s *Settings) Size(name string) int64 {
	v, _ := s.get(name, TypeSize).(int64)
	return v
}

// Strings returns a list of strings or enums (nil when unset without
// default).
func (s *Settings) Strings(name string) []string {
	switch x := s.get(name, TypeList).(type) {
	case []string:
		return append([]string(nil), x...)
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			out[i], _ = e.(string)
		}
		return out
	}
	return nil
}

// Ints returns a list of ints.
func (s *Settings) Ints(name string) []int {
	switch x := s.get(name, TypeList).(type) {
	case []int:
		return append([]int(nil), x...)
	case []any:
		out := make([]int, len(x))
		for i, e := range x {
			out[i], _ = e.(int)
		}
		return out
	}
	return nil
}

// StringMap returns a map of strings (nil when unset without default).
func (s *Settings) StringMap(name string) map[string]string {
	switch x := s.get(name, TypeMap).(type) {
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, v := range x {
			out[k] = v
		}
		return out
	case map[string]any:
		out := make(map[string]string, len(x))
		for k, v := range x {
			out[k], _ = v.(string)
		}
		return out
	}
	return nil
}

// Objects returns a list of tables' settings (nil when unset).
func (s *Settings) Objects(name string) []*Settings {
	x, _ := s.get(name, TypeList).([]any)
	if x == nil {
		return nil
	}
	out := make([]*Settings, len(x))
	for i, e := range x {
		out[i], _ = e.(*Settings)
	}
	return out
}

// Value returns a field's parsed value of whatever type, for an any or
// an either field (a *Settings for a table alternative); nil when unset
// without default.
func (s *Settings) Value(name string) any { return s.get(name, s.typeOf(name)) }

// Object returns a nested table's settings.
func (s *Settings) Object(name string) *Settings {
	v, _ := s.get(name, TypeObject).(*Settings)
	return v
}

// Errorf is an error at a key path within these settings ("url",
// "headers.Accept", "tables[1]"), with its file and line, for what a
// constructor finds after the check.
func (s *Settings) Errorf(key, format string, args ...any) error {
	if s.key != "" {
		key = s.key + "." + key
	}
	return s.pc.Errorf(key, format, args...)
}

// LogValue renders the settings for slog with the secret fields redacted.
func (s *Settings) LogValue() slog.Value {
	names := make([]string, 0, len(s.values))
	for k := range s.values {
		names = append(names, k)
	}
	sort.Strings(names)
	attrs := make([]slog.Attr, 0, len(names))
	for _, k := range names {
		f := field(s.fields, k)
		switch v := s.values[k].(type) {
		case *Settings:
			attrs = append(attrs, slog.Any(k, v))
		default:
			if f.Secret || (f.Elem != nil && f.Elem.Secret) {
				attrs = append(attrs, slog.String(k, "****"))
			} else {
				attrs = append(attrs, slog.Any(k, v))
			}
		}
	}
	return slog.GroupValue(attrs...)
}
