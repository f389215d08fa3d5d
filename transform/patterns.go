package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/jsonx"
)

// keyPattern is upstream's key_pattern: a table with one of exact,
// starts_with, ends_with, contains or regex.
type keyPattern struct {
	kind string
	s    string
	re   *regexp.Regexp
}

var keyPatternKinds = []string{"exact", "starts_with", "ends_with", "contains", "regex"}

func newKeyPattern(set *connector.Settings) *keyPattern {
	p := &keyPattern{kind: which(set, keyPatternKinds...)}
	p.s = set.String(p.kind)
	if p.kind == "regex" {
		p.re = regexp.MustCompile(p.s) // validRegexp passed
	}
	return p
}

// validRegexp is the check of a regex key.
func validRegexp(v any) error {
	s, _ := v.(string)
	if _, err := regexp.Compile(s); err != nil {
		return fmt.Errorf("%q is not a valid regular expression: %w", s, err)
	}
	return nil
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

var (
	unitValuePatterns = []string{"is_null", "is_not_null", "is_string", "is_number", "is_boolean", "is_object", "is_array"}
	valuePatternKinds = []string{"equals", "contains", "regex", "greater_than", "less_than", "between"}
)

// newValuePattern reads a value_pattern: a name, or a table's settings.
func newValuePattern(v any) (*valuePattern, error) {
	set, isTable := v.(*connector.Settings)
	if !isTable {
		name, _ := v.(string)
		return &valuePattern{kind: name}, nil
	}
	p := &valuePattern{kind: which(set, valuePatternKinds...)}
	switch p.kind {
	case "equals":
		raw, err := json.Marshal(set.Value("equals"))
		if err != nil {
			return nil, set.Errorf("equals", "cannot be written as JSON: %v", err)
		}
		if p.equals, err = jsonx.Parse(raw); err != nil {
			return nil, set.Errorf("equals", "cannot be written as JSON: %v", err)
		}
	case "contains":
		p.s = []byte(set.String("contains"))
	case "regex":
		p.s = []byte(set.String("regex"))
		p.re = regexp.MustCompile(set.String("regex")) // validRegexp passed
	case "greater_than", "less_than":
		p.lo = set.Float(p.kind)
	case "between":
		r, _ := set.Value("between").([]any)
		p.lo, _ = r[0].(float64)
		p.hi, _ = r[1].(float64)
	}
	return p, nil
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

// patternsField is the patterns list of delete_fields and filter_fields.
var patternsField = connector.NewListField("patterns", connector.NewObjectField("",
	connector.NewObjectField("key_pattern",
		connector.NewStringField("exact"),
		connector.NewStringField("starts_with"),
		connector.NewStringField("ends_with"),
		connector.NewStringField("contains"),
		connector.NewStringField("regex").WithCheck(validRegexp),
	).WithCheck(exactlyOne(keyPatternKinds...)).WithDoc(`a test of the key, such as { starts_with = "meta_" }`),
	connector.NewEitherField("value_pattern",
		connector.NewEnumField("", unitValuePatterns...),
		connector.NewObjectField("",
			connector.NewAnyField("equals"),
			connector.NewStringField("contains"),
			connector.NewStringField("regex").WithCheck(validRegexp),
			connector.NewFloatField("greater_than"),
			connector.NewFloatField("less_than"),
			connector.NewListField("between", connector.NewFloatField("")).Between(2, 2),
		).WithCheck(exactlyOne(valuePatternKinds...)),
	).WithDoc(`a test of the value, such as "is_string" or { between = [1, 10] }`),
))

func compilePatterns(sets []*connector.Settings) ([]fieldPattern, error) {
	out := make([]fieldPattern, 0, len(sets))
	for _, set := range sets {
		var p fieldPattern
		if set.Has("key_pattern") {
			p.key = newKeyPattern(set.Object("key_pattern"))
		}
		if set.Has("value_pattern") {
			v, err := newValuePattern(set.Value("value_pattern"))
			if err != nil {
				return nil, err
			}
			p.value = v
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
