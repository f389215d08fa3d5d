package transform

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/jsonx"
)

// Transform changes one message.
type Transform interface {
	// Name is the transform's table name, such as "add_fields".
	Name() string
	// Apply changes m in place. schema is the format of m.Payload; Apply
	// returns the format after the change (the *_convert transforms
	// change it; the others return schema). keep is false to drop the
	// message. An error means the message cannot be transformed (the
	// runtime sends it to the dead-letter path).
	Apply(m *connector.Message, schema connector.Schema) (out connector.Schema, keep bool, err error)
}

// objectTransform is a transform of top-level JSON object members. A
// chain scans an object payload once for a run of them and writes it once
// after the run. Payloads that are not JSON objects pass them unchanged.
type objectTransform interface {
	Transform
	applyObject(o *object) (keep bool, err error)
}

// Spec is one configured transform table.
type Spec struct {
	Name   string
	Config map[string]any
	// Source names the file the table came from, for error messages;
	// relative schema paths in the table are resolved against its
	// directory.
	Source string
	// Lines are the lines in Source of the table's keys, by key path
	// within it (config.Transform.Lines); nil when unknown.
	Lines map[string]int
}

// buildContext is what a transform's constructor receives.
type buildContext struct {
	cfg     connector.PluginConfig
	baseDir string
}

func (b *buildContext) where() string {
	if b.cfg.Source == "" {
		return b.cfg.Table
	}
	return b.cfg.Source + ": " + b.cfg.Table
}

// exactlyOne is the check of a table that takes one of the keys names.
func exactlyOne(names ...string) func(v any) error {
	return func(v any) error {
		set, _ := v.(*connector.Settings)
		var got []string
		for _, n := range names {
			if set.Has(n) {
				got = append(got, n)
			}
		}
		switch len(got) {
		case 1:
			return nil
		case 0:
			return fmt.Errorf("expected one of the keys %s, got none", strings.Join(names, ", "))
		}
		return fmt.Errorf("expected one of the keys %s, got %s together", strings.Join(names, ", "), strings.Join(got, " and "))
	}
}

// which returns the one of names that set has (a table exactlyOne
// checked).
func which(set *connector.Settings, names ...string) string {
	for _, n := range names {
		if set.Has(n) {
			return n
		}
	}
	return ""
}

type factory func(b *buildContext) (Transform, error)

var factories = map[string]factory{
	"add_fields":          newAddFields,
	"delete_fields":       newDeleteFields,
	"filter_fields":       newFilterFields,
	"update_fields":       newUpdateFields,
	"unwrap_envelope":     newUnwrapEnvelope,
	"avro_convert":        newAvroConvert,
	"proto_convert":       newProtoConvert,
	"flat_buffer_convert": newFlatBufferConvert,
	"wasm":                newWasm,
	"plugin":              newPlugin,
}

// aliases are other spellings of transform names.
var aliases = map[string]string{"flatbuffer_convert": "flat_buffer_convert"}

// Names lists the transforms this build knows, sorted.
func Names() []string {
	out := make([]string, 0, len(factories))
	for n := range factories {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Chain is a list of transforms applied in order.
type Chain []Transform

// Build makes a chain from specs. An unknown name or a bad table is an error
// naming the source file and the table key.
func Build(specs []Spec) (Chain, error) {
	var chain Chain
	for _, s := range specs {
		name := s.Name
		if a, ok := aliases[name]; ok {
			name = a
		}
		f, ok := factories[name]
		if !ok {
			return nil, fmt.Errorf("%s: transforms.%s is not a known transform (known: %v)", s.Source, s.Name, Names())
		}
		values := make(map[string]any, len(s.Config))
		for k, v := range s.Config {
			if k != "enabled" {
				values[k] = v
			}
		}
		b := &buildContext{cfg: connector.PluginConfig{Values: values, Source: s.Source, Table: "transforms." + s.Name,
			Lines: s.Lines}}
		if s.Source != "" {
			b.baseDir = filepath.Dir(s.Source)
		}
		t, err := f(b)
		if err != nil {
			_ = chain.Close()
			return nil, err
		}
		chain = append(chain, t)
	}
	return chain, nil
}

// Apply runs every transform on m in order and stops at the first that
// drops the message or fails. It returns the payload's schema after the
// chain.
func (c Chain) Apply(m *connector.Message, schema connector.Schema) (connector.Schema, bool, error) {
	return c.apply(m, schema, nil, false)
}

// apply is Apply writing changed payloads into out's chunks (a new buffer
// each when out is nil); checked says m's payload is known to be valid
// JSON, until a transform other than the object ones changes it.
func (c Chain) apply(m *connector.Message, schema connector.Schema, out *payloadArena, checked bool) (connector.Schema, bool, error) {
	for i := 0; i < len(c); {
		ot, isObject := c[i].(objectTransform)
		if !isObject {
			out, keep, err := c[i].Apply(m, schema)
			if err != nil {
				return schema, false, fmt.Errorf("transform %s: %w", c[i].Name(), err)
			}
			checked = false // what it made is not checked
			if !keep {
				return out, false, nil
			}
			schema = out
			i++
			continue
		}
		if !isJSON(schema) || !jsonx.IsObject(m.Payload) {
			i++ // as upstream: other payloads pass through
			continue
		}
		o, err := getObjectOf(m.Payload, checked)
		if err != nil {
			return schema, false, fmt.Errorf("transform %s: %w", ot.Name(), err)
		}
		keep := true
		for keep && i < len(c) && o.replaced == nil {
			if ot, isObject = c[i].(objectTransform); !isObject {
				break
			}
			if keep, err = ot.applyObject(o); err != nil {
				putObject(o)
				return schema, false, fmt.Errorf("transform %s: %w", ot.Name(), err)
			}
			i++
		}
		m.Payload = o.resultIn(out)
		putObject(o)
		if !keep {
			return schema, false, nil
		}
	}
	return schema, true, nil
}

// applyObjectTransform is Apply for a single object transform.
func applyObjectTransform(t objectTransform, m *connector.Message, schema connector.Schema) (connector.Schema, bool, error) {
	return Chain{t}.Apply(m, schema)
}

func isJSON(s connector.Schema) bool { return s == connector.SchemaJSON || s == "" }
