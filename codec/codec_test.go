package codec

import (
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

func TestNewErrors(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		schema connector.Schema
		opts   Options
		want   string
	}{
		{"xml", Options{}, `schema "xml" is not known`},
		{connector.SchemaAvro, Options{AvroSchemaPath: "testdata/missing.avsc"}, "avro_schema_path: open testdata/missing.avsc"},
		{connector.SchemaAvro, Options{AvroSchemaJSON: `{"type":"record"}`}, "avro_schema_json: invalid Avro schema"},
		{connector.SchemaAvro, Options{AvroSchemaPath: "event.proto", BaseDir: "testdata"}, "avro_schema_path testdata/event.proto: invalid Avro schema"},
		{connector.SchemaAvro, Options{AvroFraming: "zip"}, `avro_framing: "zip" is not a framing`},
		{connector.SchemaAvro, Options{AvroFraming: FramingSingleObject}, "single_object needs a schema"},
		{connector.SchemaProto, Options{ProtoSchemaPath: "testdata/missing.proto", ProtoMessage: "X"}, "proto_schema_path testdata/missing.proto"},
		{connector.SchemaProto, Options{ProtoSchemaPath: "testdata/event.proto"}, "proto_message_type: required"},
		{connector.SchemaProto, Options{ProtoSchemaPath: "testdata/event.proto", ProtoMessage: "Nope"}, `proto_message_type: no message "Nope"`},
		{connector.SchemaProto, Options{ProtoMessage: "X"}, "without a schema path"},
		{connector.SchemaProto, Options{ProtoSchemaPath: "testdata/event.avsc", ProtoMessage: "X"}, "proto_schema_path testdata/event.avsc"},
		{connector.SchemaFlatBuffer, Options{FlatBufferSchemaPath: "testdata/event.fbs"}, "not a binary FlatBuffers schema"},
		{connector.SchemaFlatBuffer, Options{FlatBufferSchemaPath: "testdata/event.bfbs", FlatBufferRootTable: "Nope"}, `no table "Nope"`},
		{connector.SchemaFlatBuffer, Options{FlatBufferSchemaPath: "testdata/event.bfbs", FlatBufferRootTable: "Vec2"}, "is a struct"},
	} {
		_, err := New(tc.schema, tc.opts)
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}

func TestPlainCodecs(t *testing.T) {
	t.Parallel()
	j, r, x := mustNew(t, connector.SchemaJSON, Options{}), mustNew(t, connector.SchemaRaw, Options{}), mustNew(t, connector.SchemaText, Options{})
	require.NoError(t, j.Validate([]byte(`{"a":[1,2]}`)))
	require.ErrorContains(t, j.Validate([]byte(`{"a":`)), "not valid JSON")
	require.NoError(t, r.Validate([]byte{0xff, 0}))
	require.NoError(t, x.Validate([]byte("héllo")))
	require.ErrorContains(t, x.Validate([]byte{0xff}), "UTF-8")
	require.False(t, r.Mapped())
	_, err := r.ToJSON(nil, []byte("x"))
	require.ErrorIs(t, err, ErrNotMapped)
}

func TestConverter(t *testing.T) {
	t.Parallel()
	json, raw, text := mustNew(t, connector.SchemaJSON, Options{}), mustNew(t, connector.SchemaRaw, Options{}), mustNew(t, connector.SchemaText, Options{})
	avroS, avroNo := mustNew(t, connector.SchemaAvro, avroOpts()), mustNew(t, connector.SchemaAvro, Options{})
	protoS, fbNo := mustNew(t, connector.SchemaProto, protoOpts()), mustNew(t, connector.SchemaFlatBuffer, Options{})
	for i, tc := range []struct {
		from, to Codec
		in, out  string // out "" means error when converting; "=" means unchanged
		startErr string
	}{
		{from: json, to: json, in: `{"a":1}`, out: "="},
		{from: json, to: raw, in: `{"a":1}`, out: "="},
		{from: json, to: text, in: `{"a":1}`, out: "="},
		{from: text, to: json, in: `{"a":1}`, out: "="},
		{from: text, to: json, in: `plain words`, out: ""},
		{from: raw, to: text, in: "ok", out: "="},
		{from: raw, to: text, in: "\xff", out: ""},
		{from: raw, to: json, in: `[1]`, out: "="},
		{from: avroNo, to: json, startErr: `no conversion from schema "avro" to "json" (avro payloads map to JSON only with a schema: set avro_schema_json or avro_schema_path)`},
		{from: json, to: fbNo, startErr: `no conversion from schema "json" to "flatbuffer" (flatbuffer payloads map to JSON only with a schema: set a .bfbs schema path)`},
		{from: raw, to: avroNo, in: "\x02", out: "="},
		{from: avroNo, to: avroS, in: "\x02", out: "="},
		{from: json, to: avroS, in: `{"bad":true}`, out: ""},
		{from: protoS, to: json, in: "", out: `{"id":0,"name":"","count":0,"score":0,"ratio":0,"active":false,"tags":[],
			"kind":"KIND_UNSPECIFIED","attrs":{},"blob":"","big":0,"lines":[]}`},
	} {
		conv, err := Converter(tc.from, tc.to)
		if tc.startErr != "" {
			require.EqualError(t, err, tc.startErr, "case %d", i)
			continue
		}
		require.NoError(t, err, "case %d", i)
		out, err := conv(nil, []byte(tc.in))
		switch tc.out {
		case "":
			require.Error(t, err, "case %d", i)
		case "=":
			require.NoError(t, err, "case %d", i)
			require.Equal(t, tc.in, string(out), "case %d", i)
		default:
			require.NoError(t, err, "case %d", i)
			requireSameJSON(t, tc.out, string(out), "case %d", i)
		}
	}
}

// TestCrossFormat carries one record through every mapped schema and back:
// values and their JSON types survive each hop.
func TestCrossFormat(t *testing.T) {
	t.Parallel()
	record := `{"id":9007199254740993,"name":"Grüße 😀","count":-42,"score":1.5,"ratio":0.25,"active":true,
"tags":["a","b"],"address":{"street":"Main 1","city":"Zürich"}}`
	json := mustNew(t, connector.SchemaJSON, Options{})
	avroS := mustNew(t, connector.SchemaAvro, Options{AvroSchemaJSON: `{"type":"record","name":"E","fields":[
		{"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"count","type":"int"},
		{"name":"score","type":"double"},{"name":"ratio","type":"float"},{"name":"active","type":"boolean"},
		{"name":"tags","type":{"type":"array","items":"string"}},
		{"name":"address","type":{"type":"record","name":"A","fields":[{"name":"street","type":"string"},{"name":"city","type":"string"}]}}]}`})
	protoS := mustNew(t, connector.SchemaProto, protoOpts())
	fbS := mustNew(t, connector.SchemaFlatBuffer, fbOpts())
	// Avro keeps only its own fields, so it drops the defaults that the
	// protobuf and FlatBuffers mappings add for fields the record lacks.
	hops := []Codec{avroS, protoS, avroS, fbS, avroS, json}
	cur, from := []byte(record), json
	for i, to := range hops {
		conv, err := Converter(from, to)
		require.NoError(t, err, "hop %d: %s to %s", i, from.Schema(), to.Schema())
		cur, err = conv(nil, cur)
		require.NoError(t, err, "hop %d: %s to %s", i, from.Schema(), to.Schema())
		from = to
	}
	requireSameJSON(t, record, string(cur))
}
