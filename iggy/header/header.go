// Package header holds Iggy's user headers as Go values: keys that are
// strings or raw bytes, and values typed as Iggy types them (string, raw
// bytes, bool, signed and unsigned integers, floats).
//
// It is a leaf package, shared by the client (package iggy), the protocol
// layer (package iggy/wire, which encodes these values, and topic options
// with them) and the connector API (package connector), so a header
// passes from a connector to the wire and back without being converted.
// It does not validate: the client checks sizes when it sends.
package header

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Kind is the type of a key or value, numbered as Iggy numbers it.
type Kind uint8

// Kinds.
const (
	KindRaw     Kind = 1
	KindString  Kind = 2
	KindBool    Kind = 3
	KindInt8    Kind = 4
	KindInt16   Kind = 5
	KindInt32   Kind = 6
	KindInt64   Kind = 7
	KindInt128  Kind = 8
	KindUint8   Kind = 9
	KindUint16  Kind = 10
	KindUint32  Kind = 11
	KindUint64  Kind = 12
	KindUint128 Kind = 13
	KindFloat32 Kind = 14
	KindFloat64 Kind = 15
)

var kindNames = [...]string{"", "raw", "string", "bool", "int8", "int16", "int32", "int64", "int128",
	"uint8", "uint16", "uint32", "uint64", "uint128", "float32", "float64"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// FixedSize returns the byte size a kind requires, or 0 for raw, string
// and unknown kinds.
func (k Kind) FixedSize() int {
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

// Value is a typed header value. Data holds it as Iggy encodes it: UTF-8
// for a string, the bytes themselves for raw, little-endian for numbers,
// 1 or 0 for a bool. Iggy accepts 1..255 bytes, and exactly FixedSize for
// the fixed-size kinds. Values read from a poll alias the poll's buffer.
type Value struct {
	Kind Kind
	Data []byte
}

// Typed value constructors.
func StringValue(s string) Value   { return Value{KindString, []byte(s)} }
func RawValue(b []byte) Value      { return Value{KindRaw, b} }
func BoolValue(v bool) Value       { return Value{KindBool, []byte{boolByte(v)}} }
func Int64Value(v int64) Value     { return Value{KindInt64, le64(uint64(v))} }
func Uint8Value(v uint8) Value     { return Value{KindUint8, []byte{v}} }
func Uint32Value(v uint32) Value   { return Value{KindUint32, binary.LittleEndian.AppendUint32(nil, v)} }
func Uint64Value(v uint64) Value   { return Value{KindUint64, le64(v)} }
func Float64Value(v float64) Value { return Value{KindFloat64, le64(math.Float64bits(v))} }

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// Text returns the string of a string value; ok is false for other kinds.
func (v Value) Text() (s string, ok bool) {
	if v.Kind != KindString {
		return "", false
	}
	return string(v.Data), true
}

// Bool reports whether v is the bool true.
func (v Value) Bool() bool { return v.Kind == KindBool && len(v.Data) == 1 && v.Data[0] == 1 }

// String renders the value for people: strings as text, numbers in
// decimal, raw bytes in hex.
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

// Key is a header's key: a string (StringKey) or raw bytes (BinaryKey).
// Iggy allows the other kinds too; they pass through unchanged, and no
// string lookup matches them.
type Key struct {
	Kind Kind
	Data []byte
}

// StringKey is a string key.
func StringKey(s string) Key { return Key{KindString, []byte(s)} }

// BinaryKey is a raw-bytes key.
func BinaryKey(b []byte) Key { return Key{KindRaw, b} }

// Is reports whether k is the string key name.
func (k Key) Is(name string) bool { return k.Kind == KindString && string(k.Data) == name }

// String renders the key for people, as Value.String does.
func (k Key) String() string { return Value(k).String() }

// Clone returns a copy of hs whose keys and values share one new buffer
// rather than the memory hs's alias, or nil for no headers.
func Clone(hs []Header) []Header {
	if len(hs) == 0 {
		return nil
	}
	n := 0
	for i := range hs {
		n += len(hs[i].Key.Data) + len(hs[i].Value.Data)
	}
	buf := make([]byte, 0, n)
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i].Key.Kind, out[i].Value.Kind = h.Key.Kind, h.Value.Kind
		buf = append(buf, h.Key.Data...)
		out[i].Key.Data = buf[len(buf)-len(h.Key.Data) : len(buf) : len(buf)]
		buf = append(buf, h.Value.Data...)
		out[i].Value.Data = buf[len(buf)-len(h.Value.Data) : len(buf) : len(buf)]
	}
	return out
}

// Header is one user header.
type Header struct {
	Key   Key
	Value Value
}

// New is a header with the string key name.
func New(name string, v Value) Header { return Header{StringKey(name), v} }

// Get returns the value of the first header of hs with the string key
// name.
func Get(hs []Header, name string) (Value, bool) {
	for _, h := range hs {
		if h.Key.Is(name) {
			return h.Value, true
		}
	}
	return Value{}, false
}

// Set sets the header with the string key name to v, replacing the first
// one there is, or appending one, and returns hs.
func Set(hs []Header, name string, v Value) []Header {
	for i := range hs {
		if hs[i].Key.Is(name) {
			hs[i].Value = v
			return hs
		}
	}
	return append(hs, New(name, v))
}
