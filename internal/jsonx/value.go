package jsonx

import (
	"bytes"
	"math/big"
	"strconv"
	"sync"
)

// Kind is the type of a JSON value.
type Kind uint8

// Kinds of JSON values.
const (
	Invalid Kind = iota
	Null
	Bool
	Number
	String
	Array
	Object
)

func (k Kind) String() string {
	return [...]string{"invalid", "null", "boolean", "number", "string", "array", "object"}[k]
}

// KindOf returns the kind of the raw value v (no leading whitespace) from
// its first byte.
func KindOf(v []byte) Kind {
	if len(v) == 0 {
		return Invalid
	}
	switch c := v[0]; {
	case c == '"':
		return String
	case c == '{':
		return Object
	case c == '[':
		return Array
	case c == 't' || c == 'f':
		return Bool
	case c == 'n':
		return Null
	case c == '-' || c >= '0' && c <= '9':
		return Number
	}
	return Invalid
}

// Value is a parsed JSON value. Numbers keep their literal text, so that
// integers beyond float64 precision survive.
type Value struct {
	Kind Kind
	// Bool is a Bool's value.
	Bool bool
	// Str is a String's decoded text, or a Number's literal.
	Str string
	// Items are an Array's elements.
	Items []Value
	// Fields are an Object's members, in document order.
	Fields []Field
}

// Field is one member of an Object.
type Field struct {
	Name  string
	Value Value
}

// Get returns the last member named name (the one a JSON decoder keeps).
func (v *Value) Get(name string) (*Value, bool) {
	for i := len(v.Fields) - 1; i >= 0; i-- {
		if v.Fields[i].Name == name {
			return &v.Fields[i].Value, true
		}
	}
	return nil, false
}

// Parse parses one JSON document.
func Parse(b []byte) (Value, error) {
	if err := Check(b); err != nil {
		return Value{}, err
	}
	p := parsers.Get().(*parser)
	p.b = b
	v, _ := p.parse(SkipSpace(b, 0))
	p.b = nil
	if cap(p.items) <= 4096 && cap(p.fields) <= 4096 {
		parsers.Put(p)
	}
	return v, nil
}

var parsers = sync.Pool{New: func() any { return new(parser) }}

// parser builds values from validated input. Children gather on shared
// stacks and are copied into one exactly sized slice per container.
type parser struct {
	b      []byte
	items  []Value
	fields []Field
}

func (p *parser) parse(i int) (Value, int) {
	b := p.b
	switch b[i] {
	case '"':
		end, _ := SkipString(b, i)
		s, _ := unquoteBody(b[i+1 : end-1])
		return Value{Kind: String, Str: s}, end
	case 't':
		return Value{Kind: Bool, Bool: true}, i + 4
	case 'f':
		return Value{Kind: Bool}, i + 5
	case 'n':
		return Value{Kind: Null}, i + 4
	case '[':
		i = SkipSpace(b, i+1)
		if b[i] == ']' {
			return Value{Kind: Array, Items: []Value{}}, i + 1
		}
		base := len(p.items)
		for {
			var item Value
			item, i = p.parse(i)
			p.items = append(p.items, item)
			i = SkipSpace(b, i)
			if b[i] == ']' {
				v := Value{Kind: Array, Items: append([]Value(nil), p.items[base:]...)}
				clear(p.items[base:])
				p.items = p.items[:base]
				return v, i + 1
			}
			i = SkipSpace(b, i+1)
		}
	case '{':
		i = SkipSpace(b, i+1)
		if b[i] == '}' {
			return Value{Kind: Object, Fields: []Field{}}, i + 1
		}
		base := len(p.fields)
		for {
			end, _ := SkipString(b, i)
			name, _ := unquoteBody(b[i+1 : end-1])
			i = SkipSpace(b, SkipSpace(b, end)+1)
			var fv Value
			fv, i = p.parse(i)
			p.fields = append(p.fields, Field{Name: name, Value: fv})
			i = SkipSpace(b, i)
			if b[i] == '}' {
				v := Value{Kind: Object, Fields: append([]Field(nil), p.fields[base:]...)}
				clear(p.fields[base:])
				p.fields = p.fields[:base]
				return v, i + 1
			}
			i = SkipSpace(b, i+1)
		}
	default:
		end, _ := SkipNumber(b, i)
		return Value{Kind: Number, Str: string(b[i:end])}, end
	}
}

// Append writes v as compact JSON.
func (v *Value) Append(dst []byte) []byte {
	switch v.Kind {
	case Null:
		return append(dst, "null"...)
	case Bool:
		return strconv.AppendBool(dst, v.Bool)
	case Number:
		return append(dst, v.Str...)
	case String:
		return AppendString(dst, v.Str)
	case Array:
		dst = append(dst, '[')
		for i := range v.Items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = v.Items[i].Append(dst)
		}
		return append(dst, ']')
	case Object:
		dst = append(dst, '{')
		for i := range v.Fields {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, v.Fields[i].Name)
			dst = append(dst, ':')
			dst = v.Fields[i].Value.Append(dst)
		}
		return append(dst, '}')
	}
	return append(dst, "null"...)
}

// IsInteger reports whether a number literal has no fraction or exponent.
func IsInteger(lit string) bool {
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return lit != ""
}

// Equal reports whether two values are equal: numbers by value (integers
// exactly, others as float64), strings by their decoded text, objects by
// their members regardless of order.
func Equal(a, b *Value) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case Null:
		return true
	case Bool:
		return a.Bool == b.Bool
	case String:
		return a.Str == b.Str
	case Number:
		return NumbersEqual(a.Str, b.Str)
	case Array:
		if len(a.Items) != len(b.Items) {
			return false
		}
		for i := range a.Items {
			if !Equal(&a.Items[i], &b.Items[i]) {
				return false
			}
		}
		return true
	case Object:
		if len(a.Fields) != len(b.Fields) {
			return false
		}
		for i := range a.Fields {
			bv, ok := b.Get(a.Fields[i].Name)
			if !ok || !Equal(&a.Fields[i].Value, bv) {
				return false
			}
		}
		return true
	}
	return false
}

// NumbersEqual compares two number literals by value.
func NumbersEqual(a, b string) bool {
	if a == b {
		return true
	}
	if IsInteger(a) && IsInteger(b) {
		x, ok1 := new(big.Int).SetString(a, 10)
		y, ok2 := new(big.Int).SetString(b, 10)
		return ok1 && ok2 && x.Cmp(y) == 0
	}
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && x == y
}

// EqualRaw compares two raw JSON values; a value that fails to parse is
// equal to nothing.
func EqualRaw(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, err := Parse(a)
	if err != nil {
		return false
	}
	vb, err := Parse(b)
	if err != nil {
		return false
	}
	return Equal(&va, &vb)
}
