package connector

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/internal/errlist"

	"github.com/ferryhq/ferry/internal/didyoumean"
	"github.com/ferryhq/ferry/internal/units"
)

// SettingError is one problem of a plugin_config: where (file, line, key
// path, or the environment variable that set the value) and what was
// expected. It renders as config.FieldError does.
type SettingError struct {
	File string
	Line int    // 1-based; 0 when unknown
	Key  string // "plugin_config.timeout", "plugin_config.tables[1]"
	Var  string // the IGGY_CONNECTORS_*_PLUGIN_CONFIG_* variable, if one set it
	Msg  string
	// Err is the cause an Errorf wrapped with %w (nil for none): Unwrap
	// gives it, so errors.Is and errors.As see through the setting.
	Err error
}

// Unwrap is the cause Errorf wrapped, or nil.
func (e *SettingError) Unwrap() error { return e.Err }

func (e *SettingError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		b.WriteString(e.File + ": ")
	}
	if e.Var != "" {
		fmt.Fprintf(&b, "environment variable %s (%s): ", e.Var, e.Key)
	} else if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// SettingErrors are all the problems of one plugin_config, in the order
// of the file.
type SettingErrors []*SettingError

func (es SettingErrors) Error() string { return errlist.Error(es) }

// Unwrap gives errors.As access to each SettingError.
func (es SettingErrors) Unwrap() []error { return errlist.Unwrap(es) }

// Parse checks p against the spec and returns the parsed values, or
// SettingErrors naming every problem: unknown keys (with "did you mean"),
// values of the wrong type or out of range, missing required keys, and
// what the spec's lints refuse. Values set by environment variables
// (config.EnvValue) are read from their text by the field's type, so a
// string field gets "0042" exactly.
func (s *Spec) Parse(p PluginConfig) (*Settings, error) {
	c := &checker{pc: p}
	set := c.object(s.Fields, "", p.Values)
	if len(c.errs) == 0 {
		for _, lint := range s.Lints {
			lint(set, c.fail)
		}
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return set, nil
}

// Check is Parse without the values.
func (s *Spec) Check(p PluginConfig) error {
	_, err := s.Parse(p)
	return err
}

type checker struct {
	pc   PluginConfig
	errs SettingErrors
}

func (c *checker) fail(key, format string, args ...any) {
	c.errs = append(c.errs, c.pc.problem(key, fmt.Sprintf(format, args...)))
}

// problem is a SettingError at key, with the line of the key (or of the
// closest enclosing key the file has) and the variable that set it.
func (p PluginConfig) problem(key, msg string) *SettingError {
	table := p.Table
	if table == "" {
		table = "plugin_config"
	}
	e := &SettingError{File: p.Source, Key: table, Msg: msg}
	if key != "" {
		e.Key += "." + key
	}
	for k := key; ; k = parentKey(k) {
		if v, ok := p.Vars[k]; ok && k != "" {
			e.Var = v
			break
		}
		if n, ok := p.Lines[k]; ok {
			e.Line = n
			break
		}
		if k == "" {
			break
		}
	}
	return e
}

// Errorf is an error at a key of the plugin_config, for the problems a
// constructor finds after the spec check (a file it may not write, a
// connection string the driver refuses).
// The format is fmt.Errorf's: %w wraps a cause, which the error unwraps
// to.
func (p PluginConfig) Errorf(key, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	e := p.problem(key, err.Error())
	switch w := err.(type) {
	case interface{ Unwrap() error }:
		e.Err = w.Unwrap()
	case interface{ Unwrap() []error }:
		e.Err = errors.Join(w.Unwrap()...)
	}
	return e
}

// parentKey drops the last part of a key path: "a.b[2]" → "a.b" → "a" → "".
func parentKey(k string) string {
	i := strings.LastIndexAny(k, ".[")
	if i < 0 {
		return ""
	}
	return k[:i]
}

// join appends a name to a key path, quoting it as TOML does when it is
// not a bare key.
func join(key, name string) string {
	bare := name != ""
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			bare = false
		}
	}
	if !bare {
		name = strconv.Quote(name)
	}
	if key == "" {
		return name
	}
	return key + "." + name
}

// object parses a table of fields at key.
func (c *checker) object(fields []Field, key string, values map[string]any) *Settings {
	set := &Settings{fields: fields, values: map[string]any{}, set: map[string]bool{}, pc: c.pc, key: key}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	for _, k := range c.order(key, values) {
		f := field(fields, k)
		kp := join(key, k)
		if f == nil {
			msg := "unknown key"
			if s := didyoumean.Closest(k, names); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				msg += "; allowed keys here: " + strings.Join(sorted(names), ", ")
			}
			c.fail(kp, "%s", msg)
			continue
		}
		if v, ok := f.parse(c, kp, values[k]); ok {
			set.values[k], set.set[k] = v, true
		}
	}
	for _, f := range fields {
		if _, ok := values[f.Name]; ok {
			continue
		}
		switch {
		case f.Required:
			c.fail(join(key, f.Name), "required key is missing; expected %s", f.expectation())
		case f.Default != nil:
			set.values[f.Name] = f.Default
		case f.Type == TypeObject:
			set.values[f.Name] = c.object(f.Fields, join(key, f.Name), nil)
		}
	}
	return set
}

// order lists the keys of values by their line in the file, then by name.
func (c *checker) order(key string, values map[string]any) []string {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	line := func(k string) int {
		if n, ok := c.pc.Lines[join(key, k)]; ok {
			return n
		}
		return math.MaxInt
	}
	sort.Slice(keys, func(i, j int) bool {
		if li, lj := line(keys[i]), line(keys[j]); li != lj {
			return li < lj
		}
		return keys[i] < keys[j]
	})
	return keys
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// envText is a value an environment variable set: its text and the value
// the configuration loader inferred from it (config.EnvValue).
type envText interface {
	EnvText() (raw string, inferred any)
}

// parse reads v, the value at key, as f; problems go to c.
func (f *Field) parse(c *checker, key string, v any) (any, bool) {
	fromEnv := c.pc.Vars[key] != ""
	if e, ok := v.(envText); ok {
		fromEnv = true
		raw, inferred := e.EnvText()
		switch f.Type {
		case TypeList, TypeMap, TypeObject, TypeAny:
			v = inferred
		case TypeEither:
			if k := kindOf(inferred); k == "table" || k == "list" {
				v = inferred
			} else {
				v = raw
			}
		default:
			v = raw
		}
	}
	bad := func(format string, args ...any) (any, bool) {
		c.fail(key, format, args...)
		return nil, false
	}
	got := func() string {
		if f.Secret {
			return typeName(v)
		}
		return describe(v)
	}
	switch f.Type {
	case TypeString:
		switch x := v.(type) {
		case string:
			return f.checked(c, key, x)
		case int64:
			if f.Numbers {
				return f.checked(c, key, strconv.FormatInt(x, 10))
			}
		case float64:
			if f.Numbers {
				return f.checked(c, key, strconv.FormatFloat(x, 'f', -1, 64))
			}
		}
		return bad("expected %s, got %s", f.expectation(), got())
	case TypeBool:
		switch x := v.(type) {
		case bool:
			return f.checked(c, key, x)
		case string:
			if b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(x))); err == nil && fromEnv {
				return f.checked(c, key, b)
			}
			if strings.EqualFold(x, "true") || strings.EqualFold(x, "false") {
				return bad("expected true or false, got the string %q; write it without quotes", x)
			}
		}
		return bad("expected true or false, got %s", got())
	case TypeInt:
		n, ok := integer(v, fromEnv)
		if !ok {
			return bad("expected %s, got %s", f.expectation(), got())
		}
		if !f.inRange(n) {
			return bad("expected %s, got %d", f.expectation(), n)
		}
		return f.checked(c, key, int(n))
	case TypeFloat:
		switch x := v.(type) {
		case int64:
			return f.checked(c, key, float64(x))
		case float64:
			return f.checked(c, key, x)
		case string:
			if n, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil && fromEnv {
				return f.checked(c, key, n)
			}
		}
		return bad("expected %s, got %s", f.expectation(), got())
	case TypeDuration:
		switch x := v.(type) {
		case string:
			d, err := units.ParseDuration(x)
			if err != nil {
				return bad("expected %s, got %s", f.expectation(), got())
			}
			return f.checked(c, key, d)
		case int64:
			if x >= 0 && x <= math.MaxInt64/int64(time.Millisecond) {
				return f.checked(c, key, time.Duration(x)*time.Millisecond)
			}
		}
		return bad("expected %s, got %s", f.expectation(), got())
	case TypeSize:
		n, ok := integer(v, false)
		if s, isStr := v.(string); isStr {
			u, err := units.ParseSize(s)
			n, ok = int64(u), err == nil && u <= math.MaxInt64
		}
		if !ok || n < 0 {
			return bad("expected %s, got %s", f.expectation(), got())
		}
		if !f.inRange(n) {
			return bad("expected %s, got %s", f.expectation(), units.FormatSize(uint64(n)))
		}
		return f.checked(c, key, n)
	case TypeEnum:
		s, ok := v.(string)
		if !ok {
			return bad("expected %s, got %s", f.expectation(), got())
		}
		if canon, ok := f.canonical(s); ok {
			return f.checked(c, key, canon)
		}
		msg := fmt.Sprintf("expected %s, got %s", f.expectation(), got())
		if sg := didyoumean.Closest(s, f.Values); sg != "" && !f.Secret {
			msg += fmt.Sprintf("; did you mean %q?", sg)
		}
		return bad("%s", msg)
	case TypeList:
		return f.parseList(c, key, v, fromEnv)
	case TypeMap:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("expected %s, got %s", f.expectation(), typeName(v))
		}
		out, good := map[string]any{}, true
		for _, k := range c.order(key, m) {
			ev, ok := f.Elem.parse(c, join(key, k), m[k])
			out[k], good = ev, good && ok
		}
		if !good {
			return nil, false
		}
		return f.checked(c, key, out)
	case TypeObject:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("expected a table, got %s", typeName(v))
		}
		before := len(c.errs)
		set := c.object(f.Fields, key, m)
		if len(c.errs) != before {
			return nil, false
		}
		return f.checked(c, key, set)
	case TypeAny:
		return f.checked(c, key, v)
	case TypeEither:
		k := kindOf(v)
		for i := range f.Alternatives {
			if a := &f.Alternatives[i]; slices.Contains(a.kinds(), k) {
				out, ok := a.parse(c, key, v)
				if !ok {
					return nil, false
				}
				return f.checked(c, key, out)
			}
		}
		return bad("expected %s, got %s", f.expectation(), got())
	}
	return bad("cannot read a %s", f.Type)
}

func (f *Field) parseList(c *checker, key string, v any, fromEnv bool) (any, bool) {
	items, ok := v.([]any)
	if s, isStr := v.(string); !ok && isStr {
		if !fromEnv {
			if f.Elem.Type == TypeString && !f.Secret {
				c.fail(key, "expected %s, got the string %q; write [%q]", f.expectation(), s, s)
			} else {
				c.fail(key, "expected %s, got %s", f.expectation(), typeName(v))
			}
			return nil, false
		}
		// A variable's "a, b" (without brackets) is a list too.
		for _, it := range strings.Split(s, ",") {
			items = append(items, strings.TrimSpace(it))
		}
		ok = true
	}
	if !ok {
		c.fail(key, "expected %s, got %s", f.expectation(), typeName(v))
		return nil, false
	}
	n := int64(len(items))
	if !f.inRange(n) {
		c.fail(key, "expected %s, got %d items", f.expectation(), n)
		return nil, false
	}
	out, good := make([]any, len(items)), true
	for i, it := range items {
		ev, ok := f.Elem.parse(c, key+"["+strconv.Itoa(i)+"]", it)
		out[i], good = ev, good && ok
	}
	if !good {
		return nil, false
	}
	return f.checked(c, key, out)
}

// checked runs the field's own check on a parsed value.
func (f *Field) checked(c *checker, key string, v any) (any, bool) {
	if f.Check != nil {
		if err := f.Check(v); err != nil {
			c.fail(key, "%s", err.Error())
			return nil, false
		}
	}
	return v, true
}

func (f *Field) canonical(s string) (string, bool) {
	for _, v := range f.Values {
		if strings.EqualFold(v, s) {
			return v, true
		}
	}
	for a, v := range f.Aliases {
		if strings.EqualFold(a, s) {
			return v, true
		}
	}
	return "", false
}

func (f *Field) inRange(n int64) bool {
	return (f.Min == nil || n >= *f.Min) && (f.Max == nil || n <= *f.Max)
}

// integer reads an integer: a TOML integer, a JSON number that is whole,
// or (from a variable) its text.
func integer(v any, text bool) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil && text {
			return n, true
		}
	}
	return 0, false
}

// expectation says what the field accepts, for errors and the reference.
func (f *Field) expectation() string {
	bounds := func(unit func(int64) string) string {
		switch {
		case f.Min != nil && f.Max != nil:
			return fmt.Sprintf(" from %s to %s", unit(*f.Min), unit(*f.Max))
		case f.Min != nil:
			return fmt.Sprintf(" of at least %s", unit(*f.Min))
		case f.Max != nil:
			return fmt.Sprintf(" of at most %s", unit(*f.Max))
		}
		return ""
	}
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	switch f.Type {
	case TypeString:
		if f.Numbers {
			return "a string or a number"
		}
		return "a string"
	case TypeInt:
		return "an integer" + bounds(itoa)
	case TypeFloat:
		return "a number"
	case TypeBool:
		return "true or false"
	case TypeDuration:
		return `a duration such as "5s", "250ms" or "1h 30m"`
	case TypeSize:
		return `a byte size such as 1048576 or "64MiB"` + bounds(func(n int64) string { return units.FormatSize(uint64(n)) })
	case TypeEnum:
		return "one of " + strings.Join(quoted(f.Values), ", ")
	case TypeList:
		elems := plural(f.Elem.expectation())
		switch {
		case f.Min != nil && f.Max != nil && *f.Min == *f.Max:
			return fmt.Sprintf("a list of %d %s", *f.Min, elems)
		case f.Min != nil && *f.Min == 1 && f.Max == nil:
			return "a non-empty list of " + elems
		}
		return "a list of " + elems + bounds(func(n int64) string { return itoa(n) + " items" })
	case TypeMap:
		return "a table of " + plural(f.Elem.expectation())
	case TypeObject:
		return "a table"
	case TypeAny:
		return "a value"
	case TypeEither:
		alts := make([]string, len(f.Alternatives))
		for i := range f.Alternatives {
			alts[i] = f.Alternatives[i].expectation()
		}
		return strings.Join(alts, " or ")
	}
	return string(f.Type)
}

// kinds are the kinds of value (kindOf) a field of f's type reads.
func (f *Field) kinds() []string {
	switch f.Type {
	case TypeString:
		if f.Numbers {
			return []string{"string", "number"}
		}
		return []string{"string"}
	case TypeEnum:
		return []string{"string"}
	case TypeInt, TypeFloat:
		return []string{"number"}
	case TypeDuration, TypeSize:
		return []string{"string", "number"}
	case TypeBool:
		return []string{"bool"}
	case TypeList:
		return []string{"list"}
	case TypeMap, TypeObject:
		return []string{"table"}
	}
	return nil
}

// kindOf is the kind of a parsed value: "string", "number", "bool",
// "table", "list", or "" for another.
func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64, int, float64:
		return "number"
	case bool:
		return "bool"
	case map[string]any:
		return "table"
	case []any:
		return "list"
	}
	return ""
}

func plural(e string) string {
	for _, a := range []string{"an ", "a "} {
		if rest, ok := strings.CutPrefix(e, a); ok {
			word, tail, _ := strings.Cut(rest, " ")
			if tail != "" {
				tail = " " + tail
			}
			return word + "s" + tail
		}
	}
	return "values: " + e
}

func quoted(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.Quote(v)
	}
	return out
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64, int:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a datetime"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("a %T", v)
}

// describe renders a value for an error message; never called for
// secrets.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 48 {
			x = x[:45] + "..."
		}
		return strconv.Quote(x)
	case int64, float64, bool:
		return fmt.Sprintf("%s (%v)", typeName(v), x)
	}
	return typeName(v)
}

// holds reports whether v, a default or an example, is of the Go type
// Settings gives for f.
func (f *Field) holds(v any) bool {
	switch f.Type {
	case TypeString:
		_, ok := v.(string)
		return ok
	case TypeEnum:
		s, ok := v.(string)
		_, known := f.canonical(s)
		return ok && known
	case TypeInt:
		_, ok := v.(int)
		return ok
	case TypeFloat:
		_, ok := v.(float64)
		return ok
	case TypeBool:
		_, ok := v.(bool)
		return ok
	case TypeDuration:
		_, ok := v.(time.Duration)
		return ok
	case TypeSize:
		_, ok := v.(int64)
		return ok
	case TypeList:
		switch x := v.(type) {
		case []string:
			return f.Elem.Type == TypeString || f.Elem.Type == TypeEnum
		case []int:
			return f.Elem.Type == TypeInt
		case []any:
			for _, e := range x {
				if !f.Elem.holds(e) {
					return false
				}
			}
			return true
		}
	case TypeMap:
		switch x := v.(type) {
		case map[string]string:
			return f.Elem.Type == TypeString
		case map[string]any: // a table as TOML decodes it
			for _, e := range x {
				if !f.Elem.holds(e) {
					return false
				}
			}
			return true
		}
	case TypeAny:
		return true
	case TypeEither:
		for i := range f.Alternatives {
			if f.Alternatives[i].holds(v) {
				return true
			}
		}
	}
	return false
}
