package host

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// envText is a plugin_config value an environment variable set
// (config.EnvValue): its exact text and the value inferred from it.
type envText interface {
	EnvText() (raw string, inferred any)
}

// ConfigJSON is a plugin_config as an OpenRequest's config_json: the
// table as the file gives it, with values set by environment variables
// read as the spec's field types take them (a string field gets the
// variable's exact text, others the inferred value), and TOML datetimes
// as RFC 3339 text.
func ConfigJSON(spec *connector.Spec, values map[string]any) (string, error) {
	var fields []connector.Field
	if spec != nil {
		fields = spec.Fields
	}
	b, err := json.Marshal(plainValues(fields, values))
	if err != nil {
		return "", fmt.Errorf("plugin_config as JSON: %w", err)
	}
	return string(b), nil
}

func plainValues(fields []connector.Field, values map[string]any) map[string]any {
	out := make(map[string]any, len(values))
	for k, v := range values {
		var f *connector.Field
		for i := range fields {
			if fields[i].Name == k {
				f = &fields[i]
			}
		}
		out[k] = plainValue(f, v)
	}
	return out
}

func plainValue(f *connector.Field, v any) any {
	switch x := v.(type) {
	case envText:
		raw, inferred := x.EnvText()
		if f != nil && f.Type == connector.TypeString {
			return raw
		}
		return plainValue(f, inferred)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case map[string]any:
		var sub []connector.Field
		if f != nil && f.Type == connector.TypeObject {
			sub = f.Fields
		}
		if f != nil && f.Type == connector.TypeMap && f.Elem != nil {
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[k] = plainValue(f.Elem, e)
			}
			return out
		}
		return plainValues(sub, x)
	case []any:
		var elem *connector.Field
		if f != nil && f.Type == connector.TypeList {
			elem = f.Elem
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plainValue(elem, e)
		}
		return out
	}
	return v
}
