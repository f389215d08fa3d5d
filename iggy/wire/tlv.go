package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/ferryhq/ferry/iggy/header"
)

// The TLV's keys and values are package header's types, which users of
// the client and the connector API share; this file encodes and checks
// them.
type (
	// ValueKind is the kind byte of a user-header or option key or value.
	ValueKind = header.Kind
	// Value is a typed key or value of the header/option TLV.
	Value = header.Value
	// Entry is one key/value pair of a TLV block.
	Entry = header.Header
)

// Value kinds.
const (
	KindRaw     = header.KindRaw
	KindString  = header.KindString
	KindBool    = header.KindBool
	KindInt8    = header.KindInt8
	KindInt16   = header.KindInt16
	KindInt32   = header.KindInt32
	KindInt64   = header.KindInt64
	KindInt128  = header.KindInt128
	KindUint8   = header.KindUint8
	KindUint16  = header.KindUint16
	KindUint32  = header.KindUint32
	KindUint64  = header.KindUint64
	KindUint128 = header.KindUint128
	KindFloat32 = header.KindFloat32
	KindFloat64 = header.KindFloat64
)

// Typed value constructors, as package header has them.
func RawValue(b []byte) Value      { return header.RawValue(b) }
func StringValue(s string) Value   { return header.StringValue(s) }
func BoolValue(v bool) Value       { return header.BoolValue(v) }
func Int64Value(v int64) Value     { return header.Int64Value(v) }
func Uint8Value(v uint8) Value     { return header.Uint8Value(v) }
func Uint32Value(v uint32) Value   { return header.Uint32Value(v) }
func Uint64Value(v uint64) Value   { return header.Uint64Value(v) }
func Float64Value(v float64) Value { return header.Float64Value(v) }

// CheckValue reports whether a key's or value's length fits its kind:
// 1..255 bytes, and the exact size for fixed-size kinds.
func CheckValue(v Value) error {
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

// Header builds a user-header entry with a string key.
func Header(key string, v Value) Entry { return header.New(key, v) }

// MaxUserHeadersSize bounds an encoded user-headers block.
const MaxUserHeadersSize = 100_000

// AppendTLV appends entries as repeated
// [key_kind u8][key_len u32][key][val_kind u8][val_len u32][val].
func AppendTLV(b []byte, entries []Entry) []byte {
	for _, e := range entries {
		b = appendTLVValue(b, Value(e.Key))
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
		if err := CheckValue(Value(e.Key)); err != nil {
			return nil, fmt.Errorf("header %d key: %w", i, err)
		}
		if err := CheckValue(e.Value); err != nil {
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
			out = append(out, Entry{Key: header.Key(k), Value: v})
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
	return Value{Kind: kind, Data: d.Bytes(int(n), field)}
}

// Lookup returns the value of the first entry whose key is the string key.
func Lookup(entries []Entry, key string) (Value, bool) { return header.Get(entries, key) }
