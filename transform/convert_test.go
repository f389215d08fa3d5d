package transform

import (
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

func TestAvroConvert(t *testing.T) {
	t.Parallel()
	src := "testdata/connector.toml" // relative schema paths resolve against its directory
	enc, err := Build([]Spec{{Name: "avro_convert", Source: src, Config: map[string]any{
		"source_format": "json", "target_format": "avro", "schema_path": "user.avsc",
		"field_mappings": map[string]any{"full_name": "name"},
	}}})
	require.NoError(t, err)
	dec, err := Build([]Spec{{Name: "avro_convert", Source: src, Config: map[string]any{
		"schema_path": "user.avsc", "field_mappings": map[string]any{"age": "years"},
	}}})
	require.NoError(t, err)

	avro, schema := run(t, enc, `{"full_name": "Alice", "age": 30, "id": 9007199254740993, "extra": true}`, connector.SchemaJSON)
	require.Equal(t, connector.SchemaAvro, schema)
	require.Equal(t, "\x0aAlice\x3c\x82\x80\x80\x80\x80\x80\x80\x20", avro)
	out, schema := run(t, dec, avro, connector.SchemaAvro)
	require.Equal(t, connector.SchemaJSON, schema)
	require.Equal(t, `{"name":"Alice","years":30,"id":9007199254740993}`, out)

	same, schema := run(t, dec, `{"already":"json"}`, connector.SchemaJSON)
	require.Equal(t, `{"already":"json"}`, same, "a payload already in target_format passes")
	require.Equal(t, connector.SchemaJSON, schema)

	m := connector.Message{Payload: []byte("x")}
	_, _, err = dec.Apply(&m, connector.SchemaText)
	require.ErrorContains(t, err, "payload schema is text, source_format is avro")
	m = connector.Message{Payload: []byte(`{"name": 5}`)}
	_, keep, err := enc.Apply(&m, connector.SchemaJSON)
	require.ErrorContains(t, err, "$.name: JSON number does not match Avro type string")
	require.False(t, keep)
}

func TestProtoConvert(t *testing.T) {
	t.Parallel()
	cfg := func(from, to string, extra map[string]any) map[string]any {
		c := map[string]any{"source_format": from, "target_format": to, "schema_path": "testdata/user.proto", "message_type": "ferry.test.User"}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	enc := build(t, "proto_convert", cfg("json", "proto", nil))
	dec := build(t, "proto_convert", cfg("proto", "json", map[string]any{"conversion_options": map[string]any{"include_metadata": true}}))
	pb, schema := run(t, enc, `{"name":"Bob","age":25,"id":-1}`, connector.SchemaJSON)
	require.Equal(t, connector.SchemaProto, schema)
	require.Equal(t, "\x0a\x03Bob\x10\x19\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", pb)
	out, schema := run(t, dec, pb, connector.SchemaProto)
	require.Equal(t, connector.SchemaJSON, schema)
	require.Regexp(t, `^\{"data":\{"name":"Bob","age":25,"id":-1\},"metadata":\{"converted_from":"proto","timestamp":\d+,"message_type":"ferry.test.User"\}\}$`, out)

	text := build(t, "proto_convert", cfg("proto", "text", map[string]any{"conversion_options": map[string]any{"pretty_json": true}}))
	out, schema = run(t, text, pb, connector.SchemaProto)
	require.Equal(t, connector.SchemaText, schema)
	require.Equal(t, "{\n  \"name\": \"Bob\",\n  \"age\": 25,\n  \"id\": -1\n}", out)
}

func TestFlatBufferConvert(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"flat_buffer_convert", "flatbuffer_convert"} {
		enc := build(t, name, map[string]any{"source_format": "json", "target_format": "flat_buffer", "schema_path": "testdata/event.bfbs"})
		dec := build(t, name, map[string]any{"schema_path": "testdata/event.bfbs", "root_table_name": "ferry.test.Event"})
		require.Equal(t, "flat_buffer_convert", enc[0].Name())
		fb, schema := run(t, enc, `{"id":7,"name":"x","kind":"Updated","tags":["t"]}`, connector.SchemaJSON)
		require.Equal(t, connector.SchemaFlatBuffer, schema)
		out, schema := run(t, dec, fb, connector.SchemaFlatBuffer)
		require.Equal(t, connector.SchemaJSON, schema)
		require.JSONEq(t, `{"id":7,"name":"x","count":0,"score":0,"ratio":0,"active":false,"tags":["t"],"kind":"Updated","level":5,"big":0}`, out)
	}
}

// A chain may convert and then keep transforming: the schema flows on.
func TestChainAcrossConversion(t *testing.T) {
	t.Parallel()
	c, err := Build([]Spec{
		{Name: "avro_convert", Config: map[string]any{"schema_path": "testdata/user.avsc"}},
		{Name: "add_fields", Config: map[string]any{"fields": []any{field("source", map[string]any{"static": "avro"})}}},
		{Name: "avro_convert", Config: map[string]any{"source_format": "json", "target_format": "avro", "schema_path": "testdata/user.avsc"}},
	})
	require.NoError(t, err)
	in := "\x0aAlice\x3c\x02"
	out, schema := run(t, c, in, connector.SchemaAvro)
	require.Equal(t, connector.SchemaAvro, schema)
	require.Equal(t, in, out, "the added field is not in the Avro schema, so the record is the same")
}

func TestConvertConfigErrors(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		name string
		cfg  map[string]any
		want string
	}{
		{"avro_convert", map[string]any{"schema_path": "nope.avsc"}, "c.toml: transforms.avro_convert: avro_schema_path: open nope.avsc"},
		{"avro_convert", map[string]any{}, "c.toml: transforms.avro_convert: source_format avro to target_format json: no conversion"},
		{"avro_convert", map[string]any{"source_format": "yaml"}, `c.toml: transforms.avro_convert.source_format: expected one of "json", "raw", "text", "proto", "avro", "flat_buffer", got "yaml"`},
		{"avro_convert", map[string]any{"schema_json": "{", "target_format": "avro", "source_format": "json"}, "avro_schema_json: invalid Avro schema"},
		{"proto_convert", map[string]any{"schema_path": "testdata/user.proto"}, "proto_message_type: required"},
		{"proto_convert", map[string]any{"schema_path": "testdata/user.proto", "message_type": "Nope"}, `no message "Nope"`},
		{"proto_convert", map[string]any{"descriptor_set": []any{int64(300)}}, "c.toml: transforms.proto_convert.descriptor_set[0]: expected an integer from 0 to 255, got 300"},
		{"flat_buffer_convert", map[string]any{"schema_path": "testdata/event.fbs"}, "not a binary FlatBuffers schema"},
		{"flat_buffer_convert", map[string]any{"conversion_options": map[string]any{"colour": true}}, "c.toml: transforms.flat_buffer_convert.conversion_options.colour: unknown key; allowed keys here: buffer_size_hint"},
	} {
		_, err := Build([]Spec{{Name: tc.name, Config: tc.cfg, Source: "c.toml"}})
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}
