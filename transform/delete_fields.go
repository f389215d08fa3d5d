package transform

import (
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/jsonx"
)

// deleteFields is upstream's delete_fields: remove top-level fields of a
// JSON object by name, and (as in upstream's pattern-aware version) the
// fields that match one of the patterns.
//
//	[transforms.delete_fields]
//	fields = ["password", "internal_id"]
//	[[transforms.delete_fields.patterns]]
//	key_pattern = { starts_with = "tmp_" }
type deleteFields struct {
	fields   []string
	patterns []fieldPattern
}

var deleteFieldsSpec = connector.NewSpec(
	connector.NewStringListField("fields").WithDoc("the top-level fields to remove"),
	patternsField.WithDoc("the top-level fields to remove that match one of these"),
)

func newDeleteFields(b *buildContext) (Transform, error) {
	set, err := deleteFieldsSpec.Parse(b.cfg)
	if err != nil {
		return nil, err
	}
	ps, err := compilePatterns(set.Objects("patterns"))
	if err != nil {
		return nil, err
	}
	return &deleteFields{fields: set.Strings("fields"), patterns: ps}, nil
}

func (t *deleteFields) Name() string { return "delete_fields" }

func (t *deleteFields) Apply(m *connector.Message, schema connector.Schema) (connector.Schema, bool, error) {
	return applyObjectTransform(t, m, schema)
}

func (t *deleteFields) applyObject(o *object) (bool, error) {
	for i := range o.members {
		m := &o.members[i]
		if m.Value == nil {
			continue
		}
		if t.matchesName(m) || len(t.patterns) > 0 && anyMatches(t.patterns, m) {
			o.remove(i)
		}
	}
	return true, nil
}

func (t *deleteFields) matchesName(m *jsonx.Member) bool {
	for _, f := range t.fields {
		if m.KeyIs(f) {
			return true
		}
	}
	return false
}
