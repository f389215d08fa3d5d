package transform

import (
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

var updateFieldsSpec = connector.NewSpec(
	connector.NewListField("fields", connector.NewObjectField("", keyField, valueField,
		connector.NewEnumField("condition", "always", "key_exists", "key_not_exists").WithDefault("always").
			WithDoc("when to set the field"),
	)).WithDoc("the fields to set, in order"),
)

func newUpdateFields(b *buildContext) (Transform, error) {
	set, err := updateFieldsSpec.Parse(b.cfg)
	if err != nil {
		return nil, err
	}
	t := &updateFields{}
	for _, f := range set.Objects("fields") {
		v, err := compileValue(f.Object("value"))
		if err != nil {
			return nil, err
		}
		t.fields = append(t.fields, updateField{setField{newFieldKey(f.String("key")), v}, conditions[f.String("condition")]})
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
