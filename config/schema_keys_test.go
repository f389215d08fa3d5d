package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStreamSchemaKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "sink.toml")
	src := `type = "sink"
key = "k"
[[streams]]
stream = "s"
topics = ["a"]
schema = "proto"
proto_schema_path = "schemas/order.proto"
proto_message_type = "shop.Order"
proto_include_paths = ["schemas/common"]
[[streams]]
stream = "s"
topics = ["b"]
schema = "flatbuffer"
flatbuffer_schema_path = "/abs/event.bfbs"
flatbuffer_root_table = "Event"
[[streams]]
stream = "s"
topics = ["c"]
schema = "avro"
avro_schema_json = '{"type":"string"}'
avro_framing = "confluent"
avro_schema_id = 42
[transforms.flatbuffer_convert]
schema_path = "x.bfbs"
`
	require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
	c := readConnector(t, file)
	p := c.Consumers[0].StreamSchema
	require.Equal(t, filepath.Join(dir, "schemas/order.proto"), p.ProtoSchemaPath, "relative to the connector file")
	require.Equal(t, "shop.Order", p.ProtoMessageType)
	require.Equal(t, []string{filepath.Join(dir, "schemas/common")}, p.ProtoIncludePaths)
	require.Equal(t, StreamSchema{FlatBufferSchemaPath: "/abs/event.bfbs", FlatBufferRootTable: "Event"}, c.Consumers[1].StreamSchema)
	require.Equal(t, StreamSchema{AvroFraming: "confluent", AvroSchemaID: 42}, c.Consumers[2].StreamSchema)
	require.Equal(t, "flat_buffer_convert", c.Transforms[0].Name, "the old spelling is an alias of upstream's name")

	out, err := c.MarshalJSON()
	require.NoError(t, err)
	var doc struct {
		Streams []map[string]any `json:"streams"`
	}
	require.NoError(t, json.Unmarshal(out, &doc))
	require.Equal(t, "shop.Order", doc.Streams[0]["proto_message_type"])
	require.Equal(t, float64(42), doc.Streams[2]["avro_schema_id"])
	require.NotContains(t, doc.Streams[1], "avro_framing", "unset extension keys are left out")
}

func TestStreamSchemaKeyErrors(t *testing.T) {
	t.Parallel()
	head := "type = \"source\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n"
	for i, tc := range []struct{ src, want string }{
		{head + "proto_schema_path = \"a.proto\"\nproto_message_type = \"A\"\n", `gen.toml:6: streams[0].proto_schema_path: only used with schema = "proto"`},
		{head + "schema = \"proto\"\nproto_schema_path = \"a.proto\"\n", "gen.toml:7: streams[0].proto_schema_path: needs proto_message_type"},
		{head + "schema = \"avro\"\navro_framing = \"zip\"\n", `streams[0].avro_framing: expected one of "binary", "single_object", "confluent", got "zip"`},
		{head + "schema = \"json\"\navro_framing = \"binary\"\n", `streams[0].avro_framing: only used with schema = "avro"`},
		{head + "schema = \"flatbuffer\"\nflatbuffer_root_table = \"T\"\n", "streams[0].flatbuffer_root_table: only used with flatbuffer_schema_path"},
		{head + "[transforms.flat_buffer_converter]\n", `transforms.flat_buffer_converter: unknown transform; did you mean "flat_buffer_convert"?`},
	} {
		_, err := ParseConnector("gen.toml", []byte(tc.src), noEnv)
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}
