package connector

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/internal/units"
)

// Describe writes a connector's reference as text: its names, summary,
// fields (type, default, required or secret, doc) and a sample
// configuration file that loads.
func Describe(w io.Writer, info Info) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %s\n", info.Name, info.Kind, info.Summary)
	if len(info.Aliases) > 0 {
		fmt.Fprintf(&b, "path may also be: %s\n", strings.Join(info.Aliases, ", "))
	}
	describeFields(&b, "plugin_config", info.Spec)
	describeEvents(&b, info)
	describeSample(&b, Sample(info))
	_, err := io.WriteString(w, b.String())
	return err
}

// describeEvents lists the event types the spec declares, if any.
func describeEvents(b *strings.Builder, info Info) {
	if info.Spec == nil || len(info.Spec.Events) == 0 {
		return
	}
	verb := "consumes"
	if info.Kind == KindSource {
		verb = "produces"
	}
	fmt.Fprintf(b, "\nevent types it %s:\n", verb)
	for _, e := range info.Spec.Events {
		head := e.Name
		if e.Version != "" {
			head += " " + e.Version
		}
		schema := "no schema"
		switch {
		case e.SchemaPath != "":
			schema = e.SchemaPath
		case e.Schema != "":
			schema = "inline schema"
		}
		on := "on all its topics"
		if len(e.Topics) > 0 {
			on = "on " + strings.Join(e.Topics, ", ")
		}
		fmt.Fprintf(b, "  %-26s %s, %s, %s\n", head, e.Format, schema, on)
		if e.Description != "" {
			fmt.Fprintf(b, "  %-26s %s\n", "", e.Description)
		}
	}
}

// DescribeTable writes the reference of a table checked by spec (a
// transform plugin's config) as Describe writes plugin_config, then the
// sample configuration given.
func DescribeTable(w io.Writer, table string, spec *Spec, sample string) error {
	var b strings.Builder
	describeFields(&b, table, spec)
	describeSample(&b, sample)
	_, err := io.WriteString(w, b.String())
	return err
}

func describeFields(b *strings.Builder, table string, spec *Spec) {
	fmt.Fprintf(b, "\n%s:\n", table)
	if spec == nil || len(spec.Fields) == 0 {
		b.WriteString("  (no settings)\n")
		return
	}
	for _, r := range rows(spec.Fields, "") {
		fmt.Fprintf(b, "  %-26s %s%s\n", r.name, r.typ, r.flags())
		if r.doc != "" {
			fmt.Fprintf(b, "  %-26s %s\n", "", r.doc)
		}
	}
}

func describeSample(b *strings.Builder, sample string) {
	b.WriteString("\nsample:\n\n")
	for _, line := range strings.SplitAfter(sample, "\n") {
		if line != "" && line != "\n" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
}

// SampleSettings are the keys of spec as Sample writes them under
// [plugin_config]: required ones with their examples, the rest commented
// out with their defaults.
func SampleSettings(spec *Spec) string {
	var b strings.Builder
	if spec != nil {
		writeSample(&b, spec.Fields, "")
	}
	return b.String()
}

// Markdown writes a connector's reference as a Markdown section.
func Markdown(w io.Writer, info Info) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s %s\n\n%s.\n\n", info.Name, info.Kind, upperFirst(info.Summary))
	names := append([]string{"`" + info.Name + "`"}, backquoted(info.Aliases)...)
	fmt.Fprintf(&b, "`path`: %s\n\n", strings.Join(names, ", "))
	if info.Spec == nil || len(info.Spec.Fields) == 0 {
		b.WriteString("No settings.\n\n")
	} else {
		b.WriteString("| key | type | default | | description |\n|---|---|---|---|---|\n")
		for _, r := range rows(info.Spec.Fields, "") {
			def := r.def
			if def != "" {
				def = "`" + def + "`"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.name, mdEscape(r.typ), mdEscape(def),
				strings.Join(r.marks(), ", "), mdEscape(r.doc))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "```toml\n%s```\n\n", Sample(info))
	_, err := io.WriteString(w, b.String())
	return err
}

// Sample is a connector file for info that loads: the required fields
// with their examples, the other fields with examples, and the rest
// commented out with their defaults.
func Sample(info Info) string {
	var b strings.Builder
	fmt.Fprintf(&b, "type = %q\nkey = \"my_%s\"\nenabled = true\npath = %q\n\n[[streams]]\nstream = \"example_stream\"\n",
		info.Kind, info.Name, info.Name)
	if info.Kind == KindSource {
		b.WriteString("topic = \"example_topic\"\n")
	} else {
		b.WriteString("topics = [\"example_topic\"]\n")
	}
	b.WriteString("\n[plugin_config]\n")
	b.WriteString(SampleSettings(info.Spec))
	return b.String()
}

func writeSample(b *strings.Builder, fields []Field, prefix string) {
	for _, f := range fields {
		key := join(prefix, f.Name)
		switch {
		case f.Example != nil:
			fmt.Fprintf(b, "%s = %s\n", key, tomlValue(f.Example))
		case f.Type == TypeObject:
			writeSample(b, f.Fields, key)
		case f.Default != nil:
			fmt.Fprintf(b, "# %s = %s\n", key, tomlValue(f.Default))
		default:
			fmt.Fprintf(b, "# %s = %s\n", key, tomlValue(zeroExample(f)))
		}
	}
}

// zeroExample is a placeholder value for a field with neither default
// nor example.
func zeroExample(f Field) any {
	switch f.Type {
	case TypeInt:
		if f.Min != nil {
			return int(*f.Min)
		}
		return 0
	case TypeFloat:
		return 0.0
	case TypeBool:
		return false
	case TypeDuration:
		return time.Second
	case TypeSize:
		return int64(1 << 20)
	case TypeEnum:
		return f.Values[0]
	case TypeList:
		return []string{}
	case TypeMap:
		return map[string]string{}
	}
	return ""
}

// tomlValue renders a default or an example as TOML.
func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case time.Duration:
		return strconv.Quote(units.FormatDuration(x))
	case int64: // a size
		if x > 0 && units.FormatSize(uint64(x)) != strconv.FormatInt(x, 10)+"B" {
			return strconv.Quote(units.FormatSize(uint64(x)))
		}
		return strconv.FormatInt(x, 10)
	case float64:
		s := strconv.FormatFloat(x, 'f', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	case []string:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = strconv.Quote(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []int:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = strconv.Itoa(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []any: // a list as TOML decodes it
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = tomlValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case map[string]string:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = e
		}
		return tomlValue(m)
	case map[string]any: // a table as TOML decodes it
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = join("", k) + " = " + tomlValue(x[k])
		}
		if len(parts) == 0 {
			return "{}"
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	return fmt.Sprint(v)
}

type row struct {
	name, typ, def, doc string
	required, secret    bool
	upstream            string
}

func (r row) marks() []string {
	var m []string
	if r.required {
		m = append(m, "required")
	}
	if r.secret {
		m = append(m, "secret")
	}
	if r.upstream != "" {
		m = append(m, "upstream: "+r.upstream)
	}
	return m
}

func (r row) flags() string {
	parts := r.marks()
	if r.def != "" {
		parts = append(parts, "default "+r.def)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// rows flattens fields for the reference; an object's fields follow it
// with dotted names.
func rows(fields []Field, prefix string) []row {
	var out []row
	for _, f := range fields {
		r := row{name: join(prefix, f.Name), typ: typeDoc(f), doc: f.Doc, required: f.Required, secret: f.Secret, upstream: f.Upstream}
		if f.Default != nil {
			r.def = tomlValue(f.Default)
		}
		out = append(out, r)
		if f.Type == TypeObject {
			out = append(out, rows(f.Fields, r.name)...)
		}
	}
	return out
}

// typeDoc names a field's type for the reference: "duration",
// "enum: a | b", "list of int (1 to 599)".
func typeDoc(f Field) string {
	unit := func(n int64) string { return strconv.FormatInt(n, 10) }
	if f.Type == TypeSize {
		unit = func(n int64) string { return units.FormatSize(uint64(n)) }
	}
	bounds := ""
	switch {
	case f.Min != nil && f.Max != nil:
		bounds = fmt.Sprintf(" (%s to %s)", unit(*f.Min), unit(*f.Max))
	case f.Min != nil:
		bounds = fmt.Sprintf(" (at least %s)", unit(*f.Min))
	}
	switch f.Type {
	case TypeEnum:
		return "enum: " + strings.Join(f.Values, " | ")
	case TypeList:
		return "list of " + typeDoc(*f.Elem) + bounds
	case TypeMap:
		return "map of " + typeDoc(*f.Elem)
	case TypeEither:
		alts := make([]string, len(f.Alternatives))
		for i, a := range f.Alternatives {
			alts[i] = typeDoc(a)
		}
		return strings.Join(alts, " or ")
	case TypeString:
		if f.Numbers {
			return "string or number"
		}
	}
	return string(f.Type) + bounds
}

func backquoted(s []string) []string {
	out := make([]string, len(s))
	for i, e := range s {
		out[i] = "`" + e + "`"
	}
	return out
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
