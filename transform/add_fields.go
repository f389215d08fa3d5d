package transform

import (
	"fmt"

	"github.com/ferryhq/ferry/connector"
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
	fields []setField
}

// setField is a key and the value to give it.
type setField struct {
	key   fieldKey
	value compiledValue
}

func newAddFields(b *buildContext) (Transform, error) {
	var c struct {
		Fields []struct {
			Key   string     `json:"key"`
			Value FieldValue `json:"value"`
		} `json:"fields"`
	}
	if err := b.cfg.Decode(&c); err != nil {
		return nil, err
	}
	t := &addFields{}
	for i, f := range c.Fields {
		where := fmt.Sprintf("%s.fields[%d]", b.where(), i)
		if f.Key == "" {
			return nil, fmt.Errorf("%s.key is required", where)
		}
		v, err := compileValue(f.Value, where+".value")
		if err != nil {
			return nil, err
		}
		t.fields = append(t.fields, setField{key: newFieldKey(f.Key), value: v})
	}
	return t, nil
}

func (t *addFields) Name() string { return "add_fields" }

func (t *addFields) Apply(m *connector.Message, schema connector.Schema) (connector.Schema, bool, error) {
	return applyObjectTransform(t, m, schema)
}

func (t *addFields) applyObject(o *object) (bool, error) {
	for i := range t.fields {
		f := &t.fields[i]
		o.set(&f.key, o.value(&f.value))
	}
	return true, nil
}
