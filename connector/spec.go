package connector

import (
	"fmt"
	"strings"
)

// Type is the kind of value a plugin_config field holds.
type Type string

// Field types.
const (
	TypeString   Type = "string"
	TypeInt      Type = "int"
	TypeFloat    Type = "float"
	TypeBool     Type = "bool"
	TypeDuration Type = "duration"  // "250ms", "5s", "1h 30m", "0"; an integer is milliseconds
	TypeSize     Type = "byte size" // 1048576, "64MiB", "1GB"
	TypeEnum     Type = "enum"      // one of Values (or an alias), matched ignoring case
	TypeList     Type = "list"      // of Elem
	TypeMap      Type = "map"       // string keys to Elem
	TypeObject   Type = "object"    // a nested table of Fields
	TypeAny      Type = "value"     // any value, as the file gives it
	TypeEither   Type = "either"    // one of Alternatives, chosen by the value's kind
)

// Spec declares a connector's plugin_config: one list of fields drives the
// check of configuration files (every problem of a file at once, with its
// line), the parsed values constructors read (Settings), redaction of
// secrets and the reference documentation. Build one with NewSpec and
// the New*Field functions, as a package-level variable:
//
//	var spec = connector.NewSpec(
//		connector.NewStringField("url").Require().WithExample("https://example.com/hook").
//			WithDoc("where messages are sent"),
//		connector.NewDurationField("timeout").WithDefault(30*time.Second).WithDoc("per request"),
//	)
type Spec struct {
	// Fields are the top-level keys of plugin_config, in documentation
	// order.
	Fields []Field
	// Lints are checks across fields, run once every field parsed; each
	// reports its problems through fail, naming a key path.
	Lints []func(s *Settings, fail FailFunc)
	// Events are the event types the connector produces (a source) or
	// consumes (a sink), with their schemas (see EventType and
	// DeclareEvents); nil: none declared.
	Events []EventType
}

// FailFunc reports one problem at a key path of plugin_config ("url",
// "headers.Authorization", "tables[1]").
type FailFunc func(key, format string, args ...any)

// NewSpec returns a spec of the fields. It panics on a duplicate name or
// a field that cannot work (an enum without values, a default of the
// wrong type): specs are package-level values, and tests load them.
func NewSpec(fields ...Field) *Spec {
	s := &Spec{Fields: fields}
	if err := checkFields("", fields); err != nil {
		panic("connector: " + err.Error())
	}
	return s
}

// Lint adds a check across fields and returns s.
func (s *Spec) Lint(fn func(s *Settings, fail FailFunc)) *Spec {
	s.Lints = append(s.Lints, fn)
	return s
}

// Field is one key of a plugin_config. Build it with a New*Field function
// and the chained setters (each returns a changed copy).
type Field struct {
	Name string
	Type Type
	// Doc is one line for the reference and describe.
	Doc string
	// Default is the value when the key is absent, of the type Settings
	// returns (string, int, float64, bool, time.Duration, int64 for a
	// size, []string / []int for lists); nil means none.
	Default any
	// Required fields must be set; they have no default.
	Required bool
	// Secret fields are never echoed in errors, and API answers and logs
	// redact them.
	Secret bool
	// Example is a value for the sample configuration (TOML-ready: the
	// same Go types as Default).
	Example any
	// Values are the allowed values of an enum (its canonical spellings).
	Values []string
	// Aliases map other accepted spellings of an enum to one of Values.
	Aliases map[string]string
	// Elem is the element of a list or a map.
	Elem *Field
	// Fields are the keys of an object.
	Fields []Field
	// Alternatives are the shapes an either field takes, such as a name
	// or a table: the first whose type takes the value's kind (a string,
	// a number, a table, a list) parses it.
	Alternatives []Field
	// Min and Max bound an int, a size or a list's length when set.
	Min, Max *int64
	// Numbers lets a string field take a number, read as its decimal text.
	Numbers bool
	// Check validates the parsed value: a string, int, float64, bool,
	// time.Duration, int64 byte size, []any of a list's parsed elements
	// (not the []string Settings.Strings makes of it), map[string]any,
	// or *Settings for an object. Its error message names what was
	// expected.
	Check func(v any) error
	// Upstream names the upstream key this one renames, if any, for the
	// reference ("Ferry" marks extensions in Doc).
	Upstream string
}

// NewStringField declares a string.
func NewStringField(name string) Field { return Field{Name: name, Type: TypeString} }

// NewIntField declares an integer.
func NewIntField(name string) Field { return Field{Name: name, Type: TypeInt} }

// NewFloatField declares a number.
func NewFloatField(name string) Field { return Field{Name: name, Type: TypeFloat} }

// NewBoolField declares true or false.
func NewBoolField(name string) Field { return Field{Name: name, Type: TypeBool} }

// NewDurationField declares a duration.
func NewDurationField(name string) Field { return Field{Name: name, Type: TypeDuration} }

// NewSizeField declares a byte size.
func NewSizeField(name string) Field { return Field{Name: name, Type: TypeSize} }

// NewEnumField declares one of values.
func NewEnumField(name string, values ...string) Field {
	return Field{Name: name, Type: TypeEnum, Values: values}
}

// NewListField declares a list of elem (whose name is ignored).
func NewListField(name string, elem Field) Field {
	return Field{Name: name, Type: TypeList, Elem: &elem}
}

// NewStringListField declares a list of strings.
func NewStringListField(name string) Field { return NewListField(name, NewStringField("")) }

// NewMapField declares a table of string keys to elem.
func NewMapField(name string, elem Field) Field {
	return Field{Name: name, Type: TypeMap, Elem: &elem}
}

// NewStringMapField declares a table of strings.
func NewStringMapField(name string) Field { return NewMapField(name, NewStringField("")) }

// NewObjectField declares a nested table of fields.
func NewObjectField(name string, fields ...Field) Field {
	return Field{Name: name, Type: TypeObject, Fields: fields}
}

// NewAnyField declares a value of any type (string, int64, float64,
// bool, []any, map[string]any, as the file gives it), which the
// connector interprets itself.
func NewAnyField(name string) Field { return Field{Name: name, Type: TypeAny} }

// NewEitherField declares a value of one of the alternatives (whose
// names are ignored), told apart by the value's kind: no two may take the
// same kind.
func NewEitherField(name string, alternatives ...Field) Field {
	return Field{Name: name, Type: TypeEither, Alternatives: alternatives}
}

// WithDoc sets the one-line documentation.
func (f Field) WithDoc(doc string) Field { f.Doc = doc; return f }

// WithDefault sets the default.
func (f Field) WithDefault(v any) Field { f.Default = v; return f }

// Require marks the field required.
func (f Field) Require() Field { f.Required = true; return f }

// AsSecret marks the field secret.
func (f Field) AsSecret() Field { f.Secret = true; return f }

// WithExample sets the sample value.
func (f Field) WithExample(v any) Field { f.Example = v; return f }

// WithAliases adds accepted spellings of an enum's values.
func (f Field) WithAliases(aliases map[string]string) Field { f.Aliases = aliases; return f }

// Between bounds an int or a size to [lo, hi].
func (f Field) Between(lo, hi int64) Field { f.Min, f.Max = &lo, &hi; return f }

// AtLeast bounds an int or a size from below.
func (f Field) AtLeast(lo int64) Field { f.Min = &lo; return f }

// AcceptNumbers lets a string field take a number.
func (f Field) AcceptNumbers() Field { f.Numbers = true; return f }

// WithCheck adds a check of the parsed value.
func (f Field) WithCheck(check func(v any) error) Field { f.Check = check; return f }

// Renames records the upstream key this field renames.
func (f Field) Renames(upstream string) Field { f.Upstream = upstream; return f }

// field returns the field called name, or nil.
func field(fields []Field, name string) *Field {
	for i := range fields {
		if fields[i].Name == name {
			return &fields[i]
		}
	}
	return nil
}

// Field returns the top-level field called name, or nil.
func (s *Spec) Field(name string) *Field { return field(s.Fields, name) }

// Secret reports whether the key path of plugin_config ("password",
// "headers.Authorization", "tables[0]") is or is inside a field the spec
// marks secret.
func (s *Spec) Secret(key string) bool {
	fields := s.Fields
	for _, part := range splitPath(key) {
		f := field(fields, part)
		if f == nil {
			return false
		}
		if f.Secret {
			return true
		}
		for f.Type == TypeList || f.Type == TypeMap {
			if f.Elem.Secret {
				return true
			}
			if f.Elem.Type != TypeObject {
				return false
			}
			f = f.Elem
		}
		fields = f.Fields
	}
	return false
}

// splitPath splits "a.b[2].c" into the names "a", "b", "c" (indexes and
// map keys that are not field names simply match nothing further).
func splitPath(key string) []string {
	var out []string
	for _, part := range strings.Split(key, ".") {
		if i := strings.IndexByte(part, '['); i >= 0 {
			part = part[:i]
		}
		out = append(out, strings.Trim(part, `"`))
	}
	return out
}

func checkFields(prefix string, fields []Field) error {
	seen := map[string]bool{}
	for _, f := range fields {
		name := prefix + f.Name
		if f.Name == "" || seen[f.Name] {
			return fmt.Errorf("spec field %q: empty or duplicate name", name)
		}
		seen[f.Name] = true
		if err := checkField(name, f); err != nil {
			return err
		}
	}
	return nil
}

func checkField(name string, f Field) error {
	switch f.Type {
	case TypeEnum:
		if len(f.Values) == 0 {
			return fmt.Errorf("spec field %q: an enum without values", name)
		}
	case TypeList, TypeMap:
		if f.Elem == nil {
			return fmt.Errorf("spec field %q: no element", name)
		}
		if err := checkField(name+"[]", *f.Elem); err != nil {
			return err
		}
	case TypeObject:
		return checkFields(name+".", f.Fields)
	case TypeEither:
		if len(f.Alternatives) < 2 {
			return fmt.Errorf("spec field %q: fewer than two alternatives", name)
		}
		taken := map[string]bool{}
		for _, a := range f.Alternatives {
			if err := checkField(name, a); err != nil {
				return err
			}
			for _, k := range a.kinds() {
				if taken[k] || a.Type == TypeEither || a.Type == TypeAny {
					return fmt.Errorf("spec field %q: alternatives that take the same kind of value", name)
				}
				taken[k] = true
			}
		}
	case TypeString, TypeInt, TypeFloat, TypeBool, TypeDuration, TypeSize, TypeAny:
	default:
		return fmt.Errorf("spec field %q: unknown type %q", name, f.Type)
	}
	if f.Required && f.Default != nil {
		return fmt.Errorf("spec field %q: required with a default", name)
	}
	for _, v := range []any{f.Default, f.Example} {
		if v == nil {
			continue
		}
		if !f.holds(v) {
			return fmt.Errorf("spec field %q: default or example %v (%T) is not a %s", name, v, v, f.Type)
		}
	}
	return nil
}
