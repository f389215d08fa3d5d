package transform

import (
	"fmt"

	"github.com/ferryhq/ferry/connector"
)

// updateFields is upstream's update_fields: set top-level fields of a JSON
// object when a condition on the key holds.
//
//	[[transforms.update_fields.fields]]
//	key = "status"
//	value.static = "seen"
//	condition = "key_exists"   # or "always" (the default), "key_not_exists"
type updateFields struct {
	fields []updateField
}

type updateField struct {
	setField
	cond condition
}

type condition uint8

const (
	always condition = iota
	keyExists
	keyNotExists
)

var conditions = map[string]condition{"always": always, "key_exists": keyExists, "key_not_exists": keyNotExists}

func newUpdateFields(b *buildContext) (Transform, error) {
	var c struct {
		Fields []struct {
			Key       string     `json:"key"`
			Value     FieldValue `json:"value"`
			Condition *string    `json:"condition"`
		} `json:"fields"`
	}
	if err := b.cfg.Decode(&c); err != nil {
		return nil, err
	}
	t := &updateFields{}
	for i, f := range c.Fields {
		where := fmt.Sprintf("%s.fields[%d]", b.where(), i)
		if f.Key == "" {
			return nil, fmt.Errorf("%s.key is required", where)
		}
		v, err := compileValue(f.Value, where+".value")
		if err != nil {
			return nil, err
		}
		cond := always
		if f.Condition != nil {
			var ok bool
			if cond, ok = conditions[*f.Condition]; !ok {
				return nil, fmt.Errorf("%s.condition: %q is not a condition (use always, key_exists, key_not_exists)", where, *f.Condition)
			}
		}
		t.fields = append(t.fields, updateField{setField{newFieldKey(f.Key), v}, cond})
	}
	return t, nil
}

func (t *updateFields) Name() string { return "update_fields" }

func (t *updateFields) Apply(m *connector.Message, schema connector.Schema) (connector.Schema, bool, error) {
	return applyObjectTransform(t, m, schema)
}

func (t *updateFields) applyObject(o *object) (bool, error) {
	for i := range t.fields {
		f := &t.fields[i]
		if f.cond != always {
			if present := o.has(f.key.name); present != (f.cond == keyExists) {
				continue
			}
		}
		o.set(&f.key, o.value(&f.value))
	}
	return true, nil
}
