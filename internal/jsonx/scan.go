package jsonx

import (
	"bytes"
	"errors"
	"fmt"
)

// maxDepth bounds nesting so that hostile input cannot exhaust the stack.
const maxDepth = 1000

// SyntaxError is malformed JSON at a byte offset.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

func syntaxErr(off int, format string, args ...any) error {
	return &SyntaxError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// ErrNotObject is returned by ScanObject for a document that is not an
// object.
var ErrNotObject = errors.New("JSON document is not an object")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first non-space byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// Valid reports whether b is exactly one JSON value, with optional
// surrounding whitespace.
func Valid(b []byte) bool { return Check(b) == nil }

// Check is Valid with an error that says where b is malformed.
func Check(b []byte) error {
	end, err := SkipValue(b, 0)
	if err != nil {
		return err
	}
	if end = SkipSpace(b, end); end != len(b) {
		return syntaxErr(end, "unexpected %q after the value", b[end])
	}
	return nil
}

// SkipValue validates the JSON value that starts at or after b[i] (leading
// whitespace allowed) and returns the index just past it.
func SkipValue(b []byte, i int) (int, error) { return skip(b, SkipSpace(b, i), 0) }

func skip(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, syntaxErr(i, "unexpected end of input, want a value")
	}
	switch c := b[i]; {
	case c == '"':
		return SkipString(b, i)
	case c == '{':
		return skipObject(b, i, depth+1)
	case c == '[':
		return skipArray(b, i, depth+1)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return SkipNumber(b, i)
	default:
		return i, syntaxErr(i, "unexpected %q, want a value", c)
	}
}

func literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, syntaxErr(i, "want %s", lit)
	}
	return i + len(lit), nil
}

// plain marks the bytes a string literal holds as they are.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// SkipString validates the string literal at b[i] (which must be '"') and
// returns the index past its closing quote.
func SkipString(b []byte, i int) (int, error) {
	start := i
	i++
	for i < len(b) {
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, syntaxErr(i, "unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return i, syntaxErr(i, `bad \u escape`)
				}
				i += 6
			default:
				return i, syntaxErr(i, "bad escape \\%c", b[i+1])
			}
		case c < 0x20:
			return i, syntaxErr(i, "control character 0x%02x in string", c)
		default:
			i++
		}
	}
	return start, syntaxErr(start, "unterminated string")
}

func isHex4(h []byte) bool {
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// SkipNumber validates the number literal at b[i] and returns the index
// past it.
func SkipNumber(b []byte, i int) (int, error) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return start, syntaxErr(start, "malformed number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return start, syntaxErr(start, "malformed number: no digits after '.'")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return start, syntaxErr(start, "malformed number: no exponent digits")
		}
	}
	return i, nil
}

func skipObject(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, syntaxErr(i, "nested deeper than %d", maxDepth)
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, syntaxErr(i, "want a member name")
		}
		var err error
		if i, err = SkipString(b, i); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, syntaxErr(i, "want ':' after a member name")
		}
		if i, err = skip(b, SkipSpace(b, i+1), depth); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, syntaxErr(i, "unterminated object")
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, syntaxErr(i, "want ',' or '}' in an object")
		}
	}
}

func skipArray(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return i, syntaxErr(i, "nested deeper than %d", maxDepth)
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = skip(b, i, depth); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, syntaxErr(i, "unterminated array")
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return i + 1, nil
		default:
			return i, syntaxErr(i, "want ',' or ']' in an array")
		}
	}
}

// Member is one member of a scanned object: the raw bytes of its name
// (between the quotes, still escaped) and of its value.
type Member struct {
	Key   []byte
	Value []byte
	// Escaped reports whether Key holds a backslash escape or non-ASCII
	// bytes, so that it must be decoded to be compared.
	Escaped bool
}

// KeyIs reports whether the member's decoded name equals key.
func (m *Member) KeyIs(key string) bool {
	if !m.Escaped {
		return string(m.Key) == key
	}
	return m.Name() == key
}

// Name returns the member's decoded name.
func (m *Member) Name() string {
	if !m.Escaped {
		return string(m.Key)
	}
	s, _ := unquoteBody(m.Key)
	return s
}

// ScanObject validates the object b (surrounding whitespace allowed) and
// appends its members, in order, to ms. It returns ErrNotObject, without
// validating, when b does not start with '{'.
func ScanObject(b []byte, ms []Member) ([]Member, error) { return scanObject(b, ms, false) }

// ScanObjectChecked is ScanObject for b already checked to be valid JSON
// (by Check, a source that validated each line, or a sink's decoder): the
// member names and the object's structure are read as ScanObject reads
// them, but each value is skipped without being validated again (a
// string by searching for its closing quote). On input that is not valid
// JSON it never panics, but may accept what ScanObject refuses.
func ScanObjectChecked(b []byte, ms []Member) ([]Member, error) { return scanObject(b, ms, true) }

func scanObject(b []byte, ms []Member, checked bool) ([]Member, error) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ms, ErrNotObject
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return ms, syntaxErr(i, "want a member name")
			}
			ks := i + 1
			escaped := false
			j := ks
			// Fast path for the usual name without escapes.
			for j < len(b) && b[j] != '"' && b[j] != '\\' && b[j] >= 0x20 && b[j] < 0x80 {
				j++
			}
			if j < len(b) && b[j] == '"' {
				j++
			} else {
				var err error
				if j, err = SkipString(b, i); err != nil {
					return ms, err
				}
				escaped = true
			}
			key := b[ks : j-1]
			i = SkipSpace(b, j)
			if i >= len(b) || b[i] != ':' {
				return ms, syntaxErr(i, "want ':' after a member name")
			}
			vs := SkipSpace(b, i+1)
			var ve int
			var err error
			if checked {
				ve, err = skipChecked(b, vs)
			} else {
				ve, err = skip(b, vs, 1)
			}
			if err != nil {
				return ms, err
			}
			ms = append(ms, Member{Key: key, Value: b[vs:ve], Escaped: escaped})
			i = SkipSpace(b, ve)
			if i >= len(b) {
				return ms, syntaxErr(i, "unterminated object")
			}
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return ms, syntaxErr(i, "want ',' or '}' in an object")
			}
			i = SkipSpace(b, i+1)
		}
	}
	if i = SkipSpace(b, i); i != len(b) {
		return ms, syntaxErr(i, "unexpected %q after the object", b[i])
	}
	return ms, nil
}

// skipChecked returns the index past the value at b[i] of a document
// known to be valid: a string ends at its first unescaped quote, an
// object or array at its matching bracket (strings inside skipped the
// same way), anything else at the next delimiter.
func skipChecked(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, syntaxErr(i, "unexpected end of input, want a value")
	}
	switch b[i] {
	case '"':
		return skipStringChecked(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, err := skipStringChecked(b, j)
				if err != nil {
					return j, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return len(b), syntaxErr(i, "unterminated %c", b[i])
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && !isSpace(b[j]) {
		j++
	}
	if j == i {
		return i, syntaxErr(i, "unexpected %q, want a value", b[i])
	}
	return j, nil
}

// skipStringChecked returns the index past the string at b[i] (a '"'),
// found with bytes.IndexByte: a quote ends it unless an odd number of
// backslashes precede it.
func skipStringChecked(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			break
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
	return i, syntaxErr(i, "unterminated string")
}

// IsObject reports whether the first non-space byte of b is '{'.
func IsObject(b []byte) bool {
	i := SkipSpace(b, 0)
	return i < len(b) && b[i] == '{'
}
