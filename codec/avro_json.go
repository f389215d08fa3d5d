package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/ferryhq/ferry/internal/jsonx"
)

// maxNesting bounds recursion when reading and writing nested values.
const maxNesting = 512

var errAvroEOF = errors.New("Avro datum is truncated")

var avroStringNode = avroNode{kind: avString, name: "string"}

// avroReader reads one Avro binary datum.
type avroReader struct {
	b   []byte
	pos int
}

func (r *avroReader) end() error {
	if r.pos != len(r.b) {
		return fmt.Errorf("Avro payload has %d bytes after the datum", len(r.b)-r.pos)
	}
	return nil
}

func (r *avroReader) long() (int64, error) {
	var u uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if r.pos >= len(r.b) {
			return 0, errAvroEOF
		}
		c := r.b[r.pos]
		r.pos++
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("Avro varint is longer than 10 bytes")
}

func (r *avroReader) int() (int32, error) {
	v, err := r.long()
	if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		err = fmt.Errorf("Avro int %d is out of range", v)
	}
	return int32(v), err
}

func (r *avroReader) take(n int64) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("negative Avro length %d", n)
	}
	if n > int64(len(r.b)-r.pos) {
		return nil, errAvroEOF
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s, nil
}

// blockCount reads an array or map block header; a negative count is
// followed by the block's byte size.
func (r *avroReader) blockCount() (int64, error) {
	n, err := r.long()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		if n == math.MinInt64 {
			return 0, errors.New("bad Avro block count")
		}
		n = -n
		if _, err := r.long(); err != nil {
			return 0, err
		}
	}
	// Every item takes at least one byte, except nulls; bound the count
	// by what is left so that a hostile count cannot spin for long.
	if n > int64(len(r.b)-r.pos)+1<<20 {
		return 0, fmt.Errorf("Avro block count %d is larger than the payload", n)
	}
	return n, nil
}

// toJSON appends the JSON of the value of type n.
func (r *avroReader) toJSON(dst []byte, n *avroNode, depth int) ([]byte, error) {
	if depth > maxNesting {
		return nil, errors.New("Avro value nested too deeply")
	}
	switch n.kind {
	case avNull:
		return append(dst, "null"...), nil
	case avBoolean:
		b, err := r.take(1)
		if err != nil {
			return nil, err
		}
		switch b[0] {
		case 0:
			return append(dst, "false"...), nil
		case 1:
			return append(dst, "true"...), nil
		}
		return nil, fmt.Errorf("bad Avro boolean byte %d", b[0])
	case avInt:
		v, err := r.int()
		return strconv.AppendInt(dst, int64(v), 10), err
	case avLong:
		v, err := r.long()
		return strconv.AppendInt(dst, v, 10), err
	case avFloat:
		b, err := r.take(4)
		if err != nil {
			return nil, err
		}
		return appendFloat(dst, float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 32), nil
	case avDouble:
		b, err := r.take(8)
		if err != nil {
			return nil, err
		}
		return appendFloat(dst, math.Float64frombits(binary.LittleEndian.Uint64(b)), 64), nil
	case avString:
		l, err := r.long()
		if err != nil {
			return nil, err
		}
		s, err := r.take(l)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(s) {
			return nil, errors.New("Avro string is not valid UTF-8")
		}
		return jsonx.AppendString(dst, string(s)), nil
	case avBytes:
		l, err := r.long()
		if err != nil {
			return nil, err
		}
		s, err := r.take(l)
		if err != nil {
			return nil, err
		}
		return appendByteArray(dst, s), nil
	case avFixed:
		s, err := r.take(int64(n.size))
		if err != nil {
			return nil, err
		}
		return appendByteArray(dst, s), nil
	case avEnum:
		i, err := r.long()
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(n.symbols)) {
			return nil, fmt.Errorf("Avro enum %s has no symbol %d", n.name, i)
		}
		return jsonx.AppendString(dst, n.symbols[i]), nil
	case avUnion:
		i, err := r.long()
		if err != nil {
			return nil, err
		}
		if i < 0 || i >= int64(len(n.branches)) {
			return nil, fmt.Errorf("Avro union %s has no branch %d", n.name, i)
		}
		return r.toJSON(dst, n.branches[i], depth+1)
	case avRecord:
		dst = append(dst, '{')
		var err error
		for i := range n.fields {
			f := &n.fields[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, f.key...)
			if dst, err = r.toJSON(dst, f.node, depth+1); err != nil {
				return nil, fmt.Errorf("%s.%s: %w", n.name, f.name, err)
			}
		}
		return append(dst, '}'), nil
	case avArray, avMap:
		open, close := byte('['), byte(']')
		if n.kind == avMap {
			open, close = '{', '}'
		}
		dst = append(dst, open)
		first := true
		for {
			count, err := r.blockCount()
			if err != nil {
				return nil, err
			}
			if count == 0 {
				return append(dst, close), nil
			}
			for ; count > 0; count-- {
				if !first {
					dst = append(dst, ',')
				}
				first = false
				if n.kind == avMap {
					if dst, err = r.toJSON(dst, &avroStringNode, depth+1); err != nil {
						return nil, err
					}
					dst = append(dst, ':')
				}
				if dst, err = r.toJSON(dst, n.elem, depth+1); err != nil {
					return nil, err
				}
			}
		}
	}
	return nil, fmt.Errorf("unsupported Avro type %s", n.name)
}

// jsonFloat reads a number, or null as NaN (the JSON that appendFloat
// writes for NaN and the infinities).
func jsonFloat(v *jsonx.Value) (float64, error) {
	switch v.Kind {
	case jsonx.Null:
		return math.NaN(), nil
	case jsonx.Number:
		f, err := strconv.ParseFloat(v.Str, 64)
		if err != nil {
			return 0, fmt.Errorf("%s is out of range for a float", v.Str)
		}
		return f, nil
	}
	return 0, fmt.Errorf("want a number, got %s", v.Kind)
}

// appendFloat writes a finite float as JSON, and NaN or an infinity as
// null (JSON has no such numbers).
func appendFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

func appendByteArray(dst, s []byte) []byte {
	dst = append(dst, '[')
	for i, c := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(c), 10)
	}
	return append(dst, ']')
}

func parseDoc(doc []byte) (jsonx.Value, error) {
	v, err := jsonx.Parse(doc)
	if err != nil {
		return v, fmt.Errorf("payload is not valid JSON: %w", err)
	}
	return v, nil
}

// avroWriter encodes a JSON value as an Avro datum.
type avroWriter struct {
	strict bool
}

func appendLong(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

// encode appends the datum of v as type n. Errors carry the JSON path of
// the value (see atPath), built only when encoding fails.
func (w *avroWriter) encode(dst []byte, n *avroNode, v *jsonx.Value, depth int) ([]byte, error) {
	mismatch := func() error {
		return fmt.Errorf("JSON %s does not match Avro type %s", v.Kind, n.name)
	}
	if depth > maxNesting {
		return nil, errors.New("JSON value nested too deeply")
	}
	switch n.kind {
	case avNull:
		if v.Kind != jsonx.Null {
			return nil, mismatch()
		}
		return dst, nil
	case avBoolean:
		if v.Kind != jsonx.Bool {
			return nil, mismatch()
		}
		if v.Bool {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case avInt, avLong:
		if v.Kind != jsonx.Number || !jsonx.IsInteger(v.Str) {
			return nil, mismatch()
		}
		bits := 64
		if n.kind == avInt {
			bits = 32
		}
		i, err := strconv.ParseInt(v.Str, 10, bits)
		if err != nil {
			return nil, fmt.Errorf("%s is out of range for Avro %s", v.Str, n.name)
		}
		return appendLong(dst, i), nil
	case avFloat, avDouble:
		if v.Kind != jsonx.Number && v.Kind != jsonx.Null {
			return nil, mismatch()
		}
		f, err := jsonFloat(v)
		if err != nil {
			return nil, err
		}
		if n.kind == avFloat {
			return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	case avString:
		if v.Kind != jsonx.String {
			return nil, mismatch()
		}
		return append(appendLong(dst, int64(len(v.Str))), v.Str...), nil
	case avBytes, avFixed:
		b, err := jsonBytes(v)
		if err != nil {
			return nil, err
		}
		if n.kind == avFixed {
			if len(b) != n.size {
				return nil, fmt.Errorf("%d bytes for Avro fixed %s of size %d", len(b), n.name, n.size)
			}
			return append(dst, b...), nil
		}
		return append(appendLong(dst, int64(len(b))), b...), nil
	case avEnum:
		if v.Kind != jsonx.String {
			return nil, mismatch()
		}
		for i, s := range n.symbols {
			if s == v.Str {
				return appendLong(dst, int64(i)), nil
			}
		}
		return nil, fmt.Errorf("%q is not a symbol of Avro enum %s", v.Str, n.name)
	case avUnion:
		var first error
		for i, b := range n.branches {
			if !b.accepts(v) {
				continue
			}
			out, err := w.encode(appendLong(dst, int64(i)), b, v, depth+1)
			if err == nil {
				return out, nil
			}
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return nil, first
		}
		return nil, fmt.Errorf("JSON %s matches no branch of Avro union %s", v.Kind, n.name)
	case avRecord:
		if v.Kind != jsonx.Object {
			return nil, mismatch()
		}
		if w.strict {
			for _, f := range v.Fields {
				if !n.hasField(f.Name) {
					return nil, fmt.Errorf("Avro record %s has no field %q", n.name, f.Name)
				}
			}
		}
		var err error
		for i := range n.fields {
			f := &n.fields[i]
			fv, ok := v.Get(f.name)
			if !ok {
				if f.hasDef {
					dst = append(dst, f.def...)
					continue
				}
				fv = &jsonx.Value{Kind: jsonx.Null}
			}
			if dst, err = w.encode(dst, f.node, fv, depth+1); err != nil {
				return nil, atPath("."+f.name, err)
			}
		}
		return dst, nil
	case avArray:
		if v.Kind != jsonx.Array {
			return nil, mismatch()
		}
		if len(v.Items) > 0 {
			dst = appendLong(dst, int64(len(v.Items)))
			var err error
			for i := range v.Items {
				if dst, err = w.encode(dst, n.elem, &v.Items[i], depth+1); err != nil {
					return nil, atPath("["+strconv.Itoa(i)+"]", err)
				}
			}
		}
		return append(dst, 0), nil
	case avMap:
		if v.Kind != jsonx.Object {
			return nil, mismatch()
		}
		if len(v.Fields) > 0 {
			dst = appendLong(dst, int64(len(v.Fields)))
			var err error
			for i := range v.Fields {
				f := &v.Fields[i]
				dst = append(appendLong(dst, int64(len(f.Name))), f.Name...)
				if dst, err = w.encode(dst, n.elem, &f.Value, depth+1); err != nil {
					return nil, atPath("."+f.Name, err)
				}
			}
		}
		return append(dst, 0), nil
	}
	return nil, fmt.Errorf("unsupported Avro type %s", n.name)
}

// accepts is a quick test of whether v can be of type n, so that a union
// tries only the branches that may fit.
func (n *avroNode) accepts(v *jsonx.Value) bool {
	switch n.kind {
	case avNull:
		return v.Kind == jsonx.Null
	case avBoolean:
		return v.Kind == jsonx.Bool
	case avInt, avLong:
		return v.Kind == jsonx.Number && jsonx.IsInteger(v.Str)
	case avFloat, avDouble:
		return v.Kind == jsonx.Number
	case avString, avEnum:
		return v.Kind == jsonx.String
	case avBytes, avFixed:
		return v.Kind == jsonx.String || v.Kind == jsonx.Array
	case avRecord, avMap:
		return v.Kind == jsonx.Object
	case avArray:
		return v.Kind == jsonx.Array
	}
	return true
}

func (n *avroNode) hasField(name string) bool {
	for i := range n.fields {
		if n.fields[i].name == name {
			return true
		}
	}
	return false
}

// jsonBytes reads bytes from a JSON array of byte values or a string (its
// UTF-8 bytes), as upstream accepts both.
func jsonBytes(v *jsonx.Value) ([]byte, error) {
	switch v.Kind {
	case jsonx.String:
		return []byte(v.Str), nil
	case jsonx.Array:
		b := make([]byte, len(v.Items))
		for i := range v.Items {
			it := &v.Items[i]
			n, err := strconv.ParseUint(it.Str, 10, 8)
			if it.Kind != jsonx.Number || err != nil {
				return nil, fmt.Errorf("byte %d is not a number from 0 to 255", i)
			}
			b[i] = byte(n)
		}
		return b, nil
	}
	return nil, fmt.Errorf("want bytes as an array of numbers or a string, got %s", v.Kind)
}

// pathError is an encoding error at a JSON path such as $.items[2].name.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return "$" + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// atPath prefixes the path of err with one more segment (the error
// travels up from the value that failed, so segments come in reverse).
func atPath(seg string, err error) error {
	if pe, ok := err.(*pathError); ok {
		pe.path = seg + pe.path
		return pe
	}
	return &pathError{path: seg, err: err}
}
