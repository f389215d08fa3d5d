package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Redacted stands in for a secret in logs and String output.
const Redacted = "****"

// secretWords mark a plugin_config field (or any map key) as secret.
var secretWords = []string{
	"password", "passwd", "secret", "token", "apikey", "api_key", "api-key",
	"access_key", "accesskey", "private_key", "privatekey", "credential",
	"auth", "signature", "passphrase", "session_key", "sas",
}

// looksSecret reports whether a field named name probably holds a secret.
func looksSecret(name string) bool {
	n := strings.ToLower(name)
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return strings.HasSuffix(n, "_key") && n != "partition_key" && n != "routing_key" && n != "message_key"
}

var dsnPassword = regexp.MustCompile(`(?i)(password|pwd|passwd)\s*=\s*('[^']*'|"[^"]*"|[^\s;&]+)`)

// redactString hides credentials inside a string that is not secret as a
// whole: a URL's user password and secret-looking query values, and
// "password=..." pairs of DSNs.
func redactString(s string) string {
	if strings.Contains(s, "://") {
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			s = redactURL(u)
		}
	}
	return dsnPassword.ReplaceAllString(s, "${1}="+Redacted)
}

func redactURL(u *url.URL) string {
	c := *u
	if _, ok := c.User.Password(); ok {
		c.User = url.UserPassword(c.User.Username(), Redacted)
	}
	if c.RawQuery != "" {
		q := c.Query()
		for k := range q {
			if looksSecret(k) || strings.EqualFold(k, "key") || strings.EqualFold(k, "sig") {
				q.Set(k, Redacted)
			}
		}
		c.RawQuery = q.Encode()
	}
	return strings.ReplaceAll(c.String(), url.QueryEscape(Redacted), Redacted)
}

// redactedURLString redacts a URL given as a string.
func redactedURLString(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return Redacted
	}
	return redactURL(u)
}

// redactPlain returns a copy of a plain value with secret-looking fields
// replaced by Redacted.
func redactPlain(v any, secret bool) any {
	switch x := v.(type) {
	case map[string]any:
		// A {key|name = "api_token", value = ...} pair (add_fields'
		// fields, header lists) names its secret in a sibling.
		pairSecret := false
		for _, n := range []string{"key", "name"} {
			if s, ok := x[n].(string); ok && looksSecret(s) {
				pairSecret = true
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = redactPlain(e, secret || looksSecret(k) || (pairSecret && k == "value"))
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactPlain(e, secret)
		}
		return out
	case string:
		if secret {
			if x == "" {
				return ""
			}
			return Redacted
		}
		return redactString(x)
	case EnvValue:
		return redactPlain(x.Inferred, secret)
	case nil:
		return nil
	}
	if secret {
		return Redacted
	}
	return v
}

// plainLogValue renders a plain map for slog with keys in order.
func plainLogValue(v any) slog.Value {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		attrs := make([]slog.Attr, 0, len(keys))
		for _, k := range keys {
			attrs = append(attrs, slog.Attr{Key: k, Value: plainLogValue(x[k])})
		}
		return slog.GroupValue(attrs...)
	case []any:
		scalars := true
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any:
				scalars = false
			}
		}
		if scalars {
			return slog.AnyValue(x)
		}
		attrs := make([]slog.Attr, len(x))
		for i, e := range x {
			attrs[i] = slog.Attr{Key: strconv.Itoa(i), Value: plainLogValue(e)}
		}
		return slog.GroupValue(attrs...)
	}
	return slog.AnyValue(v)
}

// structLogValue renders a config struct for slog, hiding secret fields.
func structLogValue(rv reflect.Value) slog.Value {
	fields := fieldsOf(rv.Type())
	attrs := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		attrs = append(attrs, slog.Attr{Key: f.name, Value: fieldLogValue(rv.FieldByIndex(f.index), f.secret, f.name)})
	}
	return slog.GroupValue(attrs...)
}

func fieldLogValue(v reflect.Value, secret bool, name string) slog.Value {
	t := v.Type()
	if t == durationType {
		return slog.StringValue(FormatDuration(time.Duration(v.Int())))
	}
	switch t.Kind() {
	case reflect.String:
		s := v.String()
		switch {
		case secret && s != "":
			return slog.StringValue(Redacted)
		case name == "base_url" || name == "url":
			return slog.StringValue(redactedURLString(s))
		}
		return slog.StringValue(redactString(s))
	case reflect.Bool:
		return slog.BoolValue(v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return slog.Int64Value(v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return slog.Uint64Value(v.Uint())
	case reflect.Struct:
		return structLogValue(v)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			out := make([]string, v.Len())
			for i := range out {
				out[i] = v.Index(i).String()
				if secret && out[i] != "" {
					out[i] = Redacted
				}
			}
			return slog.AnyValue(out)
		}
		attrs := make([]slog.Attr, v.Len())
		for i := range attrs {
			attrs[i] = slog.Attr{Key: strconv.Itoa(i), Value: fieldLogValue(v.Index(i), secret, name)}
		}
		return slog.GroupValue(attrs...)
	case reflect.Map:
		if t == anyMapType {
			if v.IsNil() {
				return slog.Value{}
			}
			return plainLogValue(redactPlain(v.Interface(), secret))
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		attrs := make([]slog.Attr, len(keys))
		for i, k := range keys {
			s := v.MapIndex(k).String()
			if secret || looksSecret(k.String()) {
				s = Redacted
			}
			attrs[i] = slog.Attr{Key: k.String(), Value: slog.StringValue(s)}
		}
		return slog.GroupValue(attrs...)
	}
	return slog.StringValue(fmt.Sprintf("<%s>", t))
}

// renderValue writes a slog value as compact text: {a: 1, b: {c: "x"}}.
func renderValue(b *strings.Builder, v slog.Value) {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		b.WriteByte('{')
		for i, a := range v.Group() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(a.Key + ": ")
			renderValue(b, a.Value)
		}
		b.WriteByte('}')
	case slog.KindString:
		b.WriteString(strconv.Quote(v.String()))
	default:
		b.WriteString(v.String())
	}
}

func renderText(v slog.Value) string {
	var b strings.Builder
	renderValue(&b, v)
	return b.String()
}

// LogValue renders the configuration for slog with secrets redacted.
func (r Runtime) LogValue() slog.Value { return structLogValue(reflect.ValueOf(r)) }

// String renders the configuration with secrets redacted.
func (r Runtime) String() string { return renderText(r.LogValue()) }

// GoString is String, so %#v does not print secrets.
func (r Runtime) GoString() string { return r.String() }

// LogValue renders the section for slog with secrets redacted.
func (i Iggy) LogValue() slog.Value { return structLogValue(reflect.ValueOf(i)) }

// String renders the section with secrets redacted.
func (i Iggy) String() string { return renderText(i.LogValue()) }

// GoString is String, so %#v does not print secrets.
func (i Iggy) GoString() string { return i.String() }

// LogValue renders the section for slog with secrets redacted.
func (h HTTP) LogValue() slog.Value { return structLogValue(reflect.ValueOf(h)) }

// String renders the section with secrets redacted.
func (h HTTP) String() string { return renderText(h.LogValue()) }

// GoString is String, so %#v does not print secrets.
func (h HTTP) GoString() string { return h.String() }

// LogValue renders the section for slog with secrets redacted.
func (c Connectors) LogValue() slog.Value { return structLogValue(reflect.ValueOf(c)) }

// String renders the section with secrets redacted.
func (c Connectors) String() string { return renderText(c.LogValue()) }

// GoString is String, so %#v does not print secrets.
func (c Connectors) GoString() string { return c.String() }

// LogValue renders the section for slog with secrets redacted.
func (s State) LogValue() slog.Value { return structLogValue(reflect.ValueOf(s)) }

// String renders the section with secrets redacted.
func (s State) String() string { return renderText(s.LogValue()) }

// GoString is String, so %#v does not print secrets.
func (s State) GoString() string { return s.String() }

// LogValue renders the section for slog with secrets redacted.
func (s StateHTTP) LogValue() slog.Value { return structLogValue(reflect.ValueOf(s)) }

// String renders the section with secrets redacted.
func (s StateHTTP) String() string { return renderText(s.LogValue()) }

// GoString is String, so %#v does not print secrets.
func (s StateHTTP) GoString() string { return s.String() }

// LogValue renders the connector for slog; plugin_config and transform
// fields that look secret (password, token, api_key, ...) are redacted,
// as are passwords inside URLs and DSNs.
func (c Connector) LogValue() slog.Value {
	d := c.doc()
	attrs := []slog.Attr{
		slog.String("type", string(c.Type)), slog.String("key", c.Key), slog.Bool("enabled", c.Enabled),
		slog.Uint64("version", c.Version), slog.String("name", c.Name), slog.String("path", c.Path),
	}
	if c.PluginConfigFormat != "" {
		attrs = append(attrs, slog.String("plugin_config_format", string(c.PluginConfigFormat)))
	}
	if c.PluginConfig != nil {
		attrs = append(attrs, slog.Attr{Key: "plugin_config", Value: plainLogValue(redactPlain(c.PluginConfig, false))})
	}
	if len(d.Transforms) > 0 {
		ts := make([]slog.Attr, len(d.Transforms))
		for i, t := range d.Transforms {
			ts[i] = slog.Attr{Key: t.Name, Value: plainLogValue(redactPlain(t.Config, false))}
		}
		attrs = append(attrs, slog.Attr{Key: "transforms", Value: slog.GroupValue(ts...)})
	}
	var streams slog.Value
	if c.Type == KindSource {
		streams = fieldLogValue(reflect.ValueOf(c.Producers), false, "streams")
	} else {
		streams = fieldLogValue(reflect.ValueOf(c.Consumers), false, "streams")
	}
	attrs = append(attrs, slog.Attr{Key: "streams", Value: streams},
		slog.Bool("verbose", c.Verbose), slog.Bool("benchmark", c.Benchmark))
	return slog.GroupValue(attrs...)
}

// String renders the connector with secrets redacted.
func (c Connector) String() string { return renderText(c.LogValue()) }

// GoString is String, so %#v does not print secrets.
func (c Connector) GoString() string { return c.String() }

// urlUserinfo finds "scheme://user:password@" inside free text.
var urlUserinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*):[^@\s/]*@`)

// RedactText hides credentials inside free text such as an error
// message: passwords in URLs ("scheme://user:password@") and
// "password=..." pairs of DSNs.
func RedactText(s string) string {
	s = urlUserinfo.ReplaceAllString(s, "${1}:"+Redacted+"@")
	return dsnPassword.ReplaceAllString(s, "${1}="+Redacted)
}

// Redacted returns a copy of c for API answers: plugin_config and
// transform values whose keys look secret (password, token, api_key,
// Authorization, ...) become Redacted, and credentials inside URLs and
// DSNs are hidden, whether they came from a file or from an
// IGGY_CONNECTORS_*_PLUGIN_CONFIG_* variable. c is not changed. For a
// connector that declares its settings, use RedactedBy with its spec.
func (c *Connector) Redacted() *Connector { return c.RedactedBy(nil) }

// RedactedBy is Redacted for a connector whose spec says which
// plugin_config keys are secret: secret reports it for a key path within
// the table ("password", "headers.Authorization"; connector.Spec.Secret),
// and exactly those values become Redacted (credentials inside URLs and
// DSNs are still hidden). A nil secret guesses by key name, as Redacted.
// Transforms are always guessed.
func (c *Connector) RedactedBy(secret func(key string) bool) *Connector {
	out := *c
	if c.PluginConfig != nil {
		out.PluginConfig = redactBySpec(c.PluginConfig, path{}, secret).(map[string]any)
	}
	out.Transforms = make([]Transform, len(c.Transforms))
	for i, t := range c.Transforms {
		out.Transforms[i] = t
		if t.Config != nil {
			out.Transforms[i].Config = redactPlain(t.Config, false).(map[string]any)
		}
	}
	return &out
}

// redactBySpec redacts the value at p of a plugin_config: by secret when
// it is not nil, else by guessing.
func redactBySpec(v any, p path, secret func(string) bool) any {
	if secret == nil {
		return redactPlain(v, false)
	}
	if len(p) > 0 && secret(p.String()) {
		return redactPlain(v, true)
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = redactBySpec(e, p.key(k), secret)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactBySpec(e, p.index(i), secret)
		}
		return out
	case string:
		return redactString(x)
	case EnvValue:
		return redactBySpec(x.Inferred, p, secret)
	}
	return v
}

// Unredact undoes, in a configuration sent back to the API, what
// Redacted hid: every string value of plugin_config and transforms that
// equals the redacted form of the value at the same place in old (the
// version it was read from) takes old's value again, so a client can read
// a configuration, change one field and store it without knowing the
// secrets. Values the client did change are kept as sent.
func Unredact(c, old *Connector) { UnredactBy(c, old, nil) }

// UnredactBy is Unredact for a connector whose spec says which
// plugin_config keys are secret (see RedactedBy); nil guesses.
func UnredactBy(c, old *Connector, secret func(key string) bool) {
	if old == nil {
		return
	}
	if c.PluginConfig != nil && old.PluginConfig != nil {
		if secret == nil {
			unredactMap(c.PluginConfig, old.PluginConfig, false)
		} else {
			unredactBySpec(c.PluginConfig, old.PluginConfig, path{}, secret)
		}
	}
	for i := range c.Transforms {
		for _, o := range old.Transforms {
			if o.Name == c.Transforms[i].Name && c.Transforms[i].Config != nil && o.Config != nil {
				unredactMap(c.Transforms[i].Config, o.Config, false)
			}
		}
	}
}

// unredactBySpec gives v, at p, old's value again where v is old's
// redacted form.
func unredactBySpec(v, old any, p path, secret func(string) bool) any {
	switch x := v.(type) {
	case map[string]any:
		if o, ok := old.(map[string]any); ok {
			for k := range x {
				if ov, ok := o[k]; ok {
					x[k] = unredactBySpec(x[k], ov, p.key(k), secret)
				}
			}
		}
	case []any:
		if o, ok := old.([]any); ok && len(o) == len(x) {
			for i := range x {
				x[i] = unredactBySpec(x[i], o[i], p.index(i), secret)
			}
		}
	case string:
		if redactBySpec(old, p, secret) == any(x) && old != any(x) {
			return old
		}
	}
	return v
}

func unredactMap(m, old map[string]any, secret bool) {
	pairSecret := false
	for _, n := range []string{"key", "name"} {
		if s, ok := old[n].(string); ok && looksSecret(s) {
			pairSecret = true
		}
	}
	for k, v := range m {
		if o, ok := old[k]; ok {
			m[k] = unredactValue(v, o, secret || looksSecret(k) || (pairSecret && k == "value"))
		}
	}
}

func unredactValue(v, old any, secret bool) any {
	switch x := v.(type) {
	case map[string]any:
		if o, ok := old.(map[string]any); ok {
			unredactMap(x, o, secret)
		}
	case []any:
		if o, ok := old.([]any); ok && len(o) == len(x) {
			for i := range x {
				x[i] = unredactValue(x[i], o[i], secret)
			}
		}
	case string:
		if redactPlain(old, secret) == x && old != any(x) {
			return old
		}
	}
	return v
}
