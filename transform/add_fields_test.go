package transform

import (
	"encoding/json"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func build(t *testing.T, name string, cfg map[string]any) Chain {
	t.Helper()
	c, err := Build([]Spec{{Name: name, Config: cfg, Source: "sink.toml"}})
	require.NoError(t, err)
	return c
}

func field(key string, value map[string]any) map[string]any {
	return map[string]any{"key": key, "value": value}
}

func apply(t *testing.T, c Chain, payload string, schema connector.Schema) map[string]any {
	t.Helper()
	m := connector.Message{Payload: []byte(payload)}
	keep, err := c.Apply(&m, schema)
	require.NoError(t, err)
	require.True(t, keep)
	var out map[string]any
	require.NoError(t, json.Unmarshal(m.Payload, &out), "output %s", m.Payload)
	return out
}

func TestAddFields(t *testing.T) {
	t.Parallel()
	c := build(t, "add_fields", map[string]any{"enabled": true, "fields": []any{
		field("s", map[string]any{"static": "ferry"}),
		field("n", map[string]any{"static": int64(42)}),
		field("b", map[string]any{"static": true}),
		field("obj", map[string]any{"static": map[string]any{"x": int64(1)}}),
		field("a.b", map[string]any{"static": "dotted"}),
		field("0", map[string]any{"static": "digits"}),
		field("ключ", map[string]any{"static": "ü"}),
		field("ts", map[string]any{"computed": "timestamp_millis"}),
		field("id", map[string]any{"computed": "uuid_v7"}),
		field("existing", map[string]any{"static": "new"}),
	}})
	out := apply(t, c, `{"existing": "old", "nested": {"a": [1, 2]}}`, connector.SchemaJSON)
	require.Equal(t, "ferry", out["s"])
	require.Equal(t, float64(42), out["n"])
	require.Equal(t, true, out["b"])
	require.Equal(t, map[string]any{"x": float64(1)}, out["obj"])
	require.Equal(t, "dotted", out["a.b"])
	require.Equal(t, "digits", out["0"])
	require.Equal(t, "ü", out["ключ"])
	require.Greater(t, out["ts"], float64(1.7e12))
	id, err := uuid.Parse(out["id"].(string))
	require.NoError(t, err)
	require.Equal(t, uuid.Version(7), id.Version())
	require.Equal(t, "new", out["existing"], "same key is replaced")
	require.Equal(t, map[string]any{"a": []any{float64(1), float64(2)}}, out["nested"])
	require.Len(t, out, 11)
}

func TestAddFieldsPassThrough(t *testing.T) {
	t.Parallel()
	c := build(t, "add_fields", map[string]any{"fields": []any{field("k", map[string]any{"static": "v"})}})
	for i, tc := range []struct {
		payload string
		schema  connector.Schema
	}{
		{`[1, 2]`, connector.SchemaJSON},
		{`"text"`, connector.SchemaJSON},
		{`{"a":1}`, connector.SchemaRaw},
		{`{"a":1}`, connector.SchemaText},
	} {
		m := connector.Message{Payload: []byte(tc.payload)}
		keep, err := c.Apply(&m, tc.schema)
		require.NoError(t, err, "case %d", i)
		require.True(t, keep, "case %d", i)
		require.Equal(t, tc.payload, string(m.Payload), "case %d", i)
	}
}

func TestTransformConfigErrors(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "teleport", Source: "a.toml"}, "a.toml: transforms.teleport is not a known transform"},
		{Spec{Name: "add_fields", Source: "a.toml", Config: map[string]any{"fields": []any{field("k", map[string]any{"computed": "moon_phase"})}}},
			`a.toml: transforms.add_fields.fields[0].value.computed: "moon_phase" is not a computed value`},
		{Spec{Name: "add_fields", Source: "a.toml", Config: map[string]any{"fields": []any{field("", map[string]any{"static": int64(1)})}}},
			"transforms.add_fields.fields[0].key is required"},
		{Spec{Name: "add_fields", Source: "a.toml", Config: map[string]any{"fields": []any{field("k", map[string]any{})}}},
			"missing value.static or value.computed"},
		{Spec{Name: "add_fields", Source: "a.toml", Config: map[string]any{"field": []any{}}},
			"a.toml: transforms.add_fields.field is not a setting"},
	} {
		_, err := Build([]Spec{tc.spec})
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}

func BenchmarkAddFields(b *testing.B) {
	c, err := Build([]Spec{{Name: "add_fields", Config: map[string]any{"fields": []any{
		field("source", map[string]any{"static": "ferry"}),
		field("ts", map[string]any{"computed": "timestamp_millis"}),
	}}}})
	if err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"id":"0190a3a2-7c4f-7d6e-8a1b-2c3d4e5f6a7b","title":"Hello","name":"World","text":"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore."}`)
	b.ReportAllocs()
	for b.Loop() {
		m := connector.Message{Payload: payload}
		if _, err := c.Apply(&m, connector.SchemaJSON); err != nil {
			b.Fatal(err)
		}
	}
}
