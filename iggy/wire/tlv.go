package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// ValueKind is the kind byte of a user-header or option key or value.
type ValueKind uint8

// Value kinds.
const (
	KindRaw     ValueKind = 1
	KindString  ValueKind = 2
	KindBool    ValueKind = 3
	KindInt8    ValueKind = 4
	KindInt16   ValueKind = 5
	KindInt32   ValueKind = 6
	KindInt64   ValueKind = 7
	KindInt128  ValueKind = 8
	KindUint8   ValueKind = 9
	KindUint16  ValueKind = 10
	KindUint32  ValueKind = 11
	KindUint64  ValueKind = 12
	KindUint128 ValueKind = 13
	KindFloat32 ValueKind = 14
	KindFloat64 ValueKind = 15
)

var kindNames = [...]string{"", "raw", "string", "bool", "int8", "int16", "int32", "int64", "int128",
	"uint8", "uint16", "uint32", "uint64", "uint128", "float32", "float64"}

func (k ValueKind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// FixedSize returns the byte size a kind requires, or 0 for raw, string and
// unknown kinds.
func (k ValueKind) FixedSize() int {
	switch k {
	case KindBool, KindInt8, KindUint8:
		return 1
	case KindInt16, KindUint16:
		return 2
	case KindInt32, KindUint32, KindFloat32:
		return 4
	case KindInt64, KindUint64, KindFloat64:
		return 8
	case KindInt128, KindUint128:
		return 16
	}
	return 0
}

// Value is a typed key or value of the header/option TLV.
type Value struct {
	Kind ValueKind
	Data []byte
}

// Typed value constructors.
func RawValue(b []byte) Value      { return Value{KindRaw, b} }
func StringValue(s string) Value   { return Value{KindString, []byte(s)} }
func BoolValue(v bool) Value       { return Value{KindBool, appendBool(nil, v)} }
func Int64Value(v int64) Value     { return Value{KindInt64, appendU64(nil, uint64(v))} }
func Uint8Value(v uint8) Value     { return Value{KindUint8, []byte{v}} }
func Uint32Value(v uint32) Value   { return Value{KindUint32, appendU32(nil, v)} }
func Uint64Value(v uint64) Value   { return Value{KindUint64, appendU64(nil, v)} }
func Float64Value(v float64) Value { return Value{KindFloat64, appendU64(nil, math.Float64bits(v))} }

// Check reports whether the value's length fits its kind: 1..255 bytes,
// and the exact size for fixed-size kinds.
func (v Value) Check() error {
	if v.Kind == 0 {
		return fmt.Errorf("%w: kind 0", ErrInvalidHeaderKind)
	}
	if len(v.Data) == 0 || len(v.Data) > 255 {
		return fmt.Errorf("%w: %s value is %d bytes, want 1..255", ErrInvalidKeyValueLength, v.Kind, len(v.Data))
	}
	if n := v.Kind.FixedSize(); n != 0 && len(v.Data) != n {
		return fmt.Errorf("%w: %s value is %d bytes, want %d", ErrInvalidHeaderValue, v.Kind, len(v.Data), n)
	}
	return nil
}

// String renders the value for people: strings as text, numbers in decimal,
// raw bytes in hex.
func (v Value) String() string {
	if v.Kind.FixedSize() != 0 && len(v.Data) != v.Kind.FixedSize() {
		return fmt.Sprintf("%s(%x)", v.Kind, v.Data)
	}
	b := v.Data
	switch v.Kind {
	case KindString:
		return string(b)
	case KindBool:
		return strconv.FormatBool(b[0] == 1)
	case KindInt8:
		return strconv.FormatInt(int64(int8(b[0])), 10)
	case KindInt16:
		return strconv.FormatInt(int64(int16(binary.LittleEndian.Uint16(b))), 10)
	case KindInt32:
		return strconv.FormatInt(int64(int32(binary.LittleEndian.Uint32(b))), 10)
	case KindInt64:
		return strconv.FormatInt(int64(binary.LittleEndian.Uint64(b)), 10)
	case KindUint8:
		return strconv.FormatUint(uint64(b[0]), 10)
	case KindUint16:
		return strconv.FormatUint(uint64(binary.LittleEndian.Uint16(b)), 10)
	case KindUint32:
		return strconv.FormatUint(uint64(binary.LittleEndian.Uint32(b)), 10)
	case KindUint64:
		return strconv.FormatUint(binary.LittleEndian.Uint64(b), 10)
	case KindFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 'g', -1, 32)
	case KindFloat64:
		return strconv.FormatFloat(math.Float64frombits(binary.LittleEndian.Uint64(b)), 'g', -1, 64)
	}
	return fmt.Sprintf("%x", b)
}

// Entry is one key/value pair of a TLV block.
type Entry struct {
	Key   Value
	Value Value
}

// Header builds a user-header entry with a string key.
func Header(key string, v Value) Entry { return Entry{StringValue(key), v} }

// MaxUserHeadersSize bounds an encoded user-headers block.
const MaxUserHeadersSize = 100_000

// AppendTLV appends entries as repeated
// [key_kind u8][key_len u32][key][val_kind u8][val_len u32][val].
func AppendTLV(b []byte, entries []Entry) []byte {
	for _, e := range entries {
		b = appendTLVValue(b, e.Key)
		b = appendTLVValue(b, e.Value)
	}
	return b
}

func appendTLVValue(b []byte, v Value) []byte {
	b = append(b, byte(v.Kind))
	b = appendU32(b, uint32(len(v.Data)))
	return append(b, v.Data...)
}

// EncodeTLV validates entries and encodes them.
func EncodeTLV(entries []Entry) ([]byte, error) {
	for i, e := range entries {
		if err := e.Key.Check(); err != nil {
			return nil, fmt.Errorf("header %d key: %w", i, err)
		}
		if err := e.Value.Check(); err != nil {
			return nil, fmt.Errorf("header %d value: %w", i, err)
		}
	}
	return AppendTLV(nil, entries), nil
}

// ParseTLV decodes a TLV block: every kind non-zero, every length 1..255,
// and the entries tile the buffer exactly. Values alias b. Fixed sizes per
// kind are not checked here (the wire treats kinds as opaque); Value.Check
// does that.
func ParseTLV(b []byte) ([]Entry, error) {
	var out []Entry
	d := NewDecoder(b)
	for d.Remaining() > 0 && d.Err() == nil {
		k := d.tlvValue("header key")
		v := d.tlvValue("header value")
		if d.Err() == nil {
			out = append(out, Entry{k, v})
		}
	}
	return out, d.Err()
}

// CheckTLV reports whether b is a block ParseTLV accepts, without
// allocating on success (for validating user headers on a hot path).
func CheckTLV(b []byte) error {
	for off, i := 0, 0; off < len(b); i++ {
		field := "key"
		if i%2 == 1 {
			field = "value"
		}
		if len(b)-off < 5 {
			return fmt.Errorf("%w: at byte %d: header %s needs 5 bytes of kind and length, %d left", ErrMalformed, off, field, len(b)-off)
		}
		kind, n := b[off], binary.LittleEndian.Uint32(b[off+1:])
		switch {
		case kind == 0:
			return fmt.Errorf("%w: at byte %d: header %s kind is 0", ErrMalformed, off, field)
		case n == 0 || n > 255:
			return fmt.Errorf("%w: at byte %d: header %s length %d, want 1..255", ErrMalformed, off, field, n)
		case int(n) > len(b)-off-5:
			return fmt.Errorf("%w: at byte %d: header %s needs %d bytes, %d left", ErrMalformed, off, field, n, len(b)-off-5)
		}
		off += 5 + int(n)
		if off == len(b) && i%2 == 0 {
			return fmt.Errorf("%w: at byte %d: header key without a value", ErrMalformed, off)
		}
	}
	return nil
}

func (d *Decoder) tlvValue(field string) Value {
	kind := ValueKind(d.U8(field + " kind"))
	n := d.U32(field + " length")
	if d.Err() != nil {
		return Value{}
	}
	if kind == 0 {
		d.Failf("%s kind is 0", field)
		return Value{}
	}
	if n == 0 || n > 255 {
		d.Failf("%s length %d, want 1..255", field, n)
		return Value{}
	}
	return Value{kind, d.Bytes(int(n), field)}
}

// Lookup returns the value of the first entry whose key is the string key.
func Lookup(entries []Entry, key string) (Value, bool) {
	for _, e := range entries {
		if e.Key.Kind == KindString && string(e.Key.Data) == key {
			return e.Value, true
		}
	}
	return Value{}, false
}
