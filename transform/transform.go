package transform

import (
	"fmt"
	"sort"

	"github.com/ferryhq/ferry/connector"
)

// Transform changes one message.
type Transform interface {
	// Name is the transform's table name, such as "add_fields".
	Name() string
	// Apply changes m in place. It returns false to drop the message. An
	// error means the message cannot be transformed (the runtime sends it
	// to the dead-letter path).
	Apply(m *connector.Message, schema connector.Schema) (keep bool, err error)
}

// Spec is one configured transform table.
type Spec struct {
	Name   string
	Config map[string]any
	// Source names the file the table came from, for error messages.
	Source string
}

type factory func(cfg connector.PluginConfig) (Transform, error)

var factories = map[string]factory{
	"add_fields": newAddFields,
}

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
		f, ok := factories[s.Name]
		if !ok {
			return nil, fmt.Errorf("%s: transforms.%s is not a known transform (known: %v)", s.Source, s.Name, Names())
		}
		values := make(map[string]any, len(s.Config))
		for k, v := range s.Config {
			if k != "enabled" {
				values[k] = v
			}
		}
		t, err := f(connector.PluginConfig{Values: values, Source: s.Source, Table: "transforms." + s.Name})
		if err != nil {
			return nil, err
		}
		chain = append(chain, t)
	}
	return chain, nil
}

// Apply runs every transform on m in order and stops at the first that
// drops the message or fails.
func (c Chain) Apply(m *connector.Message, schema connector.Schema) (bool, error) {
	for _, t := range c {
		keep, err := t.Apply(m, schema)
		if err != nil {
			return false, fmt.Errorf("transform %s: %w", t.Name(), err)
		}
		if !keep {
			return false, nil
		}
	}
	return true, nil
}
