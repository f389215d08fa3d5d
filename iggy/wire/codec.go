package wire

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// Decoder reads little-endian values from a byte slice. The first failure
// sticks: later reads return zero values and Err reports the first problem,
// so a payload decoder can read all its fields and check once at the end.
type Decoder struct {
	b   []byte
	off int
	err error
}

// NewDecoder returns a decoder over b. The decoder aliases b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

// Err returns the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Offset returns how many bytes have been consumed.
func (d *Decoder) Offset() int { return d.off }

// Remaining returns how many bytes are left.
func (d *Decoder) Remaining() int { return len(d.b) - d.off }

// Fail records err as the decoder's error unless one is already recorded.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Failf records a formatted format error naming the field at the current offset.
func (d *Decoder) Failf(format string, args ...any) {
	d.Fail(fmt.Errorf("%w: at byte %d: %s", ErrMalformed, d.off, fmt.Sprintf(format, args...)))
}

func (d *Decoder) take(n int, field string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.Failf("%s needs %d bytes, %d left", field, n, len(d.b)-d.off)
		return nil
	}
	s := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return s
}

// U8 reads one byte.
func (d *Decoder) U8(field string) uint8 {
	if s := d.take(1, field); s != nil {
		return s[0]
	}
	return 0
}

// Bool reads one byte that must be 0 or 1.
func (d *Decoder) Bool(field string) bool {
	v := d.U8(field)
	if v > 1 {
		d.Failf("%s: boolean byte is %d, want 0 or 1", field, v)
	}
	return v == 1
}

// U16 reads a little-endian uint16.
func (d *Decoder) U16(field string) uint16 {
	if s := d.take(2, field); s != nil {
		return binary.LittleEndian.Uint16(s)
	}
	return 0
}

// U32 reads a little-endian uint32.
func (d *Decoder) U32(field string) uint32 {
	if s := d.take(4, field); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

// U64 reads a little-endian uint64.
func (d *Decoder) U64(field string) uint64 {
	if s := d.take(8, field); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

// Bytes reads n bytes. The result aliases the input.
func (d *Decoder) Bytes(n int, field string) []byte { return d.take(n, field) }

// Rest consumes and returns everything left. The result aliases the input.
func (d *Decoder) Rest() []byte { return d.take(d.Remaining(), "rest") }

// Name reads a u8-length-prefixed UTF-8 string of 1..255 bytes.
func (d *Decoder) Name(field string) string {
	n := int(d.U8(field + " length"))
	if d.err == nil && n == 0 {
		d.Failf("%s is empty", field)
		return ""
	}
	return d.utf8(n, field)
}

// String8 reads a u8-length-prefixed UTF-8 string that may be empty.
func (d *Decoder) String8(field string) string {
	return d.utf8(int(d.U8(field+" length")), field)
}

// String32 reads a u32-length-prefixed UTF-8 string that may be empty.
func (d *Decoder) String32(field string) string {
	n := d.U32(field + " length")
	if uint64(n) > uint64(d.Remaining()) {
		d.Failf("%s length %d exceeds the %d bytes left", field, n, d.Remaining())
		return ""
	}
	return d.utf8(int(n), field)
}

func (d *Decoder) utf8(n int, field string) string {
	s := d.take(n, field)
	if s == nil {
		return ""
	}
	if !utf8.Valid(s) {
		d.Failf("%s is not valid UTF-8", field)
		return ""
	}
	return string(s)
}

// End records an error if any bytes are left unread.
func (d *Decoder) End(what string) {
	if d.err == nil && d.Remaining() != 0 {
		d.Failf("%s has %d trailing bytes", what, d.Remaining())
	}
}

// Little-endian append helpers, so encoders read as a list of fields.

func appendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
func putU32(b []byte, v uint32)           { binary.LittleEndian.PutUint32(b, v) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendString8 appends a u8-length-prefixed string. Encoders cannot
// return errors, so validating the length is the caller's job, before
// encoding: names and identifiers are 1..255 bytes (Identifier.Validate,
// the client's name checks), credentials 3..50 / 3..100 bytes and tokens
// 1..255 (the client's config check). A caller that validates never
// reaches the cut below; it only keeps a frame well-formed (the length
// byte matching the bytes) when a caller forgot, at the price of sending a
// truncated string.
func appendString8(b []byte, s string) []byte {
	if len(s) > 255 {
		s = s[:255]
	}
	b = append(b, byte(len(s)))
	return append(b, s...)
}

func appendString32(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

// Decodable is a payload that can read itself from a Decoder.
type Decodable interface {
	DecodeFrom(d *Decoder)
}

// Encodable is a payload that can append itself to a buffer.
type Encodable interface {
	AppendTo(b []byte) []byte
}

// DecodeRequest decodes a request body into v the way the upstream server
// does (WireDecode::decode_from in core/binary_protocol/src/codec.rs): v
// reads the fields it needs and whatever follows them is ignored, so a
// client that appends a field (the Node.js SDK sends delete_topic with a
// trailing u32) is served. A field that runs past the body, a bad
// identifier kind or length, or invalid UTF-8 still fails. Payloads whose
// last field runs to the end of the body (options blocks, a send batch)
// consume the rest themselves and judge it.
func DecodeRequest(b []byte, v Decodable) error {
	d := NewDecoder(b)
	v.DecodeFrom(d)
	return d.Err()
}

// Unmarshal decodes b into v and requires that v consumes all of b. Reply
// decoders use it: a reply with trailing bytes is malformed. Payloads
// whose last field runs to the end of the body consume it themselves.
func Unmarshal(b []byte, v Decodable) error {
	d := NewDecoder(b)
	v.DecodeFrom(d)
	d.End(fmt.Sprintf("%T", v))
	return d.Err()
}

// Marshal encodes v into a new slice.
func Marshal(v Encodable) []byte { return v.AppendTo(nil) }
