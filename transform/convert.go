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

// convertOptions are the conversion_options keys of the three transforms.
type convertOptions struct {
	PrettyJSON       bool   `json:"pretty_json"`
	IncludeMetadata  bool   `json:"include_metadata"`
	StrictMode       bool   `json:"strict_mode"`
	ValidateMessages *bool  `json:"validate_messages"` // proto; always on
	TypeURLPrefix    string `json:"type_url_prefix"`   // proto; unused
	VerifyBuffers    *bool  `json:"verify_buffers"`    // flatbuffer; always on
	BufferSizeHint   int    `json:"buffer_size_hint"`  // flatbuffer; unused
}

// schemaName reads a source_format/target_format value; upstream spells
// the FlatBuffers variant "flat_buffer".
func schemaName(b *buildContext, key string, v *string, def connector.Schema) (connector.Schema, error) {
	if v == nil {
		return def, nil
	}
	switch s := connector.Schema(*v); s {
	case connector.SchemaJSON, connector.SchemaRaw, connector.SchemaText, connector.SchemaProto,
		connector.SchemaAvro, connector.SchemaFlatBuffer:
		return s, nil
	case "flat_buffer":
		return connector.SchemaFlatBuffer, nil
	case "protobuf":
		return connector.SchemaProto, nil
	}
	return "", b.errorf(key, "%q is not a schema (use json, raw, text, proto, avro or flat_buffer)", *v)
}

// newConvert builds the converter; own is the schema whose options opts
// describe (avro, proto or flatbuffer).
func newConvert(b *buildContext, name string, own, from, to connector.Schema, opts codec.Options,
	mappings map[string]string, co convertOptions) (*convert, error) {
	opts.BaseDir, opts.StrictJSON = b.baseDir, co.StrictMode
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
	t := &convert{name: name, from: from, to: to, conv: conv, pretty: co.PrettyJSON, metadata: co.IncludeMetadata,
		meta: map[string]string{}}
	if len(mappings) > 0 {
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
func newAvroConvert(b *buildContext) (Transform, error) {
	var c struct {
		SourceFormat      *string           `json:"source_format"`
		TargetFormat      *string           `json:"target_format"`
		SchemaPath        string            `json:"schema_path"`
		SchemaJSON        string            `json:"schema_json"`
		FieldMappings     map[string]string `json:"field_mappings"`
		ConversionOptions convertOptions    `json:"conversion_options"`
	}
	if err := b.cfg.Decode(&c); err != nil {
		return nil, err
	}
	from, to, err := formats(b, c.SourceFormat, c.TargetFormat, connector.SchemaAvro)
	if err != nil {
		return nil, err
	}
	return newConvert(b, "avro_convert", connector.SchemaAvro, from, to,
		codec.Options{AvroSchemaJSON: c.SchemaJSON, AvroSchemaPath: c.SchemaPath}, c.FieldMappings, c.ConversionOptions)
}

// proto_convert:
//
//	[transforms.proto_convert]
//	source_format = "proto"
//	target_format = "json"
//	schema_path = "schemas/order.proto"
//	message_type = "shop.Order"
//	include_paths = ["schemas/common"]
func newProtoConvert(b *buildContext) (Transform, error) {
	var c struct {
		SourceFormat          *string           `json:"source_format"`
		TargetFormat          *string           `json:"target_format"`
		SchemaPath            string            `json:"schema_path"`
		MessageType           string            `json:"message_type"`
		FieldMappings         map[string]string `json:"field_mappings"`
		SchemaRegistryURL     string            `json:"schema_registry_url"` // accepted and unused, as upstream
		DescriptorSet         []byte            `json:"-"`
		DescriptorSetNumbers  []int             `json:"descriptor_set"`
		IncludePaths          []string          `json:"include_paths"`
		PreserveUnknownFields bool              `json:"preserve_unknown_fields"` // protobuf keeps them anyway
		ConversionOptions     convertOptions    `json:"conversion_options"`
	}
	if err := b.cfg.Decode(&c); err != nil {
		return nil, err
	}
	for i, n := range c.DescriptorSetNumbers {
		if n < 0 || n > 255 {
			return nil, b.errorf(fmt.Sprintf("descriptor_set[%d]", i), "%d is not a byte", n)
		}
		c.DescriptorSet = append(c.DescriptorSet, byte(n))
	}
	from, to, err := formats(b, c.SourceFormat, c.TargetFormat, connector.SchemaProto)
	if err != nil {
		return nil, err
	}
	t, err := newConvert(b, "proto_convert", connector.SchemaProto, from, to, codec.Options{
		ProtoSchemaPath: c.SchemaPath, ProtoMessage: c.MessageType, ProtoIncludePaths: c.IncludePaths,
		ProtoDescriptorSet: c.DescriptorSet,
	}, c.FieldMappings, c.ConversionOptions)
	if err != nil {
		return nil, err
	}
	t.meta["message_type"] = c.MessageType
	if c.MessageType == "" {
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
func newFlatBufferConvert(b *buildContext) (Transform, error) {
	var c struct {
		SourceFormat          *string           `json:"source_format"`
		TargetFormat          *string           `json:"target_format"`
		SchemaPath            string            `json:"schema_path"`
		RootTableName         string            `json:"root_table_name"`
		FieldMappings         map[string]string `json:"field_mappings"`
		IncludePaths          []string          `json:"include_paths"`           // a .bfbs needs none
		PreserveUnknownFields bool              `json:"preserve_unknown_fields"` // unknown JSON keys are ignored unless strict_mode
		ConversionOptions     convertOptions    `json:"conversion_options"`
	}
	if err := b.cfg.Decode(&c); err != nil {
		return nil, err
	}
	from, to, err := formats(b, c.SourceFormat, c.TargetFormat, connector.SchemaFlatBuffer)
	if err != nil {
		return nil, err
	}
	return newConvert(b, "flat_buffer_convert", connector.SchemaFlatBuffer, from, to,
		codec.Options{FlatBufferSchemaPath: c.SchemaPath, FlatBufferRootTable: c.RootTableName}, c.FieldMappings, c.ConversionOptions)
}

// formats reads source_format and target_format; upstream's defaults
// convert the transform's own format to JSON.
func formats(b *buildContext, src, dst *string, own connector.Schema) (connector.Schema, connector.Schema, error) {
	from, err := schemaName(b, "source_format", src, own)
	if err != nil {
		return "", "", err
	}
	to, err := schemaName(b, "target_format", dst, connector.SchemaJSON)
	return from, to, err
}
