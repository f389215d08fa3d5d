package runtime

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/jsonx"
)

// Message keys of a source's streams (key_field, key_template and
// key_required of a [[streams]] entry, config/keys.go; the convention is
// iggy.KeyHeader, docs/keys.md). encode and route call applyKey on each
// converted message just before it is sent: a message that already has a
// key header (from the source or a transform) keeps it; otherwise the
// key is read from the JSON payload in the stream's schema and set as a
// string KeyHeader. keyPartitioning makes the stream's producer route
// each message by that header.

// applyKey gives m the key k derives from its payload when m has no key
// yet. The error, with key_required or a key Iggy would refuse, is the
// message's rejection (on_error decides).
func applyKey(k *config.StreamKey, m *iggy.Message) error {
	if _, ok := m.Key(); ok {
		return nil
	}
	if !k.HasKeyRule() {
		if k.KeyRequired {
			return fmt.Errorf("key_required = true: the message has no %q header with a string or raw value (and the stream sets no key_field or key_template)", iggy.KeyHeader)
		}
		return nil
	}
	key, missing, err := deriveKey(k, m.Payload)
	if err != nil {
		return err
	}
	if key == "" {
		if k.KeyRequired {
			return fmt.Errorf("key_required = true: %s", missing)
		}
		return nil
	}
	if len(key) > 255 {
		return fmt.Errorf("the key from the payload is %d bytes; a %q header holds at most 255", len(key), iggy.KeyHeader)
	}
	// Clip: m.Headers may share its array with the source's message,
	// which other streams convert too.
	m.Headers = append(slices.Clip(m.Headers), header.New(iggy.KeyHeader, header.StringValue(key)))
	return nil
}

// deriveKey is the key k's rule reads from payload; "" and why when the
// payload gives none.
func deriveKey(k *config.StreamKey, payload []byte) (key, missing string, err error) {
	if k.KeyField != "" {
		v, why := jsonField(payload, k.KeyField.Segments())
		if v == "" {
			return "", fmt.Sprintf("key_field %q: %s", k.KeyField, why), nil
		}
		return v, "", nil
	}
	parts, err := templateParts(k.KeyTemplate)
	if err != nil {
		return "", "", fmt.Errorf("key_template: %w", err)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Field == "" {
			b.WriteString(p.Literal)
			continue
		}
		v, why := jsonField(payload, p.Field.Segments())
		if v == "" {
			return "", fmt.Sprintf("key_template %q: field %q: %s", k.KeyTemplate, p.Field, why), nil
		}
		b.WriteString(v)
	}
	return b.String(), "", nil
}

// templates caches parsed key templates (config.KeyTemplate -> []config.KeyPart).
var templates sync.Map

func templateParts(t config.KeyTemplate) ([]config.KeyPart, error) {
	if v, ok := templates.Load(t); ok {
		return v.([]config.KeyPart), nil
	}
	parts, err := t.Parts()
	if err != nil {
		return nil, err
	}
	templates.Store(t, parts)
	return parts, nil
}

// jsonField is the key text of the value at path in the JSON object
// payload: a string as it is, a number as its literal, a bool as "true"
// or "false". "" and why for anything else (no object, no such member,
// null, an object, an array, an empty string).
func jsonField(payload []byte, path []string) (string, string) {
	var ms []jsonx.Member
	v := payload
	for i, name := range path {
		var err error
		if ms, err = jsonx.ScanObject(v, ms[:0]); err != nil {
			if i == 0 {
				return "", fmt.Sprintf("the payload is not a JSON object (%v)", err)
			}
			return "", fmt.Sprintf("%q is not an object", strings.Join(path[:i], "."))
		}
		found := false
		for j := len(ms) - 1; j >= 0; j-- { // the last of duplicate names, as encoding/json
			if ms[j].KeyIs(name) {
				v, found = ms[j].Value, true
				break
			}
		}
		if !found {
			return "", fmt.Sprintf("the payload has no %q", strings.Join(path[:i+1], "."))
		}
	}
	switch kind := jsonx.KindOf(v); kind {
	case jsonx.String:
		s, err := jsonx.Unquote(v)
		if err != nil {
			return "", fmt.Sprintf("the string does not decode: %v", err)
		}
		if s == "" {
			return "", "the value is an empty string"
		}
		return s, ""
	case jsonx.Number, jsonx.Bool:
		return string(v), ""
	default:
		return "", fmt.Sprintf("the value is %s, not a string, number or boolean", kind)
	}
}

// messageKey is a message's key for partitioning: the KeyHeader's bytes.
func messageKey(m *iggy.Message) []byte {
	if v, ok := m.Key(); ok {
		return v.Data
	}
	return nil
}

// keyPartitioning are the producer options of stream p: with a key rule,
// every message goes to its key's partition (iggy.WithMessageKey; a
// message without a key is balanced, as without a rule).
func keyPartitioning(p *config.ProducerStream) []iggy.ProducerOption {
	if !p.HasKeyRule() {
		return nil
	}
	return []iggy.ProducerOption{iggy.WithMessageKey(messageKey)}
}
