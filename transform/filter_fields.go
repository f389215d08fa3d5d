package transform

import (
	"github.com/ferryhq/ferry/connector"
)

// filterFields is upstream's filter_fields: keep the top-level fields of a
// JSON object that match a pattern (include_matching = true, the default)
// or drop them (include_matching = false); keys listed in keep_fields are
// always kept. It filters fields, never whole messages.
//
//	[transforms.filter_fields]
//	keep_fields = ["id"]
//	include_matching = true
//	[[transforms.filter_fields.patterns]]
//	key_pattern = { starts_with = "meta_" }
//	value_pattern = "is_string"
type filterFields struct {
	keep     []string
	patterns []fieldPattern
	include  bool
}

var filterFieldsSpec = connector.NewSpec(
	connector.NewStringListField("keep_fields").WithDoc("the top-level fields always kept"),
	patternsField.WithDoc("the patterns of the fields to keep or drop"),
	connector.NewBoolField("include_matching").WithDefault(true).
		WithDoc("keep the fields that match a pattern (true) or drop them (false)"),
)

func newFilterFields(b *buildContext) (Transform, error) {
	set, err := filterFieldsSpec.Parse(b.cfg)
	if err != nil {
		return nil, err
	}
	ps, err := compilePatterns(set.Objects("patterns"))
	if err != nil {
		return nil, err
	}
	return &filterFields{keep: set.Strings("keep_fields"), patterns: ps, include: set.Bool("include_matching")}, nil
}

func (t *filterFields) Name() string { return "filter_fields" }

func (t *filterFields) Apply(m *connector.Message, schema connector.Schema) (connector.Schema, bool, error) {
	return applyObjectTransform(t, m, schema)
}

func (t *filterFields) applyObject(o *object) (bool, error) {
	if len(t.keep) == 0 && len(t.patterns) == 0 {
		return true, nil // nothing to do, as upstream
	}
next:
	for i := range o.members {
		m := &o.members[i]
		if m.Value == nil {
			continue
		}
		for _, k := range t.keep {
			if m.KeyIs(k) {
				continue next
			}
		}
		if anyMatches(t.patterns, m) != t.include {
			o.remove(i)
		}
	}
	return true, nil
}
