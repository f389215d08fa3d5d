package transform

import (
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

var addFieldsSpec = connector.NewSpec(
	connector.NewListField("fields", connector.NewObjectField("", keyField, valueField)).
		WithDoc("the fields to set, in order"),
)

func newAddFields(b *buildContext) (Transform, error) {
	set, err := addFieldsSpec.Parse(b.cfg)
	if err != nil {
		return nil, err
	}
	t := &addFields{}
	for _, f := range set.Objects("fields") {
		v, err := compileValue(f.Object("value"))
		if err != nil {
			return nil, err
		}
		t.fields = append(t.fields, setField{key: newFieldKey(f.String("key")), value: v})
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
