package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/units"
)

// overrides applies IGGY_CONNECTORS_* variables to a decoded struct. The
// variable of a key is the prefix, then every section and key upper-cased
// and joined with '_'; list entries take their index:
// IGGY_CONNECTORS_HTTP_METRICS_ENABLED, IGGY_CONNECTORS_SINK_PG_STREAMS_0_TOPICS.
type overrides struct {
	env   Env
	errs  Errors
	known map[string]bool   // every variable name that addresses a key
	used  map[string]bool   // variables applied
	set   map[string]string // key path -> variable that set it
	names []string          // the environment's names, when known
}

func newOverrides(env Env) *overrides {
	return &overrides{env: env, known: map[string]bool{}, used: map[string]bool{}, set: map[string]string{}, names: env.Names()}
}

// walk applies variables starting with prefix to the struct rv at p.
func (o *overrides) walk(prefix string, p path, rv reflect.Value) {
	for _, f := range fieldsOf(rv.Type()) {
		if f.noenv {
			continue
		}
		name := prefix + strings.ToUpper(f.name)
		fp := p.key(f.name)
		fv := rv.FieldByIndex(f.index)
		t := fv.Type()
		switch {
		case t.Kind() == reflect.Struct:
			o.walk(name+"_", fp, fv)
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
			for i := 0; i < fv.Len(); i++ {
				o.walk(name+"_"+strconv.Itoa(i)+"_", fp.index(i), fv.Index(i))
			}
			o.outOfRange(name+"_", fp, fv.Len())
		default:
			o.leaf(name, fp, fv, f.secret)
		}
	}
}

// outOfRange reports variables that address list entries that do not
// exist: an override cannot add a [[streams]] entry.
func (o *overrides) outOfRange(prefix string, p path, n int) {
	for _, name := range o.names {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		idx, _, ok := strings.Cut(rest, "_")
		i, err := strconv.Atoi(idx)
		if !ok || err != nil || i < n {
			continue
		}
		if v, set := o.env.value(name); !set || v == "" {
			continue
		}
		o.known[name], o.used[name] = true, true
		o.errs = append(o.errs, &FieldError{Var: name, Key: p.index(i).String(),
			Msg: fmt.Sprintf("%s has %d entries (indexes 0 to %d); variables can change entries, not add them", p, n, n-1)})
	}
}

func (o *overrides) leaf(name string, p path, fv reflect.Value, secret bool) {
	o.known[name] = true
	s, ok := o.env.value(name)
	if !ok {
		return
	}
	o.used[name] = true
	if err := setFromString(fv, s, secret); err != nil {
		o.errs = append(o.errs, &FieldError{Var: name, Key: p.String(), Msg: err.Error()})
		return
	}
	o.set[p.String()] = name
}

// setFromString sets dst from an environment value, typed by dst.
func setFromString(dst reflect.Value, s string, secret bool) error {
	t := dst.Type()
	show := func() string {
		if secret {
			return "the value"
		}
		return strconv.Quote(s)
	}
	switch {
	case t == durationType:
		d, err := units.ParseDuration(s)
		if err != nil {
			return fmt.Errorf(`expected %s, got %s`, expectation(t), show())
		}
		dst.SetInt(int64(d))
		return nil
	case t.Implements(enumType):
		c, err := canonical(dst.Interface().(enum), s)
		if err != nil {
			return err
		}
		dst.SetString(c)
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		dst.SetString(s)
	case reflect.Bool:
		b, ok := parseBool(s)
		if !ok {
			return fmt.Errorf("expected true or false, got %s", show())
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil || dst.OverflowInt(n) {
			return fmt.Errorf("expected an integer, got %s", show())
		}
		dst.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil || dst.OverflowUint(n) || n > math.MaxInt64 {
			return fmt.Errorf("expected an integer from 0 to %d, got %s", maxUint(dst), show())
		}
		dst.SetUint(n)
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("expected a number, got %s", show())
		}
		dst.SetFloat(f)
	case reflect.Slice:
		if t.Elem().Kind() != reflect.String {
			return fmt.Errorf("cannot be set from an environment variable")
		}
		items := splitList(s)
		out := reflect.MakeSlice(t, len(items), len(items))
		for i, it := range items {
			out.Index(i).SetString(it)
		}
		dst.Set(out)
	default:
		return fmt.Errorf("cannot be set from an environment variable")
	}
	return nil
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes", "on":
		return true, true
	case "false", "0", "no", "off":
		return false, true
	}
	return false, false
}

// splitList reads a list value: "[a, \"b c\"]" (upstream's syntax) or a
// plain comma-separated "a,b".
func splitList(s string) []string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	if strings.TrimSpace(s) == "" {
		return []string{}
	}
	var out []string
	start, inQuotes := 0, false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuotes = !inQuotes
		case ',':
			if !inQuotes {
				out = append(out, trimItem(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, trimItem(s[start:]))
}

func trimItem(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		s = s[1 : len(s)-1]
	}
	return s
}

// unknown lists variables under prefix that address nothing, skipping
// those for which skip is true, each with a suggestion when one is close.
func (o *overrides) unknown(prefix string, skip func(string) bool) []string {
	var known []string
	for k := range o.known {
		known = append(known, k)
	}
	sort.Strings(known)
	var out []string
	for _, name := range o.names {
		if !strings.HasPrefix(name, prefix) || o.known[name] || skip(name) {
			continue
		}
		msg := fmt.Sprintf("environment variable %s addresses no configuration key and is ignored", name)
		if s := suggest(name, known); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", s)
		}
		out = append(out, msg)
	}
	return out
}

// connectorPrefixes are the variable prefixes of a connector: upstream's
// IGGY_CONNECTORS_<TYPE>_<KEY>_ with the key upper-cased as it is, and
// Ferry's form with every other character than a letter or digit turned
// into '_' (so key "pg-sink" is also PG_SINK). The last one wins.
func connectorPrefixes(kind Kind, key string) []string {
	up := strings.ToUpper(key)
	san := strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, up)
	base := envPrefix + strings.ToUpper(string(kind)) + "_"
	if san == up {
		return []string{base + up + "_"}
	}
	return []string{base + san + "_", base + up + "_"}
}

const pluginConfigSegment = "PLUGIN_CONFIG_"

// pluginConfig applies <prefix>PLUGIN_CONFIG_<FIELD> variables to the
// top-level fields of pc, returning the updated map. An existing field
// keeps its type (a string stays a string, an integer must parse as one);
// a new field's type is inferred as upstream infers it: true/false, an
// integer, a float, a [list], or else a string. FIELD is matched to an
// existing field case-insensitively and is lower-cased otherwise. An
// inferred value that is not a string is kept as an EnvValue with the
// variable's text, for connectors whose field is a string.
// <prefix>PLUGIN_CONFIG_FORMAT is the plugin_config_format key, not a field.
func (o *overrides) pluginConfig(prefixes []string, p path, pc map[string]any) map[string]any {
	apply := func(name, field, val string) {
		o.known[name], o.used[name] = true, true
		if pc == nil {
			pc = map[string]any{}
		}
		target := strings.ToLower(field)
		for k := range pc {
			if strings.EqualFold(k, field) {
				target = k
				break
			}
		}
		fp := p.key(target)
		secret := looksSecret(target)
		old, exists := pc[target]
		var nv any
		var err error
		if exists {
			nv, err = typedLike(old, val, secret)
		} else {
			nv = envValue(val)
		}
		if err != nil {
			o.errs = append(o.errs, &FieldError{Var: name, Key: fp.String(), Msg: err.Error()})
			return
		}
		pc[target] = nv
		o.set[fp.String()] = name
	}
	for _, prefix := range prefixes {
		full := prefix + pluginConfigSegment
		// existing fields, found with lookups alone
		for k := range pc {
			name := full + strings.ToUpper(k)
			if v, ok := o.env.value(name); ok && name != prefix+"PLUGIN_CONFIG_FORMAT" {
				apply(name, k, v)
			}
		}
		// new fields need the names
		for _, name := range o.names {
			if len(name) <= len(full) || !strings.EqualFold(name[:len(full)], full) || o.used[name] {
				continue
			}
			if strings.EqualFold(name, prefix+"PLUGIN_CONFIG_FORMAT") {
				continue
			}
			if v, ok := o.env.value(name); ok {
				apply(name, name[len(full):], v)
			}
		}
	}
	return pc
}

// typedLike parses s as the same type as old.
func typedLike(old any, s string, secret bool) (any, error) {
	show := strconv.Quote(s)
	if secret {
		show = "the value"
	}
	switch old.(type) {
	case string:
		return s, nil
	case bool:
		b, ok := parseBool(s)
		if !ok {
			return nil, fmt.Errorf("expected true or false (the type of the value in the file), got %s", show)
		}
		return b, nil
	case int64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("expected an integer (the type of the value in the file), got %s", show)
		}
		return n, nil
	case float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return nil, fmt.Errorf("expected a number (the type of the value in the file), got %s", show)
		}
		return f, nil
	case []any:
		items := splitList(s)
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = envValue(it)
		}
		return out, nil
	case map[string]any:
		return nil, fmt.Errorf("the value in the file is a table, which a variable cannot set; set its fields in the file")
	}
	return envValue(s), nil
}

// inferValue types an untyped value as upstream does. The items of a list
// that are not strings are EnvValues, so that each keeps its text.
func inferValue(s string) any {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
		items := splitList(t)
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = envValue(it)
		}
		return out
	}
	switch strings.ToLower(t) {
	case "true":
		return true
	case "false":
		return false
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		return n
	}
	if f, err := strconv.ParseFloat(t, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
		return f
	}
	return s
}
