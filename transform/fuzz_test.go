package transform

import (
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/jsonx"
)

// FuzzApply runs every JSON transform on arbitrary bytes: an error or, for
// a valid JSON input, a valid JSON output; never a panic.
func FuzzApply(f *testing.F) {
	c, err := Build([]Spec{
		{Name: "update_fields", Config: map[string]any{"fields": []any{
			map[string]any{"key": "status", "value": map[string]any{"static": "seen"}, "condition": "key_exists"},
			map[string]any{"key": "ts", "value": map[string]any{"computed": "date_time"}},
		}}},
		{Name: "filter_fields", Config: map[string]any{"keep_fields": []any{"id"}, "include_matching": false, "patterns": []any{
			map[string]any{"key_pattern": map[string]any{"regex": "^tmp"}},
			map[string]any{"value_pattern": map[string]any{"equals": map[string]any{"a": []any{int64(1)}}}},
			map[string]any{"value_pattern": map[string]any{"between": []any{int64(1), int64(2)}}},
			map[string]any{"value_pattern": map[string]any{"contains": "x"}},
		}}},
		{Name: "delete_fields", Config: map[string]any{"fields": []any{"password", "ключ"}}},
		{Name: "add_fields", Config: map[string]any{"fields": []any{field("source", map[string]any{"static": "ferry"})}}},
		{Name: "unwrap_envelope", Config: map[string]any{"field": "data"}},
		{Name: "add_fields", Config: map[string]any{"fields": []any{field("inner", map[string]any{"static": true})}}},
	})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{string(record200), `{"data":{"a":1},"tmp_x":2,"password":"p"}`, `{"ключ":1,"\u0041":"x"}`,
		`[1,2]`, `{"a":`, `{"data":[1]}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		in := append([]byte(nil), p...)
		m := connector.Message{Payload: p}
		_, keep, err := c.Apply(&m, connector.SchemaJSON)
		if string(p) != string(in) {
			t.Fatalf("the input payload was modified")
		}
		if err != nil {
			if jsonx.Valid(in) {
				t.Fatalf("valid JSON %q failed: %v", in, err)
			}
			return
		}
		if !keep {
			t.Fatalf("no transform here drops messages")
		}
		if jsonx.Valid(in) && !jsonx.Valid(m.Payload) {
			t.Fatalf("valid %q became invalid %q", in, m.Payload)
		}
	})
}
