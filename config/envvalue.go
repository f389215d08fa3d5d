package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"
)

// EnvValue is a plugin_config value set by an environment variable
// (IGGY_CONNECTORS_*_PLUGIN_CONFIG_<FIELD>) whose text reads as something
// else than a string: "123456", "0042", "true", "2.5" or "[a, 1]". The
// field is not in the file, so its type is not known here; it is known
// only to the connector that reads it. Raw is the variable's exact text
// and Inferred the value as upstream infers it (bool, int64, float64, or
// []any whose items are strings or EnvValues).
//
// connector.Spec.Parse gives a string field Raw and any other
// field Inferred, so a secret such as "0042" reaches a string field
// unchanged while "250" still fills an integer field. JSON, TOML and YAML
// renderings (the API, stored files) show Inferred.
type EnvValue struct {
	Raw      string
	Inferred any
}

// EnvText returns the variable's text and the inferred value; it is how
// connector.Spec.Parse recognizes an EnvValue.
func (v EnvValue) EnvText() (raw string, inferred any) { return v.Raw, v.Inferred }

// MarshalJSON renders the inferred value.
func (v EnvValue) MarshalJSON() ([]byte, error) { return json.Marshal(jsonSafe(v.Inferred)) }

// MarshalYAML renders the inferred value.
func (v EnvValue) MarshalYAML() (any, error) { return v.Inferred, nil }

// MarshalTOML renders the inferred value.
func (v EnvValue) MarshalTOML() ([]byte, error) {
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(map[string]any{"v": v.Inferred}); err != nil {
		return nil, err
	}
	s, ok := strings.CutPrefix(buf.String(), "v = ")
	if !ok {
		return nil, fmt.Errorf("encode TOML: unexpected rendering of %T", v.Inferred)
	}
	return []byte(strings.TrimSuffix(s, "\n")), nil
}

// envValue types a variable's text for a field the file does not have:
// the inferred value, wrapped in an EnvValue unless it is a string.
func envValue(s string) any {
	v := inferValue(s)
	if _, ok := v.(string); ok {
		return v
	}
	return EnvValue{Raw: s, Inferred: v}
}
