package codec

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/jsonx"
)

// fbCodec reads and writes FlatBuffers with a binary schema (.bfbs), as
// upstream's newest FlatBuffers support does. The JSON mapping is flatc's:
// tables and structs are objects keyed by field name, enums are value
// names (numbers when no name matches), unions are a "<field>_type" name
// beside the "<field>" table, [ubyte] and other vectors are arrays.
// Scalar fields that the buffer omits are written with their default
// (flatc's --defaults-json), so that zero values survive a round trip.
//
// Without a schema a flatbuffer payload is opaque (Validate checks the
// root offset only) and has no JSON mapping.
type fbCodec struct {
	s      *fbSchema
	strict bool
}

func newFlatBuffer(o Options) (Codec, error) {
	c := &fbCodec{strict: o.StrictJSON}
	if o.FlatBufferSchemaPath == "" {
		if o.FlatBufferRootTable != "" {
			return nil, errors.New("flatbuffer root table is set without a schema path")
		}
		return c, nil
	}
	data, err := o.readFile("flatbuffer_schema_path", o.FlatBufferSchemaPath)
	if err != nil {
		return nil, err
	}
	if c.s, err = parseBFBS(data, o.FlatBufferRootTable); err != nil {
		return nil, fmt.Errorf("flatbuffer_schema_path %s: %w", o.path(o.FlatBufferSchemaPath), err)
	}
	return c, nil
}

func (c *fbCodec) Schema() connector.Schema { return connector.SchemaFlatBuffer }
func (c *fbCodec) Mapped() bool             { return c.s != nil }

func (c *fbCodec) root(p []byte) (fbTable, error) {
	b := fbBuf(p)
	if len(b) < 8 {
		return fbTable{}, fmt.Errorf("FlatBuffer of %d bytes is too small", len(b))
	}
	rp, err := b.deref(0)
	if err != nil {
		return fbTable{}, fmt.Errorf("FlatBuffer root: %w", err)
	}
	return b.table(rp)
}

func (c *fbCodec) Validate(p []byte) error {
	if c.s == nil {
		_, err := c.root(p)
		return err
	}
	return validateByDecoding(c.ToJSON, p)
}

func (c *fbCodec) ToJSON(dst, p []byte) ([]byte, error) {
	if c.s == nil {
		return nil, fmt.Errorf("%w: set a .bfbs schema", ErrNotMapped)
	}
	t, err := c.root(p)
	if err != nil {
		return nil, err
	}
	if dst == nil {
		dst = make([]byte, 0, 2*len(p))
	}
	return fbTableJSON(dst, c.s.root, t, 0)
}

func fbTableJSON(dst []byte, o *fbObject, t fbTable, depth int) ([]byte, error) {
	if depth > maxNesting {
		return nil, errors.New("FlatBuffer nested too deeply")
	}
	dst = append(dst, '{')
	first := true
	for _, f := range o.fields {
		if f.deprecated {
			continue
		}
		off, err := t.field(f.id)
		if err != nil {
			return nil, err
		}
		base := f.typ.base
		if off == 0 && (!fbIsScalar(base) || f.optional || base == fbUType) {
			continue
		}
		if base == fbUType { // NONE is not written, as flatc does
			if v, err := t.b.u8(off); err != nil || v == 0 {
				if err != nil {
					return nil, err
				}
				continue
			}
		}
		if base == fbUnion {
			ut, err := unionType(o, f, t)
			if err != nil || ut == nil {
				if err == nil {
					continue // NONE
				}
				return nil, err
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(jsonx.AppendString(dst, f.name), ':')
			p, err := t.b.deref(off)
			if err != nil {
				return nil, err
			}
			st, err := t.b.table(p)
			if err != nil {
				return nil, err
			}
			if dst, err = fbTableJSON(dst, ut, st, depth+1); err != nil {
				return nil, err
			}
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(jsonx.AppendString(dst, f.name), ':')
		if off == 0 { // absent scalar: its default
			if base == fbFloat || base == fbDouble {
				dst = appendFloat(dst, f.defReal, 64)
			} else {
				dst = fbAppendInt(dst, f, base, uint64(f.defInt))
			}
			continue
		}
		if dst, err = fbValueJSON(dst, f, base, t.b, off, depth); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", o.name, f.name, err)
		}
	}
	return append(dst, '}'), nil
}

// unionType returns the member table of a union field from its _type
// sibling (the field with the id before it), or nil for NONE.
func unionType(o *fbObject, f *fbField, t fbTable) (*fbObject, error) {
	var tf *fbField
	for _, g := range o.fields {
		if g.id == f.id-1 && g.typ.base == fbUType {
			tf = g
		}
	}
	if tf == nil {
		return nil, fmt.Errorf("union %s has no _type field", f.name)
	}
	off, err := t.field(tf.id)
	if err != nil || off == 0 {
		return nil, err
	}
	v, err := t.b.u8(off)
	if err != nil || v == 0 {
		return nil, err
	}
	ev := f.enum.byValue(int64(v))
	if ev == nil || ev.obj == nil {
		return nil, fmt.Errorf("union %s has no member %d", f.name, v)
	}
	return ev.obj, nil
}

// fbValueJSON writes the value of type base (a scalar, string, vector,
// struct or table) stored at off.
func fbValueJSON(dst []byte, f *fbField, base uint8, b fbBuf, off, depth int) ([]byte, error) {
	switch {
	case fbIsScalar(base):
		return fbScalarJSON(dst, f, base, b, off)
	case base == fbString:
		p, err := b.deref(off)
		if err != nil {
			return nil, err
		}
		s, err := b.bytesAt(p)
		if err != nil {
			return nil, err
		}
		return jsonx.AppendString(dst, string(s)), nil
	case base == fbObj && f.obj.isStruct:
		return fbStructJSON(dst, f.obj, b, off, depth)
	case base == fbObj:
		p, err := b.deref(off)
		if err != nil {
			return nil, err
		}
		t, err := b.table(p)
		if err != nil {
			return nil, err
		}
		return fbTableJSON(dst, f.obj, t, depth+1)
	case base == fbVector:
		p, err := b.deref(off)
		if err != nil {
			return nil, err
		}
		n, err := b.u32(p)
		if err != nil {
			return nil, err
		}
		return fbElemsJSON(dst, f, b, p+4, int(n), depth)
	case base == fbArray:
		return fbElemsJSON(dst, f, b, off, f.typ.fixedLength, depth)
	}
	return nil, fmt.Errorf("unsupported FlatBuffers type %d", base)
}

func fbElemSize(f *fbField) int {
	e := f.typ.elem
	switch {
	case fbIsScalar(e):
		return fbScalarSize[e]
	case e == fbObj && f.obj.isStruct:
		return f.obj.size
	}
	return 4
}

func fbElemsJSON(dst []byte, f *fbField, b fbBuf, p, n, depth int) ([]byte, error) {
	size := fbElemSize(f)
	if size <= 0 || b.check(p, n*size) != nil || n < 0 {
		return nil, errFBBounds
	}
	dst = append(dst, '[')
	var err error
	for i := 0; i < n; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = fbValueJSON(dst, f, f.typ.elem, b, p+i*size, depth+1); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

func fbStructJSON(dst []byte, o *fbObject, b fbBuf, off, depth int) ([]byte, error) {
	if depth > maxNesting || b.check(off, o.size) != nil {
		return nil, errFBBounds
	}
	dst = append(dst, '{')
	var err error
	for i, f := range o.fields {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(jsonx.AppendString(dst, f.name), ':')
		if dst, err = fbValueJSON(dst, f, f.typ.base, b, off+f.offset, depth+1); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

func fbScalarJSON(dst []byte, f *fbField, base uint8, b fbBuf, off int) ([]byte, error) {
	var raw uint64
	var err error
	switch fbScalarSize[base] {
	case 1:
		var v uint8
		v, err = b.u8(off)
		raw = uint64(v)
	case 2:
		var v uint16
		v, err = b.u16(off)
		raw = uint64(v)
	case 4:
		var v uint32
		v, err = b.u32(off)
		raw = uint64(v)
	default:
		raw, err = b.u64(off)
	}
	if err != nil {
		return nil, err
	}
	switch base {
	case fbFloat:
		return appendFloat(dst, float64(math.Float32frombits(uint32(raw))), 32), nil
	case fbDouble:
		return appendFloat(dst, math.Float64frombits(raw), 64), nil
	}
	return fbAppendInt(dst, f, base, raw), nil
}

// fbAppendInt writes an integer (sign-extended from its width), a bool,
// or an enum value's name.
func fbAppendInt(dst []byte, f *fbField, base uint8, raw uint64) []byte {
	var v int64
	switch base {
	case fbBool:
		return strconv.AppendBool(dst, raw != 0)
	case fbByte:
		v = int64(int8(raw))
	case fbShort:
		v = int64(int16(raw))
	case fbInt:
		v = int64(int32(raw))
	case fbLong:
		v = int64(raw)
	case fbULong:
		if f.enum == nil {
			return strconv.AppendUint(dst, raw, 10)
		}
		v = int64(raw)
	case fbUByte, fbUType:
		v = int64(uint8(raw))
	case fbUShort:
		v = int64(uint16(raw))
	case fbUInt:
		v = int64(uint32(raw))
	}
	if f.enum != nil {
		if ev := f.enum.byValue(v); ev != nil {
			return jsonx.AppendString(dst, ev.name)
		}
	}
	return strconv.AppendInt(dst, v, 10)
}
