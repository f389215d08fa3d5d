package transform

import (
	"github.com/ferryhq/ferry/connector"
)

// unwrapEnvelope is upstream's unwrap_envelope: replace a JSON object
// payload with the value of one of its top-level fields, such as the
// "data" of a database record envelope. A payload without the field, or
// that is not an object, passes through unchanged.
//
//	[transforms.unwrap_envelope]
//	field = "data"
type unwrapEnvelope struct {
	field string
}

var unwrapEnvelopeSpec = connector.NewSpec(
	connector.NewStringField("field").Require().WithDoc("the top-level field whose value becomes the payload"),
)

func newUnwrapEnvelope(b *buildContext) (Transform, error) {
	set, err := unwrapEnvelopeSpec.Parse(b.cfg)
	if err != nil {
		return nil, err
	}
	return &unwrapEnvelope{field: set.String("field")}, nil
}

func (t *unwrapEnvelope) Name() string { return "unwrap_envelope" }

func (t *unwrapEnvelope) Apply(m *connector.Message, schema connector.Schema) (connector.Schema, bool, error) {
	return applyObjectTransform(t, m, schema)
}

func (t *unwrapEnvelope) applyObject(o *object) (bool, error) {
	// The last member of that name wins, as in a JSON decoder.
	for i := len(o.members) - 1; i >= 0; i-- {
		if m := &o.members[i]; m.Value != nil && m.KeyIs(t.field) {
			o.replaced = m.Value
			break
		}
	}
	return true, nil
}
