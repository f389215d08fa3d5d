package clickhouse

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// kind is a ClickHouse column type row_binary can write.
type kind int

const (
	kInt kind = iota // Int8..Int64, UInt8..UInt64 (bits, signed)
	kFloat32
	kFloat64
	kString
	kFixedString
	kUUID
	kDate
	kDateTime
	kDecimal
	kEnum
	kNullable
	kArray
)

// chType is a parsed column type (system.columns' type text).
type chType struct {
	kind   kind
	name   string // as the server spells it, for reasons
	bits   int    // kInt, kEnum: width; kDecimal: 32, 64 or 128
	signed bool
	size   int // kFixedString: bytes; kDecimal: precision
	scale  int // kDecimal
	loc    *time.Location
	enum   map[string]int64 // kEnum: name → value
	values map[int64]bool   // kEnum: the values
	elem   *chType          // kNullable, kArray
}

var ints = map[string]struct {
	bits   int
	signed bool
}{
	"Int8": {8, true}, "Int16": {16, true}, "Int32": {32, true}, "Int64": {64, true},
	"UInt8": {8, false}, "UInt16": {16, false}, "UInt32": {32, false}, "UInt64": {64, false},
}

// errUnsupported marks a type row_binary cannot write.
var errUnsupported = errors.New("row_binary does not write this type")

// parseType parses a type as system.columns gives it. LowCardinality(T)
// is written as T (RowBinary carries no dictionary).
func parseType(s string) (*chType, error) { return parseTypeDepth(strings.TrimSpace(s), 0) }

func parseTypeDepth(s string, depth int) (*chType, error) {
	if depth > 16 {
		return nil, fmt.Errorf("%s: nested too deep: %w", s, errUnsupported)
	}
	t := &chType{name: s}
	if w, ok := ints[s]; ok {
		t.kind, t.bits, t.signed = kInt, w.bits, w.signed
		return t, nil
	}
	switch s {
	case "Float32":
		t.kind = kFloat32
		return t, nil
	case "Float64":
		t.kind = kFloat64
		return t, nil
	case "String":
		t.kind = kString
		return t, nil
	case "UUID":
		t.kind = kUUID
		return t, nil
	case "Date":
		t.kind = kDate
		return t, nil
	case "DateTime":
		t.kind, t.loc = kDateTime, time.UTC
		return t, nil
	}
	open := strings.IndexByte(s, '(')
	if open < 0 || !strings.HasSuffix(s, ")") {
		return nil, fmt.Errorf("%s: %w", s, errUnsupported)
	}
	head, arg := s[:open], s[open+1:len(s)-1]
	switch head {
	case "Nullable", "Array", "LowCardinality":
		elem, err := parseTypeDepth(strings.TrimSpace(arg), depth+1)
		if err != nil {
			return nil, err
		}
		if head == "LowCardinality" {
			elem.name = s
			return elem, nil
		}
		t.kind, t.elem = kNullable, elem
		if head == "Array" {
			t.kind = kArray
		}
		return t, nil
	case "FixedString":
		n, err := strconv.Atoi(strings.TrimSpace(arg))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: bad length: %w", s, errUnsupported)
		}
		t.kind, t.size = kFixedString, n
		return t, nil
	case "DateTime":
		zone, rest, err := unquote(strings.TrimSpace(arg))
		if err != nil || rest != "" {
			return nil, fmt.Errorf("%s: bad time zone: %w", s, errUnsupported)
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return nil, fmt.Errorf("%s: time zone %q: %w", s, zone, err)
		}
		t.kind, t.loc = kDateTime, loc
		return t, nil
	case "Decimal", "Decimal32", "Decimal64", "Decimal128":
		return parseDecimal(t, head, arg)
	case "Enum8", "Enum16":
		return parseEnum(t, head, arg)
	}
	return nil, fmt.Errorf("%s: %w", s, errUnsupported)
}

func parseDecimal(t *chType, head, arg string) (*chType, error) {
	parts := strings.Split(arg, ",")
	nums := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, errUnsupported)
		}
		nums[i] = n
	}
	switch {
	case head == "Decimal" && len(nums) == 2:
		t.size, t.scale = nums[0], nums[1]
	case head != "Decimal" && len(nums) == 1:
		t.size = map[string]int{"Decimal32": 9, "Decimal64": 18, "Decimal128": 38}[head]
		t.scale = nums[0]
	default:
		return nil, fmt.Errorf("%s: %w", t.name, errUnsupported)
	}
	if t.size < 1 || t.size > 38 || t.scale < 0 || t.scale > t.size {
		return nil, fmt.Errorf("%s: precision or scale out of range: %w", t.name, errUnsupported)
	}
	t.kind, t.bits = kDecimal, 128
	if t.size <= 9 {
		t.bits = 32
	} else if t.size <= 18 {
		t.bits = 64
	}
	return t, nil
}

// parseEnum parses `'name' = value, ...`.
func parseEnum(t *chType, head, arg string) (*chType, error) {
	t.kind, t.bits, t.signed = kEnum, 8, true
	if head == "Enum16" {
		t.bits = 16
	}
	t.enum, t.values = map[string]int64{}, map[int64]bool{}
	rest := strings.TrimSpace(arg)
	for rest != "" {
		name, after, err := unquote(rest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, errUnsupported)
		}
		after = strings.TrimSpace(after)
		if !strings.HasPrefix(after, "=") {
			return nil, fmt.Errorf("%s: %w", t.name, errUnsupported)
		}
		after = strings.TrimSpace(after[1:])
		end := strings.IndexByte(after, ',')
		if end < 0 {
			end = len(after)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(after[:end]), 10, t.bits)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, errUnsupported)
		}
		t.enum[name], t.values[v] = v, true
		rest = strings.TrimSpace(strings.TrimPrefix(after[end:], ","))
	}
	if len(t.enum) == 0 {
		return nil, fmt.Errorf("%s: no values: %w", t.name, errUnsupported)
	}
	return t, nil
}

// unquote reads a single-quoted ClickHouse string literal at the start
// of s and returns it and what follows.
func unquote(s string) (string, string, error) {
	if !strings.HasPrefix(s, "'") {
		return "", "", errors.New("not a quoted string")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'':
			return b.String(), s[i+1:], nil
		case '\\':
			i++
			if i == len(s) {
				return "", "", errors.New("unterminated string")
			}
			if r, ok := map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', '0': 0, 'b': '\b', 'f': '\f', 'a': '\a', 'v': '\v'}[s[i]]; ok {
				b.WriteByte(r)
			} else {
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated string")
}
