package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/ferryhq/ferry/codec"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/jsonx"
)

// convert is the shared body of avro_convert, proto_convert and
// flat_buffer_convert: it changes a payload from source_format to
// target_format through the codec package, renames top-level JSON fields
// (field_mappings) on the JSON side, and can pretty-print or wrap the JSON
// it produces (conversion_options.pretty_json, include_metadata).
//
// A payload whose schema already is target_format passes through; one in
// any other schema than source_format is an error.
type convert struct {
	name     string
	from, to connector.Schema
	conv     codec.Convert
	mappings map[string]fieldKey
	pretty   bool
	metadata bool
	meta     map[string]string // extra metadata members
}

// convertSpec is the spec of a convert transform whose own format is own
// (its default source_format), with the transform's extra keys.
func convertSpec(own string, extra ...connector.Field) *connector.Spec {
	formats := []string{"json", "raw", "text", "proto", "avro", "flat_buffer"}
	aliases := map[string]string{"flatbuffer": "flat_buffer", "protobuf": "proto"}
	fields := []connector.Field{
		connector.NewEnumField("source_format", formats...).WithAliases(aliases).WithDefault(own).
			WithDoc("the format of the payload before"),
		connector.NewEnumField("target_format", formats...).WithAliases(aliases).WithDefault("json").
			WithDoc("the format of the payload after"),
		connector.NewStringField("schema_path").WithDoc("the schema file, relative to the configuration file"),
		connector.NewStringMapField("field_mappings").WithDoc("top-level JSON fields to rename, old name to new"),
		connector.NewObjectField("conversion_options",
			connector.NewBoolField("pretty_json").WithDefault(false).WithDoc("indent the JSON produced"),
			connector.NewBoolField("include_metadata").WithDefault(false).
				WithDoc("wrap the JSON produced as {data, metadata}"),
			connector.NewBoolField("strict_mode").WithDefault(false).WithDoc("refuse JSON keys the schema lacks"),
			connector.NewBoolField("validate_messages").WithDoc("proto; always on"),
			connector.NewStringField("type_url_prefix").WithDoc("proto; unused"),
			connector.NewBoolField("verify_buffers").WithDoc("flat_buffer; always on"),
			connector.NewIntField("buffer_size_hint").WithDoc("flat_buffer; unused"),
		),
	}
	return connector.NewSpec(append(fields, extra...)...)
}

// schemaOf maps a source_format/target_format value to its schema;
// upstream spells the FlatBuffers variant "flat_buffer".
func schemaOf(format string) connector.Schema {
	if format == "flat_buffer" {
		return connector.SchemaFlatBuffer
	}
	return connector.Schema(format)
}

// newConvert builds the converter; own is the schema whose options opts
// describe (avro, proto or flatbuffer).
func newConvert(b *buildContext, name string, own connector.Schema, set *connector.Settings, opts codec.Options) (*convert, error) {
	from, to := schemaOf(set.String("source_format")), schemaOf(set.String("target_format"))
	co := set.Object("conversion_options")
	opts.BaseDir, opts.StrictJSON = b.baseDir, co.Bool("strict_mode")
	mk := func(s connector.Schema) (codec.Codec, error) {
		o := codec.Options{}
		if s == own {
			o = opts
		}
		c, err := codec.New(s, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.where(), err)
		}
		return c, nil
	}
	fc, err := mk(from)
	if err != nil {
		return nil, err
	}
	tc, err := mk(to)
	if err != nil {
		return nil, err
	}
	conv, err := codec.Converter(fc, tc)
	if err != nil {
		return nil, fmt.Errorf("%s: source_format %s to target_format %s: %w", b.where(), from, to, err)
	}
	t := &convert{name: name, from: from, to: to, conv: conv, pretty: co.Bool("pretty_json"),
		metadata: co.Bool("include_metadata"), meta: map[string]string{}}
	if mappings := set.StringMap("field_mappings"); len(mappings) > 0 {
		t.mappings = make(map[string]fieldKey, len(mappings))
		for k, v := range mappings {
			t.mappings[k] = newFieldKey(v)
		}
	}
	return t, nil
}

func (t *convert) Name() string { return t.name }

func isTextual(s connector.Schema) bool { return isJSON(s) || s == connector.SchemaText }

func (t *convert) Apply(m *connector.Message, schema connector.Schema) (connector.Schema, bool, error) {
	if schema == "" {
		schema = connector.SchemaJSON
	}
	if schema == t.to && t.from != t.to {
		return schema, true, nil // converted already (by the stream's decoding)
	}
	if schema != t.from {
		return schema, false, fmt.Errorf("payload schema is %s, source_format is %s", schema, t.from)
	}
	p := m.Payload
	var err error
	if isTextual(t.from) && t.mappings != nil {
		if p, err = t.rename(p); err != nil {
			return schema, false, err
		}
	}
	if p, err = t.conv(nil, p); err != nil {
		return schema, false, err
	}
	if isTextual(t.to) {
		if t.mappings != nil && !isTextual(t.from) {
			if p, err = t.rename(p); err != nil {
				return schema, false, err
			}
		}
		if t.metadata && isJSON(t.to) {
			p = t.wrap(p)
		}
		if t.pretty {
			var buf bytes.Buffer
			if json.Indent(&buf, p, "", "  ") == nil {
				p = buf.Bytes()
			}
		}
	}
	m.Payload = p
	return t.to, true, nil
}

// rename applies field_mappings to a JSON object's top-level keys; other
// payloads pass.
func (t *convert) rename(p []byte) ([]byte, error) {
	if !jsonx.IsObject(p) {
		return p, nil
	}
	o, err := getObject(p)
	if err != nil {
		return nil, err
	}
	defer putObject(o)
	for i := range o.members {
		mb := &o.members[i]
		if k, ok := t.mappings[mb.Name()]; ok {
			mb.Key, mb.Escaped = k.raw, k.escaped
			o.changed = true
		}
	}
	return o.result(), nil
}

// wrap is upstream's include_metadata form.
func (t *convert) wrap(p []byte) []byte {
	out := make([]byte, 0, len(p)+128)
	out = append(out, `{"data":`...)
	out = append(out, p...)
	out = append(out, `,"metadata":{"converted_from":`...)
	out = jsonx.AppendString(out, string(t.from))
	out = append(out, `,"timestamp":`...)
	out = strconv.AppendInt(out, time.Now().UnixMilli(), 10)
	for k, v := range t.meta {
		out = append(jsonx.AppendString(append(out, ','), k), ':')
		out = jsonx.AppendString(out, v)
	}
	return append(out, "}}"...)
}

// avro_convert:
//
//	[transforms.avro_convert]
//	source_format = "json"
//	target_format = "avro"
//	schema_path = "schemas/user.avsc"   # or schema_json = '{...}'
var avroConvertSpec = convertSpec("avro",
	connector.NewStringField("schema_json").WithDoc("the Avro schema itself, instead of schema_path"),
)

func newAvroConvert(b *buildContext) (Transform, error) {
	set, err := avroConvertSpec.Parse(b.cfg)
	if err != nil {
		return nil, err
	}
	return newConvert(b, "avro_convert", connector.SchemaAvro, set,
		codec.Options{AvroSchemaJSON: set.String("schema_json"), AvroSchemaPath: set.String("schema_path")})
}

// proto_convert:
//
//	[transforms.proto_convert]
//	source_format = "proto"
//	target_format = "json"
//	schema_path = "schemas/order.proto"
//	message_type = "shop.Order"
//	include_paths = ["schemas/common"]
var protoConvertSpec = convertSpec("proto",
	connector.NewStringField("message_type").WithDoc("the message's full name, such as shop.Order"),
	connector.NewStringField("schema_registry_url").WithDoc("accepted and unused, as upstream"),
	connector.NewListField("descriptor_set", connector.NewIntField("").Between(0, 255)).
		WithDoc("a serialized FileDescriptorSet, as bytes, instead of schema_path"),
	connector.NewStringListField("include_paths").WithDoc("where imports of schema_path are found"),
	connector.NewBoolField("preserve_unknown_fields").WithDoc("protobuf keeps them anyway"),
)

func newProtoConvert(b *buildContext) (Transform, error) {
	set, err := protoConvertSpec.Parse(b.cfg)
	if err != nil {
		return nil, err
	}
	var descriptors []byte
	for _, n := range set.Ints("descriptor_set") {
		descriptors = append(descriptors, byte(n))
	}
	msg := set.String("message_type")
	t, err := newConvert(b, "proto_convert", connector.SchemaProto, set, codec.Options{
		ProtoSchemaPath: set.String("schema_path"), ProtoMessage: msg, ProtoIncludePaths: set.Strings("include_paths"),
		ProtoDescriptorSet: descriptors,
	})
	if err != nil {
		return nil, err
	}
	t.meta["message_type"] = msg
	if msg == "" {
		t.meta["message_type"] = "unknown"
	}
	return t, nil
}

// flat_buffer_convert (alias flatbuffer_convert):
//
//	[transforms.flat_buffer_convert]
//	source_format = "flat_buffer"
//	target_format = "json"
//	schema_path = "schemas/monster.bfbs"   # flatc --binary --schema monster.fbs
//	root_table_name = "Monster"
var flatBufferConvertSpec = convertSpec("flat_buffer",
	connector.NewStringField("root_table_name").WithDoc("the root table, when the schema names none"),
	connector.NewStringListField("include_paths").WithDoc("a .bfbs needs none"),
	connector.NewBoolField("preserve_unknown_fields").WithDoc("unknown JSON keys are ignored unless strict_mode"),
)

func newFlatBufferConvert(b *buildContext) (Transform, error) {
	set, err := flatBufferConvertSpec.Parse(b.cfg)
	if err != nil {
		return nil, err
	}
	return newConvert(b, "flat_buffer_convert", connector.SchemaFlatBuffer, set,
		codec.Options{FlatBufferSchemaPath: set.String("schema_path"), FlatBufferRootTable: set.String("root_table_name")})
}
