package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
)

// FlatBuffers base types, as numbered by reflection.fbs.
const (
	fbNone uint8 = iota
	fbUType
	fbBool
	fbByte
	fbUByte
	fbShort
	fbUShort
	fbInt
	fbUInt
	fbLong
	fbULong
	fbFloat
	fbDouble
	fbString
	fbVector
	fbObj
	fbUnion
	fbArray
	fbVector64
)

// fbScalarSize is the byte size of scalar base types (0 for others).
var fbScalarSize = [...]int{fbUType: 1, fbBool: 1, fbByte: 1, fbUByte: 1, fbShort: 2, fbUShort: 2,
	fbInt: 4, fbUInt: 4, fbLong: 8, fbULong: 8, fbFloat: 4, fbDouble: 8, fbVector64: 0}

func fbIsScalar(t uint8) bool { return t >= fbUType && t <= fbDouble }

// errFBBounds is a FlatBuffer offset that points outside the buffer.
var errFBBounds = errors.New("FlatBuffer offset out of bounds")

// fbBuf reads a FlatBuffer with bounds checks on every access, so that a
// hostile buffer yields an error, never a panic.
type fbBuf []byte

func (b fbBuf) check(off, n int) error {
	if off < 0 || n < 0 || off > len(b)-n {
		return errFBBounds
	}
	return nil
}

func (b fbBuf) u8(off int) (uint8, error) {
	if err := b.check(off, 1); err != nil {
		return 0, err
	}
	return b[off], nil
}

func (b fbBuf) u16(off int) (uint16, error) {
	if err := b.check(off, 2); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint16(b[off:]), nil
}

func (b fbBuf) u32(off int) (uint32, error) {
	if err := b.check(off, 4); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[off:]), nil
}

func (b fbBuf) u64(off int) (uint64, error) {
	if err := b.check(off, 8); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[off:]), nil
}

// deref follows the uoffset stored at off.
func (b fbBuf) deref(off int) (int, error) {
	u, err := b.u32(off)
	if err != nil {
		return 0, err
	}
	t := int64(off) + int64(u)
	if t >= int64(len(b)) {
		return 0, errFBBounds
	}
	return int(t), nil
}

// bytesAt reads a length-prefixed string or byte vector at off.
func (b fbBuf) bytesAt(off int) ([]byte, error) {
	n, err := b.u32(off)
	if err != nil {
		return nil, err
	}
	if int64(n) > int64(len(b)-off-4) {
		return nil, errFBBounds
	}
	return b[off+4 : off+4+int(n)], nil
}

// fbTable is a table position and its vtable.
type fbTable struct {
	b     fbBuf
	pos   int
	vt    int
	vtLen int
	size  int
}

func (b fbBuf) table(pos int) (fbTable, error) {
	so, err := b.u32(pos)
	if err != nil {
		return fbTable{}, err
	}
	vt := int64(pos) - int64(int32(so))
	if vt < 0 || vt > int64(len(b)-4) {
		return fbTable{}, errFBBounds
	}
	t := fbTable{b: b, pos: pos, vt: int(vt)}
	vl, _ := b.u16(t.vt)
	sz, _ := b.u16(t.vt + 2)
	t.vtLen, t.size = int(vl), int(sz)
	if t.vtLen < 4 || t.vtLen%2 != 0 || b.check(t.vt, t.vtLen) != nil || b.check(pos, t.size) != nil {
		return fbTable{}, errors.New("FlatBuffer table has a bad vtable")
	}
	return t, nil
}

// field returns the position of field id in the table, or 0 when absent.
func (t fbTable) field(id int) (int, error) {
	slot := 4 + 2*id
	if slot+2 > t.vtLen {
		return 0, nil
	}
	vo, _ := t.b.u16(t.vt + slot)
	if vo == 0 {
		return 0, nil
	}
	if int(vo) >= t.size {
		return 0, errFBBounds
	}
	return t.pos + int(vo), nil
}

// Reflection-schema readers: each returns the zero value when absent.

func (t fbTable) str(id int) (string, error) {
	off, err := t.field(id)
	if err != nil || off == 0 {
		return "", err
	}
	p, err := t.b.deref(off)
	if err != nil {
		return "", err
	}
	s, err := t.b.bytesAt(p)
	return string(s), err
}

func (t fbTable) scalar(id int, size int, def uint64) (uint64, error) {
	off, err := t.field(id)
	if err != nil || off == 0 {
		return def, err
	}
	switch size {
	case 1:
		v, err := t.b.u8(off)
		return uint64(v), err
	case 2:
		v, err := t.b.u16(off)
		return uint64(v), err
	case 4:
		v, err := t.b.u32(off)
		return uint64(v), err
	}
	return t.b.u64(off)
}

func (t fbTable) sub(id int) (fbTable, bool, error) {
	off, err := t.field(id)
	if err != nil || off == 0 {
		return fbTable{}, false, err
	}
	p, err := t.b.deref(off)
	if err != nil {
		return fbTable{}, false, err
	}
	st, err := t.b.table(p)
	return st, err == nil, err
}

// vector returns the element count and the position of the first element.
func (t fbTable) vector(id int) (int, int, error) {
	off, err := t.field(id)
	if err != nil || off == 0 {
		return 0, 0, err
	}
	p, err := t.b.deref(off)
	if err != nil {
		return 0, 0, err
	}
	n, err := t.b.u32(p)
	if err != nil {
		return 0, 0, err
	}
	if int64(n)*4 > int64(len(t.b)-p-4) {
		return 0, 0, errFBBounds
	}
	return int(n), p + 4, nil
}

func (t fbTable) tables(id int) ([]fbTable, error) {
	n, p, err := t.vector(id)
	if err != nil {
		return nil, err
	}
	out := make([]fbTable, n)
	for i := range out {
		tp, err := t.b.deref(p + 4*i)
		if err != nil {
			return nil, err
		}
		if out[i], err = t.b.table(tp); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fbType is a reflection Type.
type fbType struct {
	base, elem  uint8
	index       int
	fixedLength int
}

type fbField struct {
	name       string
	typ        fbType
	id         int
	offset     int // in a struct
	defInt     int64
	defReal    float64
	deprecated bool
	optional   bool
	obj        *fbObject // for Obj types and Obj vectors
	enum       *fbEnum   // for enum-typed integers, UType and Union
}

type fbObject struct {
	name     string
	fields   []*fbField // by id
	byName   map[string]*fbField
	isStruct bool
	minAlign int
	size     int
	slots    int        // max id + 1
	order    []*fbField // the order fields are added to a table: widest first
}

type fbEnumVal struct {
	name  string
	value int64
	obj   *fbObject // union member table
}

type fbEnum struct {
	name    string
	values  []fbEnumVal
	isUnion bool
	base    uint8
}

func (e *fbEnum) byValue(v int64) *fbEnumVal {
	for i := range e.values {
		if e.values[i].value == v {
			return &e.values[i]
		}
	}
	return nil
}

func (e *fbEnum) byName(n string) *fbEnumVal {
	for i := range e.values {
		if e.values[i].name == n {
			return &e.values[i]
		}
	}
	return nil
}

type fbSchema struct {
	objects []*fbObject
	enums   []*fbEnum
	root    *fbObject
	ident   string
}

// parseBFBS reads a binary schema made by `flatc --binary --schema`.
func parseBFBS(data []byte, rootName string) (*fbSchema, error) {
	b := fbBuf(data)
	if len(b) < 8 || string(b[4:8]) != "BFBS" {
		return nil, errors.New("not a binary FlatBuffers schema (.bfbs, made by `flatc --binary --schema`): no BFBS identifier")
	}
	rp, err := b.deref(0)
	if err != nil {
		return nil, err
	}
	st, err := b.table(rp)
	if err != nil {
		return nil, err
	}
	objs, err := st.tables(0)
	if err != nil {
		return nil, err
	}
	enums, err := st.tables(1)
	if err != nil {
		return nil, err
	}
	s := &fbSchema{}
	if s.ident, err = st.str(2); err != nil {
		return nil, err
	}
	if len(objs) > 1<<16 || len(enums) > 1<<16 {
		return nil, errors.New("FlatBuffers schema is too large")
	}
	for _, ot := range objs {
		o := &fbObject{byName: map[string]*fbField{}}
		if o.name, err = ot.str(0); err != nil {
			return nil, err
		}
		isStruct, _ := ot.scalar(2, 1, 0)
		minAlign, _ := ot.scalar(3, 4, 0)
		size, _ := ot.scalar(4, 4, 0)
		o.isStruct, o.minAlign, o.size = isStruct != 0, int(int32(minAlign)), int(int32(size))
		s.objects = append(s.objects, o)
	}
	for _, et := range enums {
		e := &fbEnum{}
		if e.name, err = et.str(0); err != nil {
			return nil, err
		}
		isUnion, _ := et.scalar(2, 1, 0)
		e.isUnion = isUnion != 0
		if ut, ok, err := et.sub(3); err != nil {
			return nil, err
		} else if ok {
			bt, _ := ut.scalar(0, 1, 0)
			e.base = uint8(bt)
		}
		s.enums = append(s.enums, e)
	}
	for i, et := range enums {
		vals, err := et.tables(1)
		if err != nil {
			return nil, err
		}
		for _, vt := range vals {
			var v fbEnumVal
			if v.name, err = vt.str(0); err != nil {
				return nil, err
			}
			raw, _ := vt.scalar(1, 8, 0)
			v.value = int64(raw)
			if ut, ok, _ := vt.sub(3); ok {
				if idx, _ := ut.scalar(2, 4, math.MaxUint32); int32(idx) >= 0 && int(int32(idx)) < len(s.objects) {
					v.obj = s.objects[int32(idx)]
				}
			}
			if v.obj == nil {
				if ot, ok, _ := vt.sub(2); ok {
					name, _ := ot.str(0)
					v.obj = s.object(name)
				}
			}
			s.enums[i].values = append(s.enums[i].values, v)
		}
	}
	for i, ot := range objs {
		if err := s.readFields(s.objects[i], ot); err != nil {
			return nil, fmt.Errorf("FlatBuffers schema, %s: %w", s.objects[i].name, err)
		}
	}
	for _, o := range s.objects {
		if err := o.checkLayout(); err != nil {
			return nil, fmt.Errorf("FlatBuffers schema, %s: %w", o.name, err)
		}
	}
	if rootName != "" {
		if s.root = s.object(rootName); s.root == nil {
			return nil, fmt.Errorf("no table %q in the schema", rootName)
		}
	} else if rt, ok, err := st.sub(4); err != nil {
		return nil, err
	} else if ok {
		name, _ := rt.str(0)
		s.root = s.object(name)
	}
	if s.root == nil {
		return nil, errors.New("the schema declares no root_type; name the root table")
	}
	if s.root.isStruct {
		return nil, fmt.Errorf("root %s is a struct, not a table", s.root.name)
	}
	return s, nil
}

// object finds a table or struct by full name, or by simple name when
// that is unique.
func (s *fbSchema) object(name string) *fbObject {
	var found *fbObject
	for _, o := range s.objects {
		if o.name == name {
			return o
		}
		if i := lastDot(o.name); i >= 0 && o.name[i+1:] == name {
			if found != nil {
				return nil
			}
			found = o
		}
	}
	return found
}

func lastDot(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}

func (s *fbSchema) readFields(o *fbObject, ot fbTable) error {
	fts, err := ot.tables(1)
	if err != nil {
		return err
	}
	for _, ft := range fts {
		f := &fbField{}
		if f.name, err = ft.str(0); err != nil {
			return err
		}
		tt, ok, err := ft.sub(1)
		if err != nil || !ok {
			return fmt.Errorf("field %s has no type", f.name)
		}
		base, _ := tt.scalar(0, 1, 0)
		elem, _ := tt.scalar(1, 1, 0)
		idx, _ := tt.scalar(2, 4, math.MaxUint32)
		fl, _ := tt.scalar(3, 2, 0)
		f.typ = fbType{base: uint8(base), elem: uint8(elem), index: int(int32(idx)), fixedLength: int(fl)}
		id, _ := ft.scalar(2, 2, 0)
		off, _ := ft.scalar(3, 2, 0)
		di, _ := ft.scalar(4, 8, 0)
		dr, _ := ft.scalar(5, 8, 0)
		dep, _ := ft.scalar(6, 1, 0)
		opt, _ := ft.scalar(11, 1, 0)
		f.id, f.offset, f.defInt, f.defReal = int(id), int(off), int64(di), math.Float64frombits(dr)
		f.deprecated, f.optional = dep != 0, opt != 0
		t := f.typ.base
		if t == fbVector || t == fbArray {
			t = f.typ.elem
		}
		switch {
		case f.typ.index < 0:
		case t == fbObj:
			if f.typ.index >= len(s.objects) {
				return fmt.Errorf("field %s refers to object %d of %d", f.name, f.typ.index, len(s.objects))
			}
			f.obj = s.objects[f.typ.index]
		default:
			if f.typ.index >= len(s.enums) {
				return fmt.Errorf("field %s refers to enum %d of %d", f.name, f.typ.index, len(s.enums))
			}
			f.enum = s.enums[f.typ.index]
		}
		if f.typ.base == fbVector64 || f.typ.base == fbVector && f.typ.elem == fbUnion {
			return fmt.Errorf("field %s: 64-bit vectors and vectors of unions are not supported", f.name)
		}
		if (t == fbObj && f.obj == nil) || ((t == fbUnion || t == fbUType) && f.enum == nil) {
			return fmt.Errorf("field %s has no type index", f.name)
		}
		o.byName[f.name] = f
		o.fields = append(o.fields, f)
		o.slots = max(o.slots, f.id+1)
	}
	sort.Slice(o.fields, func(i, j int) bool { return o.fields[i].id < o.fields[j].id })
	o.order = append([]*fbField(nil), o.fields...)
	sort.SliceStable(o.order, func(i, j int) bool { return fieldWidth(o.order[i]) > fieldWidth(o.order[j]) })
	return nil
}

// fieldWidth is the inline size of a table field, for packing.
func fieldWidth(f *fbField) int {
	switch {
	case fbIsScalar(f.typ.base):
		return fbScalarSize[f.typ.base]
	case f.typ.base == fbObj && f.obj.isStruct:
		return f.obj.size
	}
	return 4
}

// checkLayout rejects struct layouts that do not fit, so that a damaged
// schema cannot make reads or writes go out of bounds.
func (o *fbObject) checkLayout() error {
	if o.slots > len(o.fields) {
		return fmt.Errorf("field ids up to %d for %d fields", o.slots-1, len(o.fields))
	}
	if !o.isStruct {
		return nil
	}
	if o.size <= 0 || o.size > 1<<20 || o.minAlign <= 0 || o.minAlign > 256 || o.minAlign&(o.minAlign-1) != 0 {
		return fmt.Errorf("bad struct size %d or alignment %d", o.size, o.minAlign)
	}
	for _, f := range o.fields {
		size := 0
		switch t := f.typ.base; {
		case fbIsScalar(t):
			size = fbScalarSize[t]
		case t == fbObj && f.obj.isStruct:
			size = f.obj.size
		case t == fbArray && (fbIsScalar(f.typ.elem) || f.typ.elem == fbObj && f.obj.isStruct):
			size = fbElemSize(f) * f.typ.fixedLength
		default:
			return fmt.Errorf("struct field %s has a type a struct cannot hold", f.name)
		}
		if f.offset < 0 || f.offset+size > o.size {
			return fmt.Errorf("struct field %s does not fit in %d bytes", f.name, o.size)
		}
	}
	return nil
}
