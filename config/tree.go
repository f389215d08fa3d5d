package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// table is a parsed TOML table or JSON object that remembers the order of
// its keys. Values are string, int64, float64, bool, time.Time (TOML
// datetimes), []any, or *table.
type table struct {
	keys []string
	vals map[string]any
}

func newTable() *table { return &table{vals: map[string]any{}} }

func (t *table) set(k string, v any) {
	if _, ok := t.vals[k]; !ok {
		t.keys = append(t.keys, k)
	}
	t.vals[k] = v
}

func (t *table) get(k string) (any, bool) {
	v, ok := t.vals[k]
	return v, ok
}

// plain converts t to map[string]any with nested maps and slices, the form
// handed to connectors as their plugin_config.
func (t *table) plain() map[string]any {
	out := make(map[string]any, len(t.keys))
	for _, k := range t.keys {
		out[k] = plainValue(t.vals[k])
	}
	return out
}

func plainValue(v any) any {
	switch x := v.(type) {
	case *table:
		return x.plain()
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainValue(e)
		}
		return out
	}
	return v
}

// tableFromPlain is the inverse of plain; map keys are sorted.
func tableFromPlain(m map[string]any) *table {
	t := newTable()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.set(k, fromPlain(m[k]))
	}
	return t
}

func fromPlain(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return tableFromPlain(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fromPlain(e)
		}
		return out
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = tableFromPlain(e)
		}
		return out
	case int:
		return int64(x)
	case float32:
		return float64(x)
	}
	return v
}

// parseTOML parses a TOML document into a table whose keys keep their
// order in the document. Syntax errors name the file and the line.
func parseTOML(file string, data []byte) (*table, error) {
	var m map[string]any
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&m)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, Errors{{File: file, Line: pe.Position.Line, Msg: "invalid TOML: " + pe.Message}}
		}
		return nil, Errors{{File: file, Msg: "invalid TOML: " + err.Error()}}
	}
	rank := map[string]int{}
	for i, k := range md.Keys() {
		s := strings.Join(k, "\x00")
		if _, ok := rank[s]; !ok {
			rank[s] = i
		}
	}
	return orderedTable(m, nil, rank), nil
}

func orderedTable(m map[string]any, parent []string, rank map[string]int) *table {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	r := func(k string) int {
		if v, ok := rank[strings.Join(append(parent[:len(parent):len(parent)], k), "\x00")]; ok {
			return v
		}
		return 1 << 30
	}
	sort.SliceStable(keys, func(i, j int) bool {
		ri, rj := r(keys[i]), r(keys[j])
		if ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	t := newTable()
	for _, k := range keys {
		t.set(k, orderedValue(m[k], append(parent[:len(parent):len(parent)], k), rank))
	}
	return t
}

func orderedValue(v any, p []string, rank map[string]int) any {
	switch x := v.(type) {
	case map[string]any:
		return orderedTable(x, p, rank)
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = orderedTable(e, p, rank)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = orderedValue(e, p, rank)
		}
		return out
	case int:
		return int64(x)
	}
	return v
}

// parseJSON parses a JSON document keeping object key order. Numbers
// become int64 when integral and float64 otherwise; null values are
// dropped from objects, so a null key reads as absent.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := jsonValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

const maxJSONDepth = 64

func jsonValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d levels", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			t := newTable()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := jsonValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if v != nil {
					t.set(k, v)
				}
			}
			_, err := dec.Token()
			return t, err
		case '[':
			out := []any{}
			for dec.More() {
				v, err := jsonValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			_, err := dec.Token()
			return out, err
		}
		return nil, fmt.Errorf("unexpected %q", x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", x, err)
		}
		return f, nil
	}
	return tok, nil // string, bool or nil
}

// typeName names the type of a parsed value the way a TOML user sees it.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a datetime"
	case []any:
		return "an array"
	case *table:
		return "a table"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("a %T", v)
}

// describe renders a scalar for an error message ("a string \"x\""). Long
// strings are cut short; callers never pass secrets here.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 48 {
			x = x[:45] + "..."
		}
		return fmt.Sprintf("the string %q", x)
	case int64, float64, bool:
		return fmt.Sprintf("%s (%v)", typeName(v), x)
	}
	return typeName(v)
}
