package codec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ferryhq/ferry/connector"
	"github.com/hamba/avro/v2"
)

// avroCodec reads and writes Avro datums with one schema. The JSON mapping
// is upstream's: records and maps are objects, unions are their branch's
// value (no type wrapper), enums are symbol strings, bytes and fixed are
// arrays of byte values, and logical types are their underlying value.
type avroCodec struct {
	root    *avroNode // nil without a schema
	framing string
	id      uint32
	finger  []byte // CRC-64-AVRO, little-endian, for the single-object framing
	strict  bool
}

// Avro framings.
const (
	FramingBinary       = "binary"
	FramingSingleObject = "single_object"
	FramingConfluent    = "confluent"
)

func newAvro(o Options) (Codec, error) {
	c := &avroCodec{framing: o.AvroFraming, id: o.AvroSchemaID, strict: o.StrictJSON}
	switch c.framing {
	case "", FramingBinary:
		c.framing = FramingBinary
	case FramingSingleObject, FramingConfluent:
	default:
		return nil, fmt.Errorf("avro_framing: %q is not a framing (use binary, single_object or confluent)", o.AvroFraming)
	}
	text, option := o.AvroSchemaJSON, "avro_schema_json"
	if text == "" && o.AvroSchemaPath != "" {
		b, err := o.readFile("avro_schema_path", o.AvroSchemaPath)
		if err != nil {
			return nil, err
		}
		text, option = string(b), "avro_schema_path "+o.path(o.AvroSchemaPath)
	}
	if text == "" {
		if c.framing == FramingSingleObject {
			return nil, errors.New("avro_framing: single_object needs a schema (avro_schema_json or avro_schema_path)")
		}
		return c, nil
	}
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("%s: invalid Avro schema: %w", option, err)
	}
	if c.finger, err = s.FingerprintUsing(avro.CRC64AvroLE); err != nil {
		return nil, fmt.Errorf("%s: fingerprint: %w", option, err)
	}
	if c.root, err = compileAvro(s, map[avro.Schema]*avroNode{}); err != nil {
		return nil, fmt.Errorf("%s: %w", option, err)
	}
	return c, nil
}

func (c *avroCodec) Schema() connector.Schema { return connector.SchemaAvro }
func (c *avroCodec) Mapped() bool             { return c.root != nil }

// datum strips the framing.
func (c *avroCodec) datum(p []byte) ([]byte, error) {
	if len(p) == 0 {
		return nil, errors.New("empty Avro payload")
	}
	switch c.framing {
	case FramingSingleObject:
		if len(p) < 10 || p[0] != 0xC3 || p[1] != 0x01 {
			return nil, errors.New("not an Avro single-object payload (no C3 01 marker)")
		}
		if !bytes.Equal(p[2:10], c.finger) {
			return nil, fmt.Errorf("Avro single-object payload has schema fingerprint %x, want %x", p[2:10], c.finger)
		}
		return p[10:], nil
	case FramingConfluent:
		if len(p) < 5 || p[0] != 0 {
			return nil, errors.New("not a Confluent-framed Avro payload (no 0x00 magic byte)")
		}
		if id := binary.BigEndian.Uint32(p[1:5]); c.id != 0 && id != c.id {
			return nil, fmt.Errorf("Confluent-framed Avro payload has schema id %d, want %d", id, c.id)
		}
		return p[5:], nil
	}
	return p, nil
}

func (c *avroCodec) frame(dst []byte) []byte {
	switch c.framing {
	case FramingSingleObject:
		dst = append(dst, 0xC3, 0x01)
		return append(dst, c.finger...)
	case FramingConfluent:
		return binary.BigEndian.AppendUint32(append(dst, 0), c.id)
	}
	return dst
}

func (c *avroCodec) Validate(p []byte) error {
	if c.root == nil {
		_, err := c.datum(p)
		return err
	}
	return validateByDecoding(c.ToJSON, p)
}

func (c *avroCodec) ToJSON(dst, p []byte) ([]byte, error) {
	if c.root == nil {
		return nil, fmt.Errorf("%w: set avro_schema_json or avro_schema_path", ErrNotMapped)
	}
	d, err := c.datum(p)
	if err != nil {
		return nil, err
	}
	if dst == nil {
		dst = make([]byte, 0, 2*len(d)+16)
	}
	r := avroReader{b: d}
	if dst, err = r.toJSON(dst, c.root, 0); err != nil {
		return nil, err
	}
	return dst, r.end()
}

func (c *avroCodec) FromJSON(dst, doc []byte) ([]byte, error) {
	if c.root == nil {
		return nil, fmt.Errorf("%w: set avro_schema_json or avro_schema_path", ErrNotMapped)
	}
	v, err := parseDoc(doc)
	if err != nil {
		return nil, err
	}
	w := avroWriter{strict: c.strict}
	if dst == nil {
		dst = make([]byte, 0, len(doc))
	}
	out, err := w.encode(c.frame(dst), c.root, &v, 0)
	if err != nil {
		return nil, atPath("", err)
	}
	return out, nil
}

// avroKind is an Avro type.
type avroKind uint8

const (
	avNull avroKind = iota
	avBoolean
	avInt
	avLong
	avFloat
	avDouble
	avBytes
	avString
	avRecord
	avEnum
	avArray
	avMap
	avUnion
	avFixed
)

// avroNode is a compiled schema node; named types are shared, so
// recursive schemas are cycles.
type avroNode struct {
	kind     avroKind
	name     string // type name, for errors
	fields   []avroField
	symbols  []string
	elem     *avroNode // array items, map values
	branches []*avroNode
	size     int
}

type avroField struct {
	name   string
	key    []byte // `"name":` as JSON
	node   *avroNode
	def    []byte // the default, encoded; nil when the field has none
	hasDef bool
}

func compileAvro(s avro.Schema, seen map[avro.Schema]*avroNode) (*avroNode, error) {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if n, ok := seen[s]; ok {
		return n, nil
	}
	n := &avroNode{name: string(s.Type())}
	seen[s] = n
	switch s := s.(type) {
	case *avro.RecordSchema:
		n.kind, n.name = avRecord, s.FullName()
		for _, f := range s.Fields() {
			fn, err := compileAvro(f.Type(), seen)
			if err != nil {
				return nil, err
			}
			key, _ := json.Marshal(f.Name())
			af := avroField{name: f.Name(), key: append(key, ':'), node: fn}
			if f.HasDefault() {
				if def, err := avro.Marshal(f.Type(), f.Default()); err == nil {
					af.def, af.hasDef = def, true
				}
			}
			n.fields = append(n.fields, af)
		}
	case *avro.EnumSchema:
		n.kind, n.name, n.symbols = avEnum, s.FullName(), s.Symbols()
	case *avro.FixedSchema:
		n.kind, n.name, n.size = avFixed, s.FullName(), s.Size()
	case *avro.ArraySchema:
		n.kind = avArray
		var err error
		if n.elem, err = compileAvro(s.Items(), seen); err != nil {
			return nil, err
		}
	case *avro.MapSchema:
		n.kind = avMap
		var err error
		if n.elem, err = compileAvro(s.Values(), seen); err != nil {
			return nil, err
		}
	case *avro.UnionSchema:
		n.kind = avUnion
		var names []string
		for _, t := range s.Types() {
			b, err := compileAvro(t, seen)
			if err != nil {
				return nil, err
			}
			n.branches = append(n.branches, b)
			names = append(names, b.name)
		}
		n.name = "[" + strings.Join(names, ",") + "]"
	case *avro.NullSchema:
		n.kind = avNull
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Boolean:
			n.kind = avBoolean
		case avro.Int:
			n.kind = avInt
		case avro.Long:
			n.kind = avLong
		case avro.Float:
			n.kind = avFloat
		case avro.Double:
			n.kind = avDouble
		case avro.Bytes:
			n.kind = avBytes
		case avro.String:
			n.kind = avString
		case avro.Null:
			n.kind = avNull
		default:
			return nil, fmt.Errorf("unsupported Avro type %q", s.Type())
		}
	default:
		return nil, fmt.Errorf("unsupported Avro schema %T", s)
	}
	return n, nil
}
