package eventtypes

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ferryhq/ferry/codec"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
)

// validator checks payloads against one type's schema.
type validator struct {
	json  *jsonschema.Schema // JSON Schema types
	codec codec.Codec        // Avro and Protobuf types (FromJSON is strict)
}

// Problem is one reason a payload does not match its type: where (a JSON
// pointer into the payload, "" for the whole payload) and what.
type Problem struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// ValidationError is a payload that does not match its event type.
type ValidationError struct {
	Type     string
	Problems []Problem
}

// maxProblems bounds the problems an error message lists.
const maxProblems = 5

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "event type %q: ", e.Type)
	for i, p := range e.Problems {
		if i == maxProblems {
			fmt.Fprintf(&b, "; and %d more", len(e.Problems)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		ptr := p.Pointer
		if ptr == "" {
			ptr = "/"
		}
		fmt.Fprintf(&b, "at %s: %s", ptr, p.Message)
	}
	return b.String()
}

// ErrUnknownType is returned for a type the catalog does not have.
var ErrUnknownType = errors.New("unknown event type")

// loadSchema reads a type's schema document: its JSON (JSON Schema,
// Avro) or its .proto text.
func loadSchema(et *config.EventType) (doc []byte, err error) {
	if et.SchemaPath == "" {
		return []byte(et.Schema), nil
	}
	b, err := os.ReadFile(et.SchemaPath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", et.SchemaPath, err)
	}
	return b, nil
}

// compile makes the validator of t from its schema document.
func compile(t *Type, et *config.EventType) (*validator, error) {
	switch t.Format {
	case config.EventFormatJSONSchema:
		if len(t.Schema) == 0 {
			return &validator{}, nil
		}
		return compileJSONSchema(t.Name, et.SchemaPath, t.Schema)
	case config.EventFormatAvro:
		c, err := codec.New(connector.SchemaAvro, codec.Options{AvroSchemaJSON: string(t.Schema), StrictJSON: true})
		if err != nil {
			return nil, err
		}
		return &validator{codec: c}, nil
	case config.EventFormatProto:
		c, err := codec.New(connector.SchemaProto, codec.Options{ProtoSchemaPath: et.SchemaPath, ProtoMessage: t.MessageType, StrictJSON: true})
		if err != nil {
			return nil, err
		}
		return &validator{codec: c}, nil
	}
	return nil, fmt.Errorf("format %q is not known", t.Format)
}

func compileJSONSchema(name, file string, doc []byte) (*validator, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	loc := "mem:///events/" + url.PathEscape(name) + ".json"
	if file != "" {
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, err
		}
		loc = (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Only files: a $ref never reaches the network.
	c.UseLoader(jsonschema.SchemeURLLoader{"file": jsonschema.FileLoader{}})
	if err := c.AddResource(loc, v); err != nil {
		return nil, err
	}
	s, err := c.Compile(loc)
	if err != nil {
		var sve *jsonschema.SchemaValidationError
		var ve *jsonschema.ValidationError
		if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
			var parts []string
			for _, p := range problems(ve) {
				parts = append(parts, "at "+cmp.Or(p.Pointer, "/")+": "+p.Message)
			}
			return nil, fmt.Errorf("the JSON Schema is not valid against its metaschema: %s", strings.Join(parts, "; "))
		}
		return nil, fmt.Errorf("the JSON Schema does not compile: %w", err)
	}
	return &validator{json: s}, nil
}

// validateJSON checks a JSON payload.
func (v *validator) validateJSON(name string, payload []byte) error {
	switch {
	case v.json != nil:
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
		if err != nil {
			return &ValidationError{Type: name, Problems: []Problem{{"", "the payload is not JSON: " + jsonReason(err)}}}
		}
		err = v.json.Validate(inst)
		if err == nil {
			return nil
		}
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return &ValidationError{Type: name, Problems: []Problem{{"", err.Error()}}}
		}
		return &ValidationError{Type: name, Problems: problems(ve)}
	case v.codec != nil:
		if _, err := v.codec.FromJSON(nil, payload); err != nil {
			return &ValidationError{Type: name, Problems: []Problem{{"", err.Error()}}}
		}
	default:
		if !json.Valid(payload) {
			return &ValidationError{Type: name, Problems: []Problem{{"", "the payload is not JSON"}}}
		}
	}
	return nil
}

// validateEncoded checks a payload in the type's own binary encoding.
func (v *validator) validateEncoded(name string, payload []byte) error {
	if err := v.codec.Validate(payload); err != nil {
		return &ValidationError{Type: name, Problems: []Problem{{"", err.Error()}}}
	}
	return nil
}

func jsonReason(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s)-i < 120 {
		return s[i+2:]
	}
	return s
}

// problems flattens a validation error to its leaves, each at its
// instance location.
func problems(ve *jsonschema.ValidationError) []Problem {
	var ps []Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		msg := e.Error()
		if u := e.BasicOutput(); u.Error != nil {
			msg = u.Error.String()
		}
		ps = append(ps, Problem{Pointer: pointer(e.InstanceLocation), Message: msg})
	}
	walk(ve)
	return ps
}

// pointer is the JSON pointer (RFC 6901) of tokens.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}
