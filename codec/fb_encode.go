package codec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/internal/jsonx"
	flatbuffers "github.com/google/flatbuffers/go"
)

// FromJSON builds a FlatBuffer from a JSON object with flatbuffers.Builder.
func (c *fbCodec) FromJSON(dst, doc []byte) (out []byte, err error) {
	if c.s == nil {
		return nil, fmt.Errorf("%w: set a .bfbs schema", ErrNotMapped)
	}
	v, err := parseDoc(doc)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil { // a Builder misuse is a bug; keep the pipeline up
			out, err = nil, fmt.Errorf("FlatBuffer builder failed: %v", r)
		}
	}()
	e := fbEncoder{b: flatbuffers.NewBuilder(len(doc) + len(doc)/2), strict: c.strict}
	root, err := e.table(c.s.root, &v, 0)
	if err != nil {
		return nil, atPath("", err)
	}
	if len(c.s.ident) == 4 {
		e.b.FinishWithFileIdentifier(root, []byte(c.s.ident))
	} else {
		e.b.Finish(root)
	}
	return append(dst, e.b.FinishedBytes()...), nil
}

type fbEncoder struct {
	b      *flatbuffers.Builder
	strict bool
}

// fieldPlan is one table field's encoded value.
type fieldPlan struct {
	f   *fbField
	v   *jsonx.Value
	off flatbuffers.UOffsetT // strings, vectors, tables, unions
	u   uint64               // scalars, as bits
}

func (e *fbEncoder) table(o *fbObject, v *jsonx.Value, depth int) (flatbuffers.UOffsetT, error) {
	if v.Kind != jsonx.Object {
		return 0, fmt.Errorf("want a JSON object for table %s, got %s", o.name, v.Kind)
	}
	if depth > maxNesting {
		return 0, errors.New("JSON value nested too deeply")
	}
	if e.strict {
		for _, m := range v.Fields {
			if f, ok := o.byName[m.Name]; !ok || f.deprecated {
				return 0, fmt.Errorf("table %s has no field %q", o.name, m.Name)
			}
		}
	}
	plans := make([]fieldPlan, 0, len(o.fields))
	for _, f := range o.order {
		fv, ok := v.Get(f.name)
		isFloat := f.typ.base == fbFloat || f.typ.base == fbDouble
		if !ok || f.deprecated || fv.Kind == jsonx.Null && !isFloat {
			continue
		}
		p := fieldPlan{f: f, v: fv}
		var err error
		switch base := f.typ.base; {
		case base == fbUType:
			if p.u, err = e.enumValue(f.enum, fv); err != nil {
				return 0, atPath("."+f.name, err)
			}
		case fbIsScalar(base):
			if p.u, err = e.scalarBits(f, base, fv); err != nil {
				return 0, atPath("."+f.name, err)
			}
		case base == fbString:
			if fv.Kind != jsonx.String {
				return 0, atPath("."+f.name, fmt.Errorf("want a string, got %s", fv.Kind))
			}
			p.off = e.b.CreateString(fv.Str)
		case base == fbObj && f.obj.isStruct:
			if fv.Kind != jsonx.Object {
				return 0, atPath("."+f.name, fmt.Errorf("want an object for struct %s, got %s", f.obj.name, fv.Kind))
			}
		case base == fbObj:
			if p.off, err = e.table(f.obj, fv, depth+1); err != nil {
				return 0, atPath("."+f.name, err)
			}
		case base == fbUnion:
			tv, ok := v.Get(f.name + "_type")
			if !ok {
				return 0, atPath("."+f.name, fmt.Errorf("union value without %s_type", f.name))
			}
			n, err := e.enumValue(f.enum, tv)
			if err != nil {
				return 0, atPath("."+f.name+"_type", err)
			}
			ev := f.enum.byValue(int64(n))
			if ev == nil || ev.obj == nil {
				return 0, atPath("."+f.name+"_type", fmt.Errorf("%d is not a member of union %s", n, f.enum.name))
			}
			if p.off, err = e.table(ev.obj, fv, depth+1); err != nil {
				return 0, atPath("."+f.name, err)
			}
		case base == fbVector:
			if p.off, err = e.vector(f, fv, depth); err != nil {
				return 0, atPath("."+f.name, err)
			}
		default:
			return 0, atPath("."+f.name, fmt.Errorf("unsupported FlatBuffers type %d", base))
		}
		plans = append(plans, p)
	}
	e.b.StartObject(o.slots)
	for i := range plans {
		p := &plans[i]
		f := p.f
		slot := f.id
		switch base := f.typ.base; {
		case fbIsScalar(base):
			e.scalarSlot(f, base, slot, p.u)
		case base == fbObj && f.obj.isStruct:
			if err := e.structValue(f.obj, p.v, depth+1); err != nil {
				return 0, atPath("."+f.name, err)
			}
			e.b.Slot(slot)
		default:
			e.b.PrependUOffsetTSlot(slot, p.off, 0)
		}
	}
	return e.b.EndObject(), nil
}

// scalarSlot adds a scalar to the table being built. Values equal to
// the default are left out (as flatc does) unless the field is optional.
func (e *fbEncoder) scalarSlot(f *fbField, base uint8, slot int, u uint64) {
	def := uint64(f.defInt)
	switch base {
	case fbFloat:
		def = uint64(math.Float32bits(float32(f.defReal)))
	case fbDouble:
		def = math.Float64bits(f.defReal)
	}
	if u == def && !f.optional {
		return
	}
	e.placeScalar(base, u, true)
	e.b.Slot(slot)
}

// placeScalar prepends a scalar with alignment.
func (e *fbEncoder) placeScalar(base uint8, u uint64, prep bool) {
	size := fbScalarSize[base]
	if prep {
		e.b.Prep(size, 0)
	}
	switch size {
	case 1:
		e.b.PlaceByte(byte(u))
	case 2:
		e.b.PlaceUint16(uint16(u))
	case 4:
		e.b.PlaceUint32(uint32(u))
	default:
		e.b.PlaceUint64(u)
	}
}

// scalarBits reads a JSON scalar as the little-endian bits of its type.
func (e *fbEncoder) scalarBits(f *fbField, base uint8, v *jsonx.Value) (uint64, error) {
	switch base {
	case fbBool:
		switch {
		case v.Kind == jsonx.Bool && v.Bool, v.Kind == jsonx.Number && v.Str == "1":
			return 1, nil
		case v.Kind == jsonx.Bool, v.Kind == jsonx.Number && v.Str == "0":
			return 0, nil
		}
		return 0, fmt.Errorf("want true or false, got %s", v.Kind)
	case fbFloat, fbDouble:
		x, err := jsonFloat(v)
		if err != nil {
			return 0, err
		}
		if base == fbFloat {
			return uint64(math.Float32bits(float32(x))), nil
		}
		return math.Float64bits(x), nil
	}
	if f.enum != nil && v.Kind == jsonx.String {
		return e.enumValue(f.enum, v)
	}
	if v.Kind != jsonx.Number || !jsonx.IsInteger(v.Str) {
		return 0, fmt.Errorf("want an integer, got %s", v.Kind)
	}
	bits := fbScalarSize[base] * 8
	switch base {
	case fbUByte, fbUShort, fbUInt, fbULong, fbUType:
		u, err := strconv.ParseUint(v.Str, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("%s is out of range for a %d-bit unsigned integer", v.Str, bits)
		}
		return u, nil
	}
	i, err := strconv.ParseInt(v.Str, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%s is out of range for a %d-bit integer", v.Str, bits)
	}
	return uint64(i), nil
}

// enumValue reads an enum value given by name (space-separated names
// are OR-ed, for bit flags) or by number.
func (e *fbEncoder) enumValue(en *fbEnum, v *jsonx.Value) (uint64, error) {
	switch v.Kind {
	case jsonx.Number:
		i, err := strconv.ParseInt(v.Str, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s is not a value of %s", v.Str, en.name)
		}
		return uint64(i), nil
	case jsonx.String:
		var u uint64
		for _, name := range strings.Fields(v.Str) {
			ev := en.byName(name)
			if ev == nil {
				return 0, fmt.Errorf("%q is not a value of %s", name, en.name)
			}
			u |= uint64(ev.value)
		}
		return u, nil
	}
	return 0, fmt.Errorf("want a name of %s, got %s", en.name, v.Kind)
}

// structValue writes a struct inline: its bytes, laid out as the schema
// says, prepended in one aligned block.
func (e *fbEncoder) structValue(o *fbObject, v *jsonx.Value, depth int) error {
	buf := make([]byte, o.size)
	if err := e.fillStruct(buf, o, v, depth); err != nil {
		return err
	}
	e.b.Prep(o.minAlign, o.size)
	for i := len(buf) - 1; i >= 0; i-- {
		e.b.PlaceByte(buf[i])
	}
	return nil
}

func (e *fbEncoder) fillStruct(buf []byte, o *fbObject, v *jsonx.Value, depth int) error {
	if v.Kind != jsonx.Object {
		return fmt.Errorf("want an object for struct %s, got %s", o.name, v.Kind)
	}
	if depth > maxNesting {
		return errors.New("JSON value nested too deeply")
	}
	for _, f := range o.fields {
		fv, ok := v.Get(f.name)
		if !ok {
			return fmt.Errorf("struct %s needs field %q", o.name, f.name)
		}
		at := buf[f.offset:]
		switch base := f.typ.base; {
		case fbIsScalar(base):
			u, err := e.scalarBits(f, base, fv)
			if err != nil {
				return atPath("."+f.name, err)
			}
			putLE(at, fbScalarSize[base], u)
		case base == fbObj:
			if err := e.fillStruct(at[:f.obj.size], f.obj, fv, depth+1); err != nil {
				return atPath("."+f.name, err)
			}
		case base == fbArray:
			if fv.Kind != jsonx.Array || len(fv.Items) != f.typ.fixedLength {
				return atPath("."+f.name, fmt.Errorf("want an array of %d", f.typ.fixedLength))
			}
			size := fbElemSize(f)
			for i := range fv.Items {
				elem := at[i*size : (i+1)*size]
				if f.typ.elem == fbObj {
					if err := e.fillStruct(elem, f.obj, &fv.Items[i], depth+1); err != nil {
						return atPath("."+f.name+"["+strconv.Itoa(i)+"]", err)
					}
					continue
				}
				u, err := e.scalarBits(f, f.typ.elem, &fv.Items[i])
				if err != nil {
					return atPath("."+f.name+"["+strconv.Itoa(i)+"]", err)
				}
				putLE(elem, size, u)
			}
		default:
			return atPath("."+f.name, fmt.Errorf("unsupported struct member type %d", base))
		}
	}
	return nil
}

func putLE(b []byte, size int, u uint64) {
	for i := 0; i < size; i++ {
		b[i] = byte(u >> (8 * i))
	}
}

// vector builds a vector; its elements' own objects are built first.
func (e *fbEncoder) vector(f *fbField, v *jsonx.Value, depth int) (flatbuffers.UOffsetT, error) {
	elem := f.typ.elem
	if elem == fbUByte && v.Kind == jsonx.String {
		return e.b.CreateByteVector([]byte(v.Str)), nil
	}
	if v.Kind != jsonx.Array {
		return 0, fmt.Errorf("want an array, got %s", v.Kind)
	}
	n := len(v.Items)
	switch {
	case elem == fbString || elem == fbObj && !f.obj.isStruct:
		offs := make([]flatbuffers.UOffsetT, n)
		for i := range v.Items {
			it := &v.Items[i]
			if elem == fbString {
				if it.Kind != jsonx.String {
					return 0, atPath("["+strconv.Itoa(i)+"]", fmt.Errorf("want a string, got %s", it.Kind))
				}
				offs[i] = e.b.CreateString(it.Str)
				continue
			}
			var err error
			if offs[i], err = e.table(f.obj, it, depth+1); err != nil {
				return 0, atPath("["+strconv.Itoa(i)+"]", err)
			}
		}
		e.b.StartVector(4, n, 4)
		for i := n - 1; i >= 0; i-- {
			e.b.PrependUOffsetT(offs[i])
		}
		return e.b.EndVector(n), nil
	case elem == fbObj:
		bufs := make([][]byte, n)
		for i := range v.Items {
			bufs[i] = make([]byte, f.obj.size)
			if err := e.fillStruct(bufs[i], f.obj, &v.Items[i], depth+1); err != nil {
				return 0, atPath("["+strconv.Itoa(i)+"]", err)
			}
		}
		e.b.StartVector(f.obj.size, n, f.obj.minAlign)
		for i := n - 1; i >= 0; i-- {
			for j := len(bufs[i]) - 1; j >= 0; j-- {
				e.b.PlaceByte(bufs[i][j])
			}
		}
		return e.b.EndVector(n), nil
	case fbIsScalar(elem):
		bits := make([]uint64, n)
		for i := range v.Items {
			var err error
			if bits[i], err = e.scalarBits(f, elem, &v.Items[i]); err != nil {
				return 0, atPath("["+strconv.Itoa(i)+"]", err)
			}
		}
		size := fbScalarSize[elem]
		e.b.StartVector(size, n, size)
		for i := n - 1; i >= 0; i-- {
			e.placeScalar(elem, bits[i], false)
		}
		return e.b.EndVector(n), nil
	}
	return 0, fmt.Errorf("unsupported vector element type %d", elem)
}
