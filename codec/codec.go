package codec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ferryhq/ferry/connector"
)

// Codec reads and writes the payloads of one stream schema.
//
// Every method is safe for concurrent use. dst arguments are appended to
// (pass nil for a new buffer); the result never aliases payload.
type Codec interface {
	// Schema is the payload format.
	Schema() connector.Schema
	// Validate checks that payload decodes (the sink-side check of a
	// consumed message).
	Validate(payload []byte) error
	// Mapped reports whether payloads map to JSON and back (ToJSON and
	// FromJSON work). Avro needs a schema for that, FlatBuffers a .bfbs
	// schema; JSON, text and protobuf always map.
	Mapped() bool
	// ToJSON appends the JSON document payload decodes to.
	ToJSON(dst, payload []byte) ([]byte, error)
	// FromJSON appends the payload that encodes the JSON document doc.
	FromJSON(dst, doc []byte) ([]byte, error)
}

// Options are the schema settings of a stream or a *_convert transform.
// Relative paths are resolved against BaseDir.
type Options struct {
	// AvroSchemaJSON is an Avro schema (avro_schema_json); it wins over
	// AvroSchemaPath (avro_schema_path, an .avsc file).
	AvroSchemaJSON, AvroSchemaPath string
	// AvroFraming is how Avro datums are framed on the wire: "binary"
	// (the default, a bare datum as upstream writes), "single_object"
	// (Avro's single-object encoding: C3 01, the schema's CRC-64-AVRO
	// fingerprint, the datum) or "confluent" (0x00, a 4-byte big-endian
	// schema id, the datum).
	AvroFraming string
	// AvroSchemaID is the schema registry id written with the confluent
	// framing; when not zero, reading checks it too.
	AvroSchemaID uint32

	// ProtoSchemaPath is a .proto file, compiled at start-up; ProtoMessage
	// names the message type in it (a full name such as "shop.Order", or
	// a simple name that is unique). Without them a proto payload is read
	// as a google.protobuf.Any, as upstream's decoder does.
	ProtoSchemaPath, ProtoMessage string
	// ProtoIncludePaths are where imports are looked up, after the .proto
	// file's own directory; google/protobuf/*.proto are built in.
	ProtoIncludePaths []string
	// ProtoDescriptorSet is a serialized FileDescriptorSet, an alternative
	// to ProtoSchemaPath.
	ProtoDescriptorSet []byte

	// FlatBufferSchemaPath is a binary FlatBuffers schema (.bfbs, made by
	// `flatc --binary --schema x.fbs`); FlatBufferRootTable names the
	// root table when it is not the schema's root_type.
	FlatBufferSchemaPath, FlatBufferRootTable string

	// StrictJSON makes FromJSON reject object members the schema does
	// not declare (by default they are ignored, as upstream does).
	StrictJSON bool

	// BaseDir anchors relative paths, such as the connector file's
	// directory.
	BaseDir string
}

func (o *Options) path(p string) string {
	if p == "" || filepath.IsAbs(p) || o.BaseDir == "" {
		return p
	}
	return filepath.Join(o.BaseDir, p)
}

func (o *Options) readFile(option, p string) ([]byte, error) {
	b, err := os.ReadFile(o.path(p))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", option, err)
	}
	return b, nil
}

// scratch holds buffers for decoding that only validates.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// validateByDecoding runs a ToJSON into a pooled buffer.
func validateByDecoding(toJSON func(dst, p []byte) ([]byte, error), p []byte) error {
	bp := scratch.Get().(*[]byte)
	out, err := toJSON((*bp)[:0], p)
	if cap(out) <= 64<<10 {
		*bp = out[:0]
		scratch.Put(bp)
	}
	return err
}

// ErrNotMapped is returned by ToJSON and FromJSON of a codec that has no
// JSON mapping.
var ErrNotMapped = errors.New("payloads of this schema have no JSON mapping")

// New makes the codec of a schema. Schema files are read and compiled
// here, so a bad file is an error at start-up that names its option.
func New(schema connector.Schema, opts Options) (Codec, error) {
	switch schema {
	case connector.SchemaJSON, "":
		return jsonCodec{}, nil
	case connector.SchemaRaw:
		return rawCodec{}, nil
	case connector.SchemaText:
		return textCodec{}, nil
	case connector.SchemaAvro:
		return newAvro(opts)
	case connector.SchemaProto, "protobuf":
		return newProto(opts)
	case connector.SchemaFlatBuffer, "flat_buffer":
		return newFlatBuffer(opts)
	}
	return nil, fmt.Errorf("schema %q is not known (use json, raw, text, proto, avro or flatbuffer)", schema)
}

// Convert turns a payload of one schema into another, appending to dst.
type Convert func(dst, payload []byte) ([]byte, error)

// Identity reports whether c passes payloads through unchanged.
func identity(dst, p []byte) ([]byte, error) {
	if dst == nil {
		return p, nil
	}
	return append(dst, p...), nil
}

// Converter returns how payloads of from become payloads of to, or an
// error when no conversion exists; call it at start-up.
//
//   - the same schema, or to raw: bytes pass through;
//   - raw to anything: the bytes are checked with to.Validate;
//   - JSON to text passes through; text to JSON checks the JSON;
//   - JSON or text to a mapped codec encodes (FromJSON); a mapped codec to
//     JSON or text decodes (ToJSON); two mapped codecs convert through
//     JSON.
//
// A Convert with dst == nil may return payload itself.
func Converter(from, to Codec) (Convert, error) {
	fs, ts := from.Schema(), to.Schema()
	isText := func(s connector.Schema) bool { return s == connector.SchemaJSON || s == connector.SchemaText }
	switch {
	case fs == ts, ts == connector.SchemaRaw, fs == connector.SchemaJSON && ts == connector.SchemaText:
		return identity, nil
	case fs == connector.SchemaRaw, fs == connector.SchemaText && ts == connector.SchemaJSON:
		return func(dst, p []byte) ([]byte, error) {
			if err := to.Validate(p); err != nil {
				return nil, err
			}
			return identity(dst, p)
		}, nil
	case isText(fs) && to.Mapped():
		return to.FromJSON, nil
	case from.Mapped() && isText(ts):
		return from.ToJSON, nil
	case from.Mapped() && to.Mapped():
		return func(dst, p []byte) ([]byte, error) {
			j, err := from.ToJSON(nil, p)
			if err != nil {
				return nil, err
			}
			return to.FromJSON(dst, j)
		}, nil
	}
	why := ""
	for _, c := range []Codec{from, to} {
		if !c.Mapped() {
			why = fmt.Sprintf(" (%s payloads map to JSON only with a schema: %s)", c.Schema(), schemaHint(c.Schema()))
		}
	}
	return nil, fmt.Errorf("no conversion from schema %q to %q%s", fs, ts, why)
}

func schemaHint(s connector.Schema) string {
	switch s {
	case connector.SchemaAvro:
		return "set avro_schema_json or avro_schema_path"
	case connector.SchemaFlatBuffer:
		return "set a .bfbs schema path"
	}
	return "none exists for raw bytes"
}
