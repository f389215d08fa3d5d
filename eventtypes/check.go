package eventtypes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ferryhq/ferry/config"
)

// Severities of a Finding.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Finding is one result of Check or Compare.
type Finding struct {
	Severity string `json:"severity"`
	Type     string `json:"type"`
	// Pointer is where in the schema, for a schema change.
	Pointer string `json:"pointer,omitempty"`
	Message string `json:"message"`
}

func (f Finding) String() string {
	where := f.Type
	if f.Pointer != "" {
		where += " at " + f.Pointer
	}
	return fmt.Sprintf("%s: %s: %s", f.Severity, where, f.Message)
}

// HasErrors reports whether any finding is an error.
func HasErrors(fs []Finding) bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return f.Severity == SeverityError })
}

// Check reports consumers of types that nobody produces, or that are
// produced only on other topics (errors), types nobody consumes, and
// declarations in connectors' specs overridden by one with a different
// schema (warnings), sorted by type.
func (c *Catalog) Check() []Finding {
	var out []Finding
	for _, t := range c.Types {
		for _, e := range t.Consumers {
			switch {
			case len(t.Producers) == 0:
				out = append(out, Finding{SeverityError, t.Name, "", fmt.Sprintf("%s consumes it, but nobody produces it (no source stream lists it in produces, and its entry names no topic)", e)})
			case !c.producedFor(t, e):
				out = append(out, Finding{SeverityError, t.Name, "", fmt.Sprintf("%s consumes it, but it is produced only on %s", e, addresses(t.Producers))})
			}
		}
		out = append(out, shadowedFindings(t)...)
		if len(t.Consumers) == 0 {
			if len(t.Producers) == 0 {
				out = append(out, Finding{SeverityWarning, t.Name, "", "declared, but nobody produces or consumes it"})
			} else {
				out = append(out, Finding{SeverityWarning, t.Name, "", fmt.Sprintf("produced by %s, but nobody consumes it", endpoints(t.Producers))})
			}
		}
	}
	return out
}

// producedFor reports whether t is produced on a topic that consumer e,
// or another topic of the same connector stream entry that also lists t,
// reads: one entry's consumes applies to all its topics, and it is
// enough that each type arrives on one of them.
func (c *Catalog) producedFor(t *Type, e Endpoint) bool {
	for _, o := range t.Consumers {
		if o.Kind != e.Kind || o.Key != e.Key || o.Stream != e.Stream {
			continue
		}
		if slices.ContainsFunc(t.Producers, func(p Endpoint) bool { return p.Address() == o.Address() }) {
			return true
		}
	}
	return false
}

func addresses(es []Endpoint) string {
	var out []string
	for _, e := range es {
		if a := e.Address(); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return strings.Join(out, ", ")
}

func endpoints(es []Endpoint) string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.String()
	}
	return strings.Join(out, ", ")
}

// Compare reports the changes from old to new that break a consumer:
// for each type consumed in new (or in old, when it was removed), see
// the package documentation. Sorted by type, then pointer.
func Compare(old, new *Catalog) []Finding {
	var out []Finding
	for _, ot := range old.Types {
		nt := new.Get(ot.Name)
		if nt == nil {
			if len(ot.Consumers) > 0 {
				out = append(out, Finding{SeverityError, ot.Name, "", fmt.Sprintf("removed, but %s consumed it", endpoints(ot.Consumers))})
			}
			continue
		}
		if len(nt.Consumers) == 0 && len(ot.Consumers) == 0 {
			continue
		}
		out = append(out, compareType(ot, nt)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].Pointer < out[j].Pointer
	})
	return out
}

func compareType(ot, nt *Type) []Finding {
	if ot.Format != nt.Format {
		return []Finding{{SeverityError, nt.Name, "", fmt.Sprintf("its schema format changed from %s to %s", ot.Format, nt.Format)}}
	}
	if bytes.Equal(ot.Schema, nt.Schema) {
		return nil
	}
	if len(nt.Schema) == 0 {
		return nil // no schema now: anything is accepted
	}
	var od, nd any
	if len(ot.Schema) == 0 {
		od = map[string]any{}
	} else if err := json.Unmarshal(ot.Schema, &od); err != nil {
		return []Finding{{SeverityWarning, nt.Name, "", "the previous schema is not JSON; not compared"}}
	}
	if err := json.Unmarshal(nt.Schema, &nd); err != nil {
		return []Finding{{SeverityWarning, nt.Name, "", "the schema is not JSON; not compared"}}
	}
	d := &differ{name: nt.Name, oldRoot: od, newRoot: nd}
	switch nt.Format {
	case config.EventFormatJSONSchema:
		d.jsonSchema("", od, nd, 0)
	case config.EventFormatAvro:
		d.avro("", od, nd, 0)
	case config.EventFormatProto:
		d.add(SeverityWarning, "", "the .proto schema changed; Protobuf schemas are not compared field by field")
	}
	return d.out
}

type differ struct {
	name             string
	oldRoot, newRoot any
	out              []Finding
	steps            int // schemas visited, bounded by maxSteps
}

func (d *differ) add(sev, ptr, format string, args ...any) {
	d.out = append(d.out, Finding{sev, d.name, ptr, fmt.Sprintf(format, args...)})
}

// maxDepth and maxSteps bound the comparison of nested (or recursive,
// through $ref) schemas.
const (
	maxDepth = 32
	maxSteps = 10000
)

// visit counts a schema visited; false when the budget is spent.
func (d *differ) visit(depth int) bool {
	d.steps++
	return depth <= maxDepth && d.steps <= maxSteps
}

// jsonSchema compares two JSON Schemas at ptr (a pointer into the
// payload, properties and items as their names).
func (d *differ) jsonSchema(ptr string, o, n any, depth int) {
	if !d.visit(depth) {
		return
	}
	om, _ := deref(d.oldRoot, o).(map[string]any)
	nm, _ := deref(d.newRoot, n).(map[string]any)
	if om == nil || nm == nil {
		if b, ok := deref(d.newRoot, n).(bool); ok && !b {
			d.add(SeverityError, ptr, "the schema is now false: nothing is accepted")
		}
		return
	}
	ot, nt := typeSet(om["type"]), typeSet(nm["type"])
	if len(nt) > 0 {
		var lost []string
		for _, t := range ot {
			if !slices.Contains(nt, t) && !(t == "integer" && slices.Contains(nt, "number")) {
				lost = append(lost, t)
			}
		}
		switch {
		case len(ot) == 0:
			d.add(SeverityError, ptr, "a type is now required: %s (any type was accepted)", strings.Join(nt, " or "))
		case len(lost) > 0:
			d.add(SeverityError, ptr, "type changed from %s to %s", strings.Join(ot, " or "), strings.Join(nt, " or "))
		}
	}
	oreq, nreq := stringSet(om["required"]), stringSet(nm["required"])
	oprops, _ := om["properties"].(map[string]any)
	nprops, _ := nm["properties"].(map[string]any)
	for _, r := range oreq {
		_, still := nprops[r]
		switch {
		case !still && oprops != nil && nprops != nil && oprops[r] != nil:
			d.add(SeverityError, child(ptr, r), "the required property %q was removed", r)
		case !slices.Contains(nreq, r):
			d.add(SeverityError, child(ptr, r), "the property %q was required and is now optional: a consumer relying on it breaks", r)
		}
	}
	for _, r := range nreq {
		if !slices.Contains(oreq, r) {
			d.add(SeverityError, child(ptr, r), "the property %q is newly required: messages without it (older ones, replayed) are refused", r)
		}
	}
	for _, k := range sortedKeys(oprops) {
		if nv, ok := nprops[k]; ok {
			d.jsonSchema(child(ptr, k), oprops[k], nv, depth+1)
		}
	}
	if oe, ne := om["enum"], nm["enum"]; ne != nil {
		oa, _ := oe.([]any)
		na, _ := ne.([]any)
		for _, v := range oa {
			if !slices.ContainsFunc(na, func(x any) bool { return jsonEqual(x, v) }) {
				d.add(SeverityError, ptr, "the enum value %s was removed", jsonText(v))
			}
		}
	}
	if b, ok := nm["additionalProperties"].(bool); ok && !b {
		if ob, ok := om["additionalProperties"].(bool); !ok || ob {
			d.add(SeverityError, ptr, "additionalProperties is now false: members not listed are refused")
		}
	}
	if oi, ok := om["items"]; ok {
		if ni, ok := nm["items"]; ok {
			d.jsonSchema(ptr+"/*", oi, ni, depth+1)
		}
	}
}

// deref follows a local $ref ("#/$defs/x") in root.
func deref(root, v any) any {
	for range 8 {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok || !strings.HasPrefix(ref, "#") {
			return v
		}
		v = lookup(root, strings.TrimPrefix(ref, "#"))
	}
	return v
}

func lookup(root any, ptr string) any {
	if ptr == "" {
		return root
	}
	cur := root
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	return cur
}

func child(ptr, name string) string { return ptr + "/" + escapePtr(name) }

func typeSet(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		return stringSet(x)
	}
	return nil
}

func stringSet(v any) []string {
	a, _ := v.([]any)
	var out []string
	for _, e := range a {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonEqual(a, b any) bool { return jsonText(a) == jsonText(b) }

// avro compares two Avro schemas: records by field name, enums by
// symbol, other types by their JSON.
func (d *differ) avro(ptr string, o, n any, depth int) {
	if !d.visit(depth) {
		return
	}
	om, _ := o.(map[string]any)
	nm, _ := n.(map[string]any)
	if om == nil || nm == nil || om["type"] != nm["type"] {
		if !jsonEqual(o, n) {
			d.add(SeverityError, ptr, "type changed from %s to %s", jsonText(o), jsonText(n))
		}
		return
	}
	switch om["type"] {
	case "record":
		of, nf := avroFields(om), avroFields(nm)
		for _, name := range sortedKeys(of) {
			nfld, ok := nf[name]
			if !ok {
				d.add(SeverityError, child(ptr, name), "the field %q was removed", name)
				continue
			}
			d.avro(child(ptr, name), of[name]["type"], nfld["type"], depth+1)
		}
		for _, name := range sortedKeys(nf) {
			if _, ok := of[name]; !ok {
				if _, hasDefault := nf[name]["default"]; !hasDefault {
					d.add(SeverityError, child(ptr, name), "the new field %q has no default: older messages cannot be read with this schema", name)
				}
			}
		}
	case "enum":
		ns := stringSet(nm["symbols"])
		for _, s := range stringSet(om["symbols"]) {
			if !slices.Contains(ns, s) {
				d.add(SeverityError, ptr, "the enum symbol %q was removed", s)
			}
		}
	case "array":
		d.avro(ptr+"/*", om["items"], nm["items"], depth+1)
	case "map":
		d.avro(ptr+"/*", om["values"], nm["values"], depth+1)
	default:
		if !jsonEqual(o, n) {
			d.add(SeverityError, ptr, "type changed from %s to %s", jsonText(o), jsonText(n))
		}
	}
}

func avroFields(m map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	fs, _ := m["fields"].([]any)
	for _, f := range fs {
		if fm, ok := f.(map[string]any); ok {
			if name, ok := fm["name"].(string); ok {
				out[name] = fm
			}
		}
	}
	return out
}
