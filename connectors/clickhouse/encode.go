package clickhouse

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// encode appends v, a value decoded with json.Decoder.UseNumber, to buf
// as RowBinary for t, or says why it does not fit.
func encode(buf []byte, v any, t *chType) ([]byte, error) {
	if v == nil && t.kind != kNullable {
		return buf, errors.New("null in a column that is not Nullable")
	}
	switch t.kind {
	case kNullable:
		if v == nil {
			return append(buf, 1), nil
		}
		return encode(append(buf, 0), v, t.elem)
	case kArray:
		a, ok := v.([]any)
		if !ok {
			return buf, errors.New("not a JSON array")
		}
		buf = binary.AppendUvarint(buf, uint64(len(a)))
		for i, e := range a {
			var err error
			if buf, err = encode(buf, e, t.elem); err != nil {
				return buf, fmt.Errorf("element %d: %w", i, err)
			}
		}
		return buf, nil
	case kInt:
		return encodeInt(buf, v, t.bits, t.signed)
	case kFloat32, kFloat64:
		bits := 64
		if t.kind == kFloat32 {
			bits = 32
		}
		s, ok := numberText(v)
		if !ok {
			return buf, errors.New("not a number")
		}
		f, err := strconv.ParseFloat(s, bits)
		if err != nil {
			return buf, fmt.Errorf("not a %d-bit float", bits)
		}
		if bits == 32 {
			return binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(f))), nil
		}
		return binary.LittleEndian.AppendUint64(buf, math.Float64bits(f)), nil
	case kString:
		s, ok := scalarText(v)
		if !ok {
			return buf, errors.New("not a string, number or boolean")
		}
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		return append(buf, s...), nil
	case kFixedString:
		s, ok := scalarText(v)
		if !ok {
			return buf, errors.New("not a string, number or boolean")
		}
		if len(s) > t.size {
			return buf, fmt.Errorf("%d bytes, longer than %d", len(s), t.size)
		}
		buf = append(buf, s...)
		return append(buf, make([]byte, t.size-len(s))...), nil
	case kUUID:
		s, _ := v.(string)
		u, err := uuid.Parse(s)
		if err != nil {
			return buf, errors.New("not a UUID string")
		}
		return appendUUID(buf, u), nil
	case kDate:
		return encodeDate(buf, v)
	case kDateTime:
		return encodeDateTime(buf, v, t.loc)
	case kDecimal:
		return encodeDecimal(buf, v, t)
	case kEnum:
		var n int64
		switch v := v.(type) {
		case string:
			var ok bool
			if n, ok = t.enum[v]; !ok {
				return buf, errors.New("not one of the enum's names")
			}
		case json.Number:
			var err error
			if n, err = strconv.ParseInt(string(v), 10, 64); err != nil || !t.values[n] {
				return buf, errors.New("not one of the enum's values")
			}
		default:
			return buf, errors.New("not an enum name or value")
		}
		if t.bits == 8 {
			return append(buf, byte(int8(n))), nil
		}
		return binary.LittleEndian.AppendUint16(buf, uint16(int16(n))), nil
	}
	return buf, errUnsupported
}

// appendUUID writes u as ClickHouse does: each half as a little-endian
// UInt64, the first half first.
func appendUUID(buf []byte, u uuid.UUID) []byte {
	buf = binary.LittleEndian.AppendUint64(buf, binary.BigEndian.Uint64(u[:8]))
	return binary.LittleEndian.AppendUint64(buf, binary.BigEndian.Uint64(u[8:]))
}

// numberText is a JSON number's text, or a string's (numbers in strings
// are accepted, as upstream does).
func numberText(v any) (string, bool) {
	switch v := v.(type) {
	case json.Number:
		return string(v), true
	case string:
		return strings.TrimSpace(v), true
	}
	return "", false
}

// scalarText is the text a String column takes: a string as it is, a
// number or boolean as its JSON text.
func scalarText(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return string(v), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

func encodeInt(buf []byte, v any, bits int, signed bool) ([]byte, error) {
	s, ok := numberText(v)
	if !ok {
		return buf, errors.New("not an integer")
	}
	var u uint64
	if signed {
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			f, ferr := wholeFloat(s)
			if ferr != nil || f < -math.Ldexp(1, bits-1) || f >= math.Ldexp(1, bits-1) {
				return buf, fmt.Errorf("not an integer that fits Int%d", bits)
			}
			n = int64(f)
		}
		u = uint64(n)
	} else {
		n, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			f, ferr := wholeFloat(s)
			if ferr != nil || f < 0 || f >= math.Ldexp(1, bits) {
				return buf, fmt.Errorf("not an integer that fits UInt%d", bits)
			}
			n = uint64(f)
		}
		u = n
	}
	switch bits {
	case 8:
		return append(buf, byte(u)), nil
	case 16:
		return binary.LittleEndian.AppendUint16(buf, uint16(u)), nil
	case 32:
		return binary.LittleEndian.AppendUint32(buf, uint32(u)), nil
	}
	return binary.LittleEndian.AppendUint64(buf, u), nil
}

// wholeFloat accepts numbers such as 1e3 or 2.0 written as floats.
func wholeFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) {
		return 0, errors.New("not a whole number")
	}
	return f, nil
}

// encodeDate takes "YYYY-MM-DD" or a day number (days since 1970-01-01).
func encodeDate(buf []byte, v any) ([]byte, error) {
	var days int64
	switch v := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return buf, errors.New("not a whole day number")
		}
		days = n
	case string:
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			return buf, errors.New("not a YYYY-MM-DD date")
		}
		days = d.Unix() / 86400
	default:
		return buf, errors.New("not a date string or day number")
	}
	if days < 0 || days > math.MaxUint16 {
		return buf, errors.New("outside Date's range (1970-01-01 to 2149-06-06)")
	}
	return binary.LittleEndian.AppendUint16(buf, uint16(days)), nil
}

var dateTimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", time.DateTime + ".999999999", time.DateTime, time.DateOnly}

// encodeDateTime takes Unix seconds or a date-time string: RFC 3339, or
// "YYYY-MM-DD[ hh:mm:ss[.frac]]" read in the column's time zone (UTC if
// it names none). Fractions of a second are dropped.
func encodeDateTime(buf []byte, v any, loc *time.Location) ([]byte, error) {
	var secs int64
	switch v := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return buf, errors.New("not whole Unix seconds")
		}
		secs = n
	case string:
		var t time.Time
		err := errors.New("no layout")
		for _, l := range dateTimeLayouts {
			if t, err = time.ParseInLocation(l, v, loc); err == nil {
				break
			}
		}
		if err != nil {
			return buf, errors.New("not a date-time (RFC 3339 or YYYY-MM-DD hh:mm:ss)")
		}
		secs = t.Unix()
	default:
		return buf, errors.New("not a date-time string or Unix seconds")
	}
	if secs < 0 || secs > math.MaxUint32 {
		return buf, errors.New("outside DateTime's range (1970 to 2106)")
	}
	return binary.LittleEndian.AppendUint32(buf, uint32(secs)), nil
}

// encodeDecimal takes a number or a numeric string in plain notation
// (digits, an optional sign and point): exact, no float in between; more
// fractional digits than the scale, or more digits than the precision,
// do not fit.
func encodeDecimal(buf []byte, v any, t *chType) ([]byte, error) {
	s, ok := numberText(v)
	if !ok || len(s) > 80 {
		return buf, errors.New("not a decimal number")
	}
	neg := strings.HasPrefix(s, "-")
	if neg || strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || !digits(whole) || !digits(frac) {
		return buf, errors.New("not a decimal number in plain notation")
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > t.scale {
		return buf, fmt.Errorf("more than %d fractional digits", t.scale)
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole)+t.scale > t.size {
		return buf, fmt.Errorf("more than %d digits before the point", t.size-t.scale)
	}
	n, _ := new(big.Int).SetString("0"+whole+frac+strings.Repeat("0", t.scale-len(frac)), 10)
	if neg {
		n.Neg(n)
	}
	switch t.bits {
	case 32:
		return binary.LittleEndian.AppendUint32(buf, uint32(n.Int64())), nil
	case 64:
		return binary.LittleEndian.AppendUint64(buf, uint64(n.Int64())), nil
	}
	// Int128, two's complement, little-endian.
	if n.Sign() < 0 {
		n.Add(n, new(big.Int).Lsh(big.NewInt(1), 128))
	}
	var b [16]byte
	n.FillBytes(b[:])
	for i := range 8 {
		b[i], b[15-i] = b[15-i], b[i]
	}
	return append(buf, b[:]...), nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// short is v for a reason: at most 40 bytes of its JSON.
func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 40 {
		n := 40
		for n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		return string(b[:n]) + "…"
	}
	return string(b)
}
