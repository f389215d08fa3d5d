package config

import (
	"fmt"
	"strings"
)

// Message keys from JSON payloads (Ferry extension of a source's
// [[streams]] entry; the key convention is iggy.KeyHeader, see
// docs/keys.md):
//
//	[[streams]]
//	stream = "shop"
//	topic = "orders"
//	key_field = "customer.id"              # a top-level or dotted JSON path
//	# key_template = "{customer}-{region}"  # or fields joined with literal text
//	# key_required = true                  # no key: dead-letter (or stop), not send keyless
//
// The runtime applies them just before a message is sent, to messages
// that have no key header yet: the value at the path (a string as it is;
// a number or bool as its JSON text) becomes the message's string key.
// A payload that is not a JSON object, or lacks the field (or holds null,
// an object or an array there, or an empty string), gives no key: the
// message is sent without one, or, with key_required = true, rejected
// by the stream's on_error. key_required alone requires the key the
// source or a transform set.

// StreamKey holds the key keys of a source's [[streams]] entry.
type StreamKey struct {
	// KeyField is a dotted path into a JSON object payload: "id",
	// "user.id". A name with a '.' in it cannot be addressed.
	KeyField KeyPath `toml:"key_field" cfg:"noenv"`
	// KeyTemplate builds the key from fields: "{customer}-{region}";
	// each {path} is a KeyField path, "{{" and "}}" are literal braces.
	KeyTemplate KeyTemplate `toml:"key_template" cfg:"noenv"`
	// KeyRequired rejects a message that ends with no key.
	KeyRequired bool `toml:"key_required" cfg:"noenv"`
}

// HasKeyRule reports whether the stream derives keys from payloads.
func (k *StreamKey) HasKeyRule() bool { return k.KeyField != "" || k.KeyTemplate != "" }

// KeyPath is a dotted JSON path: names separated by '.', none empty.
type KeyPath string

// Segments splits the path at its dots.
func (k KeyPath) Segments() []string { return strings.Split(string(k), ".") }

// ParseKeyPath checks s as a KeyPath.
func ParseKeyPath(s string) (KeyPath, error) {
	if s == "" {
		return "", fmt.Errorf("expected a JSON field name or a dotted path such as \"user.id\", got an empty string")
	}
	for i, seg := range strings.Split(s, ".") {
		if seg == "" {
			return "", fmt.Errorf("%q has an empty name at part %d: expected names separated by single dots, such as \"user.id\"", s, i+1)
		}
	}
	return KeyPath(s), nil
}

func (k *KeyPath) bindFrom(b *binder, p path, v any) {
	s, ok := v.(string)
	if !ok {
		b.fail(p, "expected a JSON path such as \"user.id\", got %s", describe(v))
		return
	}
	kp, err := ParseKeyPath(s)
	if err != nil {
		b.fail(p, "%v", err)
		return
	}
	*k = kp
	keyExclusive(b, p, "key_template")
}

// KeyTemplate is literal text with {path} fields.
type KeyTemplate string

// KeyPart is a piece of a key template: Literal text, or the value at
// Field when Field is not empty.
type KeyPart struct {
	Literal string
	Field   KeyPath
}

// Parts parses t (checked when it was bound; an unchecked template's
// error is returned).
func (t KeyTemplate) Parts() ([]KeyPart, error) { return ParseKeyTemplate(string(t)) }

// ParseKeyTemplate splits s into literal text and fields: "{a}-{b.c}" is
// the field a, "-" and the field b.c. A template needs one field at
// least; "{{" and "}}" stand for literal braces.
func ParseKeyTemplate(s string) ([]KeyPart, error) {
	var parts []KeyPart
	var lit strings.Builder
	fields := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{', c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte(c)
			i++
		case c == '}':
			return nil, fmt.Errorf("%q: a '}' at byte %d closes no field (write \"}}\" for a literal brace)", s, i)
		case c == '{':
			end := strings.IndexByte(s[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("%q: the field opened at byte %d is not closed with '}'", s, i)
			}
			kp, err := ParseKeyPath(s[i+1 : i+1+end])
			if err != nil {
				return nil, fmt.Errorf("%q: the field at byte %d: %w", s, i, err)
			}
			if lit.Len() > 0 {
				parts = append(parts, KeyPart{Literal: lit.String()})
				lit.Reset()
			}
			parts = append(parts, KeyPart{Field: kp})
			fields++
			i += end + 1
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		parts = append(parts, KeyPart{Literal: lit.String()})
	}
	if fields == 0 {
		return nil, fmt.Errorf("%q has no {field}: expected a template such as \"{customer}-{region}\"", s)
	}
	return parts, nil
}

func (t *KeyTemplate) bindFrom(b *binder, p path, v any) {
	s, ok := v.(string)
	if !ok {
		b.fail(p, "expected a template such as \"{customer}-{region}\", got %s", describe(v))
		return
	}
	if _, err := ParseKeyTemplate(s); err != nil {
		b.fail(p, "%v", err)
		return
	}
	*t = KeyTemplate(s)
	keyExclusive(b, p, "key_field")
}

// keyExclusive fails p when its table also sets other: key_field and
// key_template are two ways to one key. Whichever of the two is bound
// second sees the first.
func keyExclusive(b *binder, p path, other string) {
	if len(p) == 0 {
		return
	}
	if b.has(p[:len(p)-1].key(other)) {
		b.fail(p, "give key_field or key_template, not both")
	}
}
