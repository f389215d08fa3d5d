package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/jsonx"
)

// keyPattern is upstream's key_pattern: a table with one of exact,
// starts_with, ends_with, contains or regex.
type keyPattern struct {
	kind string
	s    string
	re   *regexp.Regexp
}

func parseKeyPattern(raw json.RawMessage, where string) (*keyPattern, error) {
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
		return nil, fmt.Errorf("%s: want a table with one of exact, starts_with, ends_with, contains, regex (such as { starts_with = \"meta_\" }), got %s", where, raw)
	}
	for kind, s := range m {
		p := &keyPattern{kind: kind, s: s}
		switch kind {
		case "exact", "starts_with", "ends_with", "contains":
		case "regex":
			re, err := regexp.Compile(s)
			if err != nil {
				return nil, fmt.Errorf("%s.regex: %q is not a valid regular expression: %w", where, s, err)
			}
			p.re = re
		default:
			return nil, fmt.Errorf("%s: %q is not a key pattern (use exact, starts_with, ends_with, contains, regex)", where, kind)
		}
		return p, nil
	}
	return nil, nil
}

func (p *keyPattern) matches(key string) bool {
	switch p.kind {
	case "exact":
		return key == p.s
	case "starts_with":
		return strings.HasPrefix(key, p.s)
	case "ends_with":
		return strings.HasSuffix(key, p.s)
	case "contains":
		return strings.Contains(key, p.s)
	}
	return p.re.MatchString(key)
}

// matchesMember tests a member's name without copying it when it needs no
// decoding.
func (p *keyPattern) matchesMember(m *jsonx.Member) bool {
	if m.Escaped {
		return p.matches(m.Name())
	}
	k := m.Key
	switch p.kind {
	case "exact":
		return string(k) == p.s
	case "starts_with":
		return len(k) >= len(p.s) && string(k[:len(p.s)]) == p.s
	case "ends_with":
		return len(k) >= len(p.s) && string(k[len(k)-len(p.s):]) == p.s
	case "contains":
		return bytes.Contains(k, []byte(p.s))
	}
	return p.re.Match(k)
}

// valuePattern is upstream's value_pattern: "is_null", "is_not_null",
// "is_string", "is_number", "is_boolean", "is_object", "is_array", or a
// table with one of equals, contains, regex, greater_than, less_than or
// between = [low, high] (inclusive).
type valuePattern struct {
	kind   string
	s      []byte
	re     *regexp.Regexp
	equals jsonx.Value
	lo, hi float64
}

var unitValuePatterns = map[string]bool{
	"is_null": true, "is_not_null": true, "is_string": true, "is_number": true,
	"is_boolean": true, "is_object": true, "is_array": true,
}

func parseValuePattern(raw json.RawMessage, where string) (*valuePattern, error) {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		if !unitValuePatterns[name] {
			return nil, fmt.Errorf("%s: %q is not a value pattern (use is_null, is_not_null, is_string, is_number, is_boolean, is_object, is_array, or a table such as { equals = 1 })", where, name)
		}
		return &valuePattern{kind: name}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
		return nil, fmt.Errorf("%s: want a name such as \"is_null\" or a table with one of equals, contains, regex, greater_than, less_than, between; got %s", where, raw)
	}
	for kind, arg := range m {
		p := &valuePattern{kind: kind}
		bad := func(want string) error { return fmt.Errorf("%s.%s: want %s, got %s", where, kind, want, arg) }
		switch kind {
		case "equals":
			v, err := jsonx.Parse(arg)
			if err != nil {
				return nil, bad("a value")
			}
			p.equals = v
		case "contains", "regex":
			var s string
			if json.Unmarshal(arg, &s) != nil {
				return nil, bad("a string")
			}
			p.s = []byte(s)
			if kind == "regex" {
				re, err := regexp.Compile(s)
				if err != nil {
					return nil, fmt.Errorf("%s.regex: %q is not a valid regular expression: %w", where, s, err)
				}
				p.re = re
			}
		case "greater_than", "less_than":
			if json.Unmarshal(arg, &p.lo) != nil {
				return nil, bad("a number")
			}
		case "between":
			var r []float64
			if json.Unmarshal(arg, &r) != nil || len(r) != 2 {
				return nil, bad("[low, high]")
			}
			p.lo, p.hi = r[0], r[1]
		default:
			return nil, fmt.Errorf("%s: %q is not a value pattern (use equals, contains, regex, greater_than, less_than, between, or a name such as \"is_null\")", where, kind)
		}
		return p, nil
	}
	return nil, nil
}

// matches tests a raw member value.
func (p *valuePattern) matches(v []byte) bool {
	k := jsonx.KindOf(v)
	switch p.kind {
	case "is_null":
		return k == jsonx.Null
	case "is_not_null":
		return k != jsonx.Null
	case "is_string":
		return k == jsonx.String
	case "is_number":
		return k == jsonx.Number
	case "is_boolean":
		return k == jsonx.Bool
	case "is_object":
		return k == jsonx.Object
	case "is_array":
		return k == jsonx.Array
	case "equals":
		if k != p.equals.Kind {
			return false
		}
		got, err := jsonx.Parse(v)
		return err == nil && jsonx.Equal(&got, &p.equals)
	case "contains", "regex":
		if k != jsonx.String {
			return false
		}
		s := stringBytes(v)
		if p.re != nil {
			return p.re.Match(s)
		}
		return bytes.Contains(s, p.s)
	}
	if k != jsonx.Number {
		return false
	}
	n, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return false
	}
	switch p.kind {
	case "greater_than":
		return n > p.lo
	case "less_than":
		return n < p.lo
	}
	return n >= p.lo && n <= p.hi
}

// stringBytes returns a string value's text, without a copy when it has
// no escapes.
func stringBytes(lit []byte) []byte {
	body := lit[1 : len(lit)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return body
	}
	s, _ := jsonx.Unquote(lit)
	return []byte(s)
}

// fieldPattern is one entry of a patterns list: a member matches when
// both given patterns match (an absent pattern matches anything).
type fieldPattern struct {
	key   *keyPattern
	value *valuePattern
}

type patternConfig struct {
	KeyPattern   json.RawMessage `json:"key_pattern"`
	ValuePattern json.RawMessage `json:"value_pattern"`
}

func compilePatterns(cs []patternConfig, where string) ([]fieldPattern, error) {
	out := make([]fieldPattern, 0, len(cs))
	for i, c := range cs {
		w := fmt.Sprintf("%s.patterns[%d]", where, i)
		var p fieldPattern
		var err error
		if c.KeyPattern != nil && string(c.KeyPattern) != "null" {
			if p.key, err = parseKeyPattern(c.KeyPattern, w+".key_pattern"); err != nil {
				return nil, err
			}
		}
		if c.ValuePattern != nil && string(c.ValuePattern) != "null" {
			if p.value, err = parseValuePattern(c.ValuePattern, w+".value_pattern"); err != nil {
				return nil, err
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// anyMatches reports whether a member matches one of the patterns.
func anyMatches(ps []fieldPattern, m *jsonx.Member) bool {
	for i := range ps {
		p := &ps[i]
		if p.key != nil && !p.key.matchesMember(m) {
			continue
		}
		if p.value != nil && !p.value.matches(m.Value) {
			continue
		}
		return true
	}
	return false
}
