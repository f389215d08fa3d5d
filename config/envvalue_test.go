package config

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// envSinkFile is a sink whose plugin_config has only a url: every other
// field comes from the environment, so its type is inferred.
const envSinkFile = "type = \"sink\"\nkey = \"h\"\npath = \"http\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n[plugin_config]\nurl = \"http://127.0.0.1:1/x\"\n"

// envSpec is a connector's plugin_config spec, as a connector declares it.
var envSpec = connector.NewSpec(
	connector.NewStringField("url"),
	connector.NewStringField("signing_secret").AsSecret(),
	connector.NewStringField("password").AsSecret(),
	connector.NewStringField("flag"),
	connector.NewIntField("count"),
	connector.NewIntField("port").Between(0, 65535),
	connector.NewFloatField("ratio"),
	connector.NewBoolField("enabled"),
	connector.NewStringListField("hosts"),
	connector.NewListField("ports", connector.NewIntField("")),
	connector.NewAnyField("anything"),
	connector.NewObjectField("nested", connector.NewStringField("inner")),
	connector.NewStringField("token"),
)

func parseWithEnv(t *testing.T, vars map[string]string) *Connector {
	t.Helper()
	env := map[string]string{}
	for k, v := range vars {
		env["IGGY_CONNECTORS_SINK_H_PLUGIN_CONFIG_"+k] = v
	}
	c, err := ParseConnector("h.toml", []byte(envSinkFile), WithEnv(MapEnv(env)))
	require.NoError(t, err)
	return c
}

// TestEnvValuesKeepTheirText: a variable that looks like a number or a
// bool reaches a string field as its exact text, and a numeric or bool
// field as the inferred value (the reviewer's "is number, want string").
func TestEnvValuesKeepTheirText(t *testing.T) {
	t.Parallel()
	c := parseWithEnv(t, map[string]string{
		"SIGNING_SECRET": "123456",
		"PASSWORD":       "0042",
		"FLAG":           "true",
		"COUNT":          "250",
		"PORT":           "0042",
		"RATIO":          "2.5",
		"ENABLED":        "true",
		"HOSTS":          "[a, 0042, true]",
		"PORTS":          "[80, 0443]",
		"ANYTHING":       "7",
		"TOKEN":          "1e3",
	})
	require.Equal(t, EnvValue{Raw: "123456", Inferred: int64(123456)}, c.PluginConfig["signing_secret"])
	got, err := envSpec.Parse(connector.PluginConfig{Values: c.PluginConfig, Source: "h.toml", Vars: c.PluginConfigVars})
	require.NoError(t, err)
	require.Equal(t, "123456", got.String("signing_secret"))
	require.True(t, got.Has("password"))
	require.Equal(t, "0042", got.String("password"))
	require.Equal(t, "true", got.String("flag"))
	require.Equal(t, 250, got.Int("count"))
	require.Equal(t, 42, got.Int("port"))
	require.Equal(t, 2.5, got.Float("ratio"))
	require.True(t, got.Bool("enabled"))
	require.Equal(t, []string{"a", "0042", "true"}, got.Strings("hosts"))
	require.Equal(t, []int{80, 443}, got.Ints("ports"))
	require.Equal(t, int64(7), got.Value("anything"), "an any field gets the inferred value")
	require.Equal(t, "1e3", got.String("token"))

	// Password = true, as a string field, in every spelling.
	for i, v := range []string{"true", "TRUE", "false", "1", "-0", " 42 "} {
		c := parseWithEnv(t, map[string]string{"PASSWORD": v})
		got, err := envSpec.Parse(connector.PluginConfig{Values: c.PluginConfig})
		require.NoError(t, err, "case %d", i)
		require.Equal(t, v, got.String("password"), "case %d", i)
	}

	// Values in the file stay strict: a number for a string field is an error.
	_, err = envSpec.Parse(connector.PluginConfig{Values: map[string]any{"password": int64(42)}, Source: "f.toml"})
	require.EqualError(t, err, "f.toml: plugin_config.password: expected a string, got an integer")
	// A number for a numeric field from a variable that is not a number
	// names the field and the variable.
	c = parseWithEnv(t, map[string]string{"COUNT": "many"})
	_, err = envSpec.Parse(connector.PluginConfig{Values: c.PluginConfig, Source: "h.toml", Vars: c.PluginConfigVars})
	require.EqualError(t, err, `h.toml: environment variable IGGY_CONNECTORS_SINK_H_PLUGIN_CONFIG_COUNT (plugin_config.count): `+
		`expected an integer, got "many"`)
}

// TestEnvValueRenderings: the API and stored files show the inferred
// value, as before.
func TestEnvValueRenderings(t *testing.T) {
	t.Parallel()
	c := parseWithEnv(t, map[string]string{"COUNT": "0042", "HOSTS": "[a, 1, true, 2.5]", "ENABLED": "false", "NAME": "plain"})
	want := map[string]any{"url": "http://127.0.0.1:1/x", "count": float64(42), "hosts": []any{"a", float64(1), true, 2.5},
		"enabled": false, "name": "plain"}

	data, err := json.Marshal(c)
	require.NoError(t, err)
	var viaJSON struct {
		PluginConfig map[string]any `json:"plugin_config"`
	}
	require.NoError(t, json.Unmarshal(data, &viaJSON))
	require.Equal(t, want, viaJSON.PluginConfig)

	data, err = c.MarshalTOML()
	require.NoError(t, err)
	var viaTOML struct {
		PluginConfig map[string]any `toml:"plugin_config"`
	}
	_, err = toml.Decode(string(data), &viaTOML)
	require.NoError(t, err, "%s", data)
	require.Equal(t, map[string]any{"url": "http://127.0.0.1:1/x", "count": int64(42), "hosts": []any{"a", int64(1), true, 2.5},
		"enabled": false, "name": "plain"}, viaTOML.PluginConfig)

	var buf bytes.Buffer
	require.NoError(t, yaml.NewEncoder(&buf).Encode(c.PluginConfig))
	var viaYAML map[string]any
	require.NoError(t, yaml.Unmarshal(buf.Bytes(), &viaYAML))
	require.Equal(t, map[string]any{"url": "http://127.0.0.1:1/x", "count": 42, "hosts": []any{"a", 1, true, 2.5},
		"enabled": false, "name": "plain"}, viaYAML)

	// Secret-looking fields are redacted whatever their type.
	c = parseWithEnv(t, map[string]string{"PASSWORD": "90421733", "API_TOKEN": "[7001300917, 7002600527]"})
	for _, s := range []string{c.String(), logged(true, c), logged(false, c)} {
		require.NotContains(t, s, "90421733")
		require.NotContains(t, s, "7001300917") // long enough not to turn up in a log line's timestamp
		require.Contains(t, s, Redacted)
	}
}
