package transform

import (
	"fmt"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/tidwall/sjson"
)

// addFields is upstream's add_fields: set top-level fields of a JSON object,
// replacing fields with the same key.
//
//	[transforms.add_fields]
//	enabled = true
//	[[transforms.add_fields.fields]]
//	key = "source"
//	value.static = "ferry"
//	[[transforms.add_fields.fields]]
//	key = "received_at"
//	value.computed = "timestamp_millis"
type addFields struct {
	fields []addField
}

type addField struct {
	path  string // sjson path with the key's special characters escaped
	value compiledValue
}

func newAddFields(cfg connector.PluginConfig) (Transform, error) {
	var c struct {
		Fields []struct {
			Key   string     `json:"key"`
			Value FieldValue `json:"value"`
		} `json:"fields"`
	}
	if err := cfg.Decode(&c); err != nil {
		return nil, err
	}
	t := &addFields{}
	for i, f := range c.Fields {
		where := fmt.Sprintf("%s: %s.fields[%d]", cfg.Source, cfg.Table, i)
		if f.Key == "" {
			return nil, fmt.Errorf("%s.key is required", where)
		}
		v, err := compileValue(f.Value, where+".value")
		if err != nil {
			return nil, err
		}
		t.fields = append(t.fields, addField{path: escapePath(f.Key), value: v})
	}
	return t, nil
}

func (t *addFields) Name() string { return "add_fields" }

func (t *addFields) Apply(m *connector.Message, schema connector.Schema) (bool, error) {
	if !isJSON(schema) || len(t.fields) == 0 || !isObject(m.Payload) {
		return true, nil
	}
	now := time.Now()
	p := m.Payload
	for _, f := range t.fields {
		var err error
		if p, err = sjson.SetRawBytes(p, f.path, f.value.bytes(now)); err != nil {
			return false, fmt.Errorf("set %s: %w", f.path, err)
		}
	}
	m.Payload = p
	return true, nil
}

func isJSON(s connector.Schema) bool { return s == connector.SchemaJSON || s == "" }

// isObject reports whether a JSON document is an object (its first
// non-space byte is '{'). Payloads are validated when decoded.
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

// escapePath makes a top-level key an sjson path that names exactly that
// key, whatever characters it holds.
func escapePath(key string) string {
	var b strings.Builder
	for _, r := range key {
		switch r {
		case '.', '*', '?', '|', '#', '@', '\\', '!', '=', '<', '>', '%', ':':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
