package transform

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

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
		field(`q"uote`, map[string]any{"static": "escaped key"}),
		field("ts", map[string]any{"computed": "timestamp_millis"}),
		field("id", map[string]any{"computed": "uuid_v7"}),
		field("existing", map[string]any{"static": "new"}),
	}})
	out := apply(t, c, `{"existing": "old", "nested": {"a": [1, 2]}}`)
	require.Equal(t, "ferry", out["s"])
	require.Equal(t, float64(42), out["n"])
	require.Equal(t, true, out["b"])
	require.Equal(t, map[string]any{"x": float64(1)}, out["obj"])
	require.Equal(t, "dotted", out["a.b"])
	require.Equal(t, "digits", out["0"])
	require.Equal(t, "ü", out["ключ"])
	require.Equal(t, "escaped key", out[`q"uote`])
	require.Greater(t, out["ts"], float64(1.7e12))
	id, err := uuid.Parse(out["id"].(string))
	require.NoError(t, err)
	require.Equal(t, uuid.Version(7), id.Version())
	require.Equal(t, "new", out["existing"], "same key is replaced")
	require.Equal(t, map[string]any{"a": []any{float64(1), float64(2)}}, out["nested"])
	require.Len(t, out, 12)
}

// Transforms of JSON objects leave other payloads alone, as upstream.
func TestObjectTransformsPassThrough(t *testing.T) {
	t.Parallel()
	chains := map[string]Chain{
		"add_fields":      build(t, "add_fields", map[string]any{"fields": []any{field("k", map[string]any{"static": "v"})}}),
		"delete_fields":   build(t, "delete_fields", map[string]any{"fields": []any{"a"}}),
		"filter_fields":   build(t, "filter_fields", map[string]any{"keep_fields": []any{"x"}}),
		"update_fields":   build(t, "update_fields", map[string]any{"fields": []any{field("a", map[string]any{"static": int64(2)})}}),
		"unwrap_envelope": build(t, "unwrap_envelope", map[string]any{"field": "a"}),
	}
	for name, c := range chains {
		for i, tc := range []struct {
			payload string
			schema  connector.Schema
		}{
			{`[1, {"a": 1}]`, connector.SchemaJSON},
			{`"text"`, connector.SchemaJSON},
			{`42`, connector.SchemaJSON},
			{`null`, connector.SchemaJSON},
			{`{"a":1}`, connector.SchemaRaw},
			{`{"a":1}`, connector.SchemaText},
			{"\x01\x02", connector.SchemaAvro},
		} {
			out, schema := run(t, c, tc.payload, tc.schema)
			require.Equal(t, tc.payload, out, "%s case %d", name, i)
			require.Equal(t, tc.schema, schema, "%s case %d", name, i)
		}
	}
}

func TestDeleteFields(t *testing.T) {
	t.Parallel()
	c := build(t, "delete_fields", map[string]any{"fields": []any{"field1", "field3", "nonexistent", "ключ", `q"uote`}})
	out := apply(t, c, `{"field1": "value1", "field2": "value2", "field3": 42, "field4": true, "ключ": 1, "q\"uote": 2,
		"nested": {"field1": "kept: only top-level keys are deleted"}}`)
	require.ElementsMatch(t, []string{"field2", "field4", "nested"}, keys(out))
	require.Equal(t, map[string]any{"field1": "kept: only top-level keys are deleted"}, out["nested"])

	// Upstream's pattern form: fields matching a pattern go too.
	c = build(t, "delete_fields", map[string]any{"patterns": []any{
		map[string]any{"key_pattern": map[string]any{"starts_with": "temp_"}},
		map[string]any{"value_pattern": "is_null"},
		map[string]any{"key_pattern": map[string]any{"contains": "flag"}, "value_pattern": map[string]any{"equals": false}},
	}})
	out = apply(t, c, `{"id": 1, "temp_value": 100, "temp_flag": true, "description": null, "flag_active": true, "flag_debug": false, "debug": false}`)
	require.ElementsMatch(t, []string{"id", "flag_active", "debug"}, keys(out))

	out = apply(t, build(t, "delete_fields", map[string]any{"fields": []any{"a"}}), `{"a": 1, "b": 2, "a": 3}`)
	require.Equal(t, map[string]any{"b": float64(2)}, out, "duplicate keys all go")
	same, _ := run(t, build(t, "delete_fields", map[string]any{"fields": []any{}}), ` { "a" : 1 } `, connector.SchemaJSON)
	require.Equal(t, ` { "a" : 1 } `, same, "nothing to delete leaves the bytes as they were")
}

func TestFilterFields(t *testing.T) {
	t.Parallel()
	pat := func(k, v any) map[string]any {
		p := map[string]any{}
		if k != nil {
			p["key_pattern"] = k
		}
		if v != nil {
			p["value_pattern"] = v
		}
		return p
	}
	record := `{"id": 1, "name": "test", "meta_created": "2023-01-01", "meta_count": 7, "temp_value": 100,
		"created_date": "2023-01-01", "expired_date": null, "score": 4.5, "tags": ["a"], "obj": {"k": "v"}, "ok": true,
		"big": 123456789012345678901234567890, "ключ": "значение"}`
	for i, tc := range []struct {
		cfg  map[string]any
		want []string
	}{
		{map[string]any{"keep_fields": []any{"id", "name"}}, []string{"id", "name"}},
		{map[string]any{"patterns": []any{pat(map[string]any{"starts_with": "meta_"}, nil)}}, []string{"meta_created", "meta_count"}},
		{map[string]any{"patterns": []any{pat(map[string]any{"starts_with": "meta_"}, nil)}, "include_matching": false},
			[]string{"id", "name", "temp_value", "created_date", "expired_date", "score", "tags", "obj", "ok", "big", "ключ"}},
		{map[string]any{"patterns": []any{pat(nil, "is_number")}}, []string{"id", "meta_count", "temp_value", "score", "big"}},
		{map[string]any{"patterns": []any{pat(map[string]any{"contains": "date"}, "is_string")}}, []string{"created_date"}},
		{map[string]any{"keep_fields": []any{"id"}, "patterns": []any{pat(map[string]any{"ends_with": "_created"}, nil)}}, []string{"id", "meta_created"}},
		{map[string]any{"patterns": []any{pat(map[string]any{"regex": "^(id|ok)$"}, nil)}}, []string{"id", "ok"}},
		{map[string]any{"patterns": []any{pat(map[string]any{"exact": "ключ"}, nil)}}, []string{"ключ"}},
		{map[string]any{"patterns": []any{pat(nil, map[string]any{"equals": "test"})}}, []string{"name"}},
		{map[string]any{"patterns": []any{pat(nil, map[string]any{"equals": int64(7)})}}, []string{"meta_count"}},
		{map[string]any{"patterns": []any{pat(nil, map[string]any{"equals": map[string]any{"k": "v"}})}}, []string{"obj"}},
		{map[string]any{"patterns": []any{pat(nil, map[string]any{"contains": "2023"})}}, []string{"meta_created", "created_date"}},
		{map[string]any{"patterns": []any{pat(nil, map[string]any{"regex": "^зна"})}}, []string{"ключ"}},
		{map[string]any{"patterns": []any{pat(nil, map[string]any{"greater_than": 50.0})}}, []string{"temp_value", "big"}},
		{map[string]any{"patterns": []any{pat(nil, map[string]any{"less_than": int64(5)})}}, []string{"id", "score"}},
		{map[string]any{"patterns": []any{pat(nil, map[string]any{"between": []any{int64(1), 7.0}})}}, []string{"id", "meta_count", "score"}},
		{map[string]any{"patterns": []any{pat(nil, "is_null")}}, []string{"expired_date"}},
		{map[string]any{"patterns": []any{pat(nil, "is_not_null"), pat(nil, "is_null")}},
			[]string{"id", "name", "meta_created", "meta_count", "temp_value", "created_date", "expired_date", "score", "tags", "obj", "ok", "big", "ключ"}},
		{map[string]any{"patterns": []any{pat(nil, "is_array"), pat(nil, "is_object"), pat(nil, "is_boolean")}}, []string{"tags", "obj", "ok"}},
	} {
		out := apply(t, build(t, "filter_fields", tc.cfg), record)
		require.ElementsMatch(t, tc.want, keys(out), "case %d", i)
	}
	empty := build(t, "filter_fields", map[string]any{})
	same, _ := run(t, empty, record, connector.SchemaJSON)
	require.Equal(t, record, same, "an empty filter changes nothing, as upstream")
	kept, _ := run(t, build(t, "filter_fields", map[string]any{"keep_fields": []any{"big"}}), record, connector.SchemaJSON)
	require.Equal(t, `{"big":123456789012345678901234567890}`, kept, "numbers beyond float64 keep every digit")
}

func TestUpdateFields(t *testing.T) {
	t.Parallel()
	cond := func(key string, value any, condition string) map[string]any {
		f := map[string]any{"key": key, "value": map[string]any{"static": value}}
		if condition != "" {
			f["condition"] = condition
		}
		return f
	}
	c := build(t, "update_fields", map[string]any{"fields": []any{
		cond("status", "updated", ""),
		cond("missing_field", "should not be added", "key_exists"),
		cond("id", int64(2), "key_exists"),
		cond("created_at", "2023-01-01", "key_not_exists"),
		cond("name", "should not update", "key_not_exists"),
		cond("new_field", "new_value", "always"),
		cond("max", int64(9223372036854775807), "always"),
	}})
	out, _ := run(t, c, `{"id": 1, "status": "pending", "name": "keep", "huge": 123456789012345678901234567890}`, connector.SchemaJSON)
	require.JSONEq(t, `{"id": 2, "status": "updated", "name": "keep", "created_at": "2023-01-01", "new_field": "new_value",
		"max": 9223372036854775807, "huge": 123456789012345678901234567890}`, out)
	require.Contains(t, out, `"huge":123456789012345678901234567890`)
	require.Contains(t, out, `"max":9223372036854775807`)

	c = build(t, "update_fields", map[string]any{"fields": []any{
		field("updated_at", map[string]any{"computed": "date_time"}),
		map[string]any{"key": "request_id", "value": map[string]any{"computed": "uuid_v4"}, "condition": "key_not_exists"},
		field("ns", map[string]any{"computed": "timestamp_nanos"}),
		field("us", map[string]any{"computed": "timestamp_micros"}),
		field("s", map[string]any{"computed": "timestamp_seconds"}),
	}})
	v := apply(t, c, `{"id": 1}`)
	require.Regexp(t, regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6}|\.\d{9})?\+00:00$`), v["updated_at"])
	id, err := uuid.Parse(v["request_id"].(string))
	require.NoError(t, err)
	require.Equal(t, uuid.Version(4), id.Version())
	now := float64(time.Now().Unix())
	require.InDelta(t, now, v["s"], 3600)
	require.InDelta(t, now*1e6, v["us"], 3600e6)
	require.InDelta(t, now*1e9, v["ns"], 3600e9)
}

func TestDateTimeFormat(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		ns   int
		want string
	}{
		{0, `"2024-05-06T07:08:09+00:00"`},
		{120_000_000, `"2024-05-06T07:08:09.120+00:00"`},
		{123_456_000, `"2024-05-06T07:08:09.123456+00:00"`},
		{123_456_789, `"2024-05-06T07:08:09.123456789+00:00"`},
		{5, `"2024-05-06T07:08:09.000000005+00:00"`},
	} {
		at := time.Date(2024, 5, 6, 9, 8, 9, tc.ns, time.FixedZone("CEST", 7200))
		require.Equal(t, tc.want, string(appendDateTime(nil, at)), "case %d", i)
	}
}

func TestUnwrapEnvelope(t *testing.T) {
	t.Parallel()
	c := build(t, "unwrap_envelope", map[string]any{"field": "data"})
	for i, tc := range []struct{ in, want string }{
		{`{"table_name": "tpch.lineitem", "operation_type": "SELECT", "data": {"id": 1, "l_orderkey": 123}, "old_data": null}`, `{"id": 1, "l_orderkey": 123}`},
		{`{"table_name": "users", "operation_type": "INSERT"}`, `{"table_name": "users", "operation_type": "INSERT"}`},
		{`{"data": "just a string", "meta": 1}`, `"just a string"`},
		{`{"data": null}`, `null`},
		{`{"data": [1, 2, 3], "count": 3}`, `[1, 2, 3]`},
		{`{"data": {"user": {"name": "Jöhn", "big": 123456789012345678901234567890}}}`, `{"user": {"name": "Jöhn", "big": 123456789012345678901234567890}}`},
		{`{"data": 1, "data": 2}`, `2`},
	} {
		out, schema := run(t, c, tc.in, connector.SchemaJSON)
		require.Equal(t, tc.want, out, "case %d", i)
		require.Equal(t, connector.SchemaJSON, schema)
	}
}

func TestChainRunsInOrder(t *testing.T) {
	t.Parallel()
	c, err := Build([]Spec{
		{Name: "add_fields", Config: map[string]any{"fields": []any{field("data", map[string]any{"static": map[string]any{"inner": int64(1)}})}}},
		{Name: "delete_fields", Config: map[string]any{"fields": []any{"drop"}}},
		{Name: "unwrap_envelope", Config: map[string]any{"field": "data"}},
		{Name: "add_fields", Config: map[string]any{"fields": []any{field("after", map[string]any{"static": true})}}},
		{Name: "update_fields", Config: map[string]any{"fields": []any{map[string]any{"key": "inner", "value": map[string]any{"static": int64(2)}, "condition": "key_exists"}}}},
	})
	require.NoError(t, err)
	out, _ := run(t, c, `{"drop": 1, "keep": 2}`, connector.SchemaJSON)
	require.JSONEq(t, `{"inner": 2, "after": true}`, out)
}

func TestMalformedObject(t *testing.T) {
	t.Parallel()
	c := build(t, "add_fields", map[string]any{"fields": []any{field("k", map[string]any{"static": "v"})}})
	for i, p := range []string{`{"a":`, `{"a":1}}`, `{"a" 1}`, "{\"a\":\"\x01\"}"} {
		m := connector.Message{Payload: []byte(p)}
		_, keep, err := c.Apply(&m, connector.SchemaJSON)
		require.ErrorContains(t, err, "transform add_fields: payload is not valid JSON", "case %d", i)
		require.False(t, keep)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "teleport", Source: "a.toml"}, "a.toml: transforms.teleport is not a known transform"},
		{Spec{Name: "add_fields", Source: "a.toml", Config: map[string]any{"fields": []any{field("k", map[string]any{"computed": "moon_phase"})}}},
			`a.toml: transforms.add_fields.fields[0].value.computed: expected one of "date_time", "timestamp_nanos", "timestamp_micros", "timestamp_millis", "timestamp_seconds", "uuid_v4", "uuid_v7", got "moon_phase"`},
		{Spec{Name: "add_fields", Source: "a.toml", Config: map[string]any{"fields": []any{field("", map[string]any{"static": int64(1)})}}},
			"a.toml: transforms.add_fields.fields[0].key: expected a field name, got an empty string"},
		{Spec{Name: "add_fields", Source: "a.toml", Config: map[string]any{"fields": []any{field("k", map[string]any{})}}},
			"a.toml: transforms.add_fields.fields[0].value: expected one of the keys static, computed, got none"},
		{Spec{Name: "add_fields", Source: "a.toml", Config: map[string]any{"field": []any{}}},
			`a.toml: transforms.add_fields.field: unknown key; did you mean "fields"?`},
		{Spec{Name: "update_fields", Source: "a.toml", Config: map[string]any{"fields": []any{map[string]any{"key": "k", "value": map[string]any{"static": int64(1)}, "condition": "sometimes"}}}},
			`a.toml: transforms.update_fields.fields[0].condition: expected one of "always", "key_exists", "key_not_exists", got "sometimes"`},
		{Spec{Name: "filter_fields", Source: "a.toml", Config: map[string]any{"patterns": []any{map[string]any{"key_pattern": map[string]any{"regex": "(["}}}}},
			`a.toml: transforms.filter_fields.patterns[0].key_pattern.regex: "([" is not a valid regular expression`},
		{Spec{Name: "filter_fields", Source: "a.toml", Config: map[string]any{"patterns": []any{map[string]any{"value_pattern": map[string]any{"regex": "(["}}}}},
			`a.toml: transforms.filter_fields.patterns[0].value_pattern.regex: "([" is not a valid regular expression`},
		{Spec{Name: "filter_fields", Source: "a.toml", Config: map[string]any{"patterns": []any{map[string]any{"key_pattern": map[string]any{"like": "x"}}}}},
			`a.toml: transforms.filter_fields.patterns[0].key_pattern.like: unknown key; allowed keys here: contains, ends_with, exact, regex, starts_with`},
		{Spec{Name: "delete_fields", Source: "a.toml", Config: map[string]any{"patterns": []any{map[string]any{"value_pattern": "is_purple"}}}},
			`a.toml: transforms.delete_fields.patterns[0].value_pattern: expected one of "is_null", "is_not_null", "is_string", "is_number", "is_boolean", "is_object", "is_array", got "is_purple"`},
		{Spec{Name: "filter_fields", Source: "a.toml", Config: map[string]any{"patterns": []any{map[string]any{"value_pattern": map[string]any{"between": []any{int64(1)}}}}}},
			`a.toml: transforms.filter_fields.patterns[0].value_pattern.between: expected a list of 2 numbers, got 1 items`},
		{Spec{Name: "filter_fields", Source: "a.toml", Config: map[string]any{"include_matching": "yes"}},
			`a.toml: transforms.filter_fields.include_matching: expected true or false, got "yes"`},
		{Spec{Name: "unwrap_envelope", Source: "a.toml", Config: map[string]any{}},
			"a.toml: transforms.unwrap_envelope.field: required key is missing; expected a string"},
	} {
		_, err := Build([]Spec{tc.spec})
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}

// A batch marked CheckedJSON is transformed exactly as one that is not.
func TestCheckedJSONChangesNothing(t *testing.T) {
	chain, err := Build([]Spec{
		{Name: "delete_fields", Config: map[string]any{"fields": []any{"title"}}, Source: "source.toml"},
		{Name: "update_fields", Config: map[string]any{"fields": []any{map[string]any{"key": "name", "value": map[string]any{"static": "F"}, "condition": "key_exists"}}}, Source: "source.toml"},
		{Name: "add_fields", Config: map[string]any{"fields": []any{field("pipeline", map[string]any{"static": "ferry"})}}, Source: "source.toml"},
	})
	require.NoError(t, err)
	var msgs []connector.Message
	for _, p := range []string{`{"id":1,"title":"a\"b","name":"c\\"}`, ` { "title" : [1,{"x":"]}"}] , "n":null } `, `{}`, `{"name":{"deep":["\\\\\""]}}`, `[1]`} {
		msgs = append(msgs, connector.Message{Payload: []byte(p)})
	}
	plain := chain.ApplyBatch(context.Background(), msgs, connector.SchemaJSON)
	checked := chain.ApplyBatch(CheckedJSON(context.Background()), msgs, connector.SchemaJSON)
	require.Equal(t, len(plain.Messages), len(checked.Messages))
	for i := range plain.Messages {
		require.Equal(t, string(plain.Messages[i].Payload), string(checked.Messages[i].Payload))
	}
	require.Equal(t, `{"id":1,"name":"F","pipeline":"ferry"}`, string(checked.Messages[0].Payload))
}
