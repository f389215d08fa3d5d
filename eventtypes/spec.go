package eventtypes

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
)

// Event types a connector's spec declares (connector.Spec.Events): a
// built-in's, in code, or a plugin's, in its manifest's [[events]]
// tables. They join the catalog beside config.toml's [events]; see Build
// for who wins a name declared twice.

// addSpecTypes adds the types the specs of conns declare to c (whose
// Types are config.toml's so far) and records, in declared, which
// declarations apply to each connector. failed collects the names whose
// declaration did not build (reported here).
func (c *Catalog) addSpecTypes(conns []*config.Connector, spec func(*config.Connector) (*connector.Spec, error),
	declared map[*config.Connector][]connector.EventType, failed map[string]bool) config.Errors {
	var errs config.Errors
	byName := map[string]*Type{}
	fromConfig := map[string]bool{}
	for _, t := range c.Types {
		byName[t.Name], fromConfig[t.Name] = t, true
	}
	seen := map[[2]string]bool{} // name, origin: a declaration met already (one plugin, several connectors)
	for _, cc := range conns {
		if cc == nil || !cc.Enabled {
			continue
		}
		s, err := spec(cc)
		if err != nil {
			errs = append(errs, &config.FieldError{File: cc.File, Key: "path",
				Msg: fmt.Sprintf("cannot read the event types its connector declares: %v", err)})
			continue
		}
		if s == nil {
			continue
		}
		for i, d := range s.Events {
			if d.Origin == "" {
				d.Origin = fmt.Sprintf("the spec of connector %s", cc.PluginName())
			}
			if d.Key == "" {
				d.Key = fmt.Sprintf("events[%d]", i)
			}
			if err := d.Check(); err != nil {
				errs = append(errs, specErrors(d, err)...)
				if d.Name != "" {
					failed[d.Name] = true
				}
				continue
			}
			declared[cc] = append(declared[cc], d)
			if seen[[2]string{d.Name, d.Origin}] {
				continue
			}
			seen[[2]string{d.Name, d.Origin}] = true
			if t, ok := byName[d.Name]; ok {
				same := sameSchema(t, d)
				switch {
				case fromConfig[d.Name] || same:
					note := d.Origin
					if !same {
						note += " (a different schema)"
					}
					t.Shadowed = append(t.Shadowed, note)
				default:
					errs = append(errs, specError(d, "name", fmt.Sprintf(
						"event type %q is declared by %s too, with a different schema; this declaration is ignored "+
							"(declare the type in the runtime's config.toml as [events.%s] to choose its schema)",
						d.Name, t.Origin, quoteKey(d.Name))))
				}
				continue
			}
			if failed[d.Name] {
				continue
			}
			et := eventTypeOf(d)
			t, err := newType(&et)
			if err != nil {
				errs = append(errs, specError(d, schemaKey(&et), err.Error()))
				failed[d.Name] = true
				continue
			}
			t.Origin = d.Origin
			byName[d.Name] = t
			c.Types = append(c.Types, t)
		}
	}
	return errs
}

// eventTypeOf is a spec's declaration as a config.toml entry, which
// newType builds (without topics: a spec's topics narrow its own
// connector's streams only).
func eventTypeOf(d connector.EventType) config.EventType {
	return config.EventType{Name: d.Name, Description: d.Description, Version: d.Version, Format: d.Format,
		SchemaPath: d.SchemaPath, Schema: d.Schema, MessageType: d.MessageType, File: d.File}
}

// specError is a problem of declaration d at its key (events[0].schema):
// in its manifest, or, for a built-in, in its connector's spec (named in
// the message).
func specError(d connector.EventType, key, msg string) *config.FieldError {
	if d.File == "" {
		msg = d.Origin + ": " + msg
	}
	return &config.FieldError{File: d.File, Key: d.Key + "." + key, Msg: msg}
}

func specErrors(d connector.EventType, err error) config.Errors {
	var se connector.SettingErrors
	if !errors.As(err, &se) {
		return config.Errors{specError(d, "name", err.Error())}
	}
	out := make(config.Errors, 0, len(se))
	for _, e := range se {
		out = append(out, specError(d, e.Key, e.Msg))
	}
	return out
}

// sameSchema reports whether declaration d says what t says: the same
// format, message type and schema document (JSON compared as values).
func sameSchema(t *Type, d connector.EventType) bool {
	if t.Format != d.Format || t.MessageType != d.MessageType {
		return false
	}
	et := eventTypeOf(d)
	doc, err := loadSchema(&et)
	if err != nil {
		return false
	}
	if d.Format == config.EventFormatProto {
		var text string
		return json.Unmarshal(t.Schema, &text) == nil && text == string(doc)
	}
	if len(doc) == 0 || len(t.Schema) == 0 {
		return len(doc) == len(t.Schema)
	}
	var a, b any
	if json.Unmarshal(t.Schema, &a) != nil || json.Unmarshal(doc, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// shadowedFindings are Check's warnings for declarations overridden by
// one with a different schema.
func shadowedFindings(t *Type) []Finding {
	var out []Finding
	for _, s := range t.Shadowed {
		if origin, ok := strings.CutSuffix(s, " (a different schema)"); ok {
			out = append(out, Finding{SeverityWarning, t.Name, "",
				fmt.Sprintf("%s declares it with a different schema; %s's is used", origin, t.Origin)})
		}
	}
	return out
}
