package connector

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type envVal struct {
	raw      string
	inferred any
}

func (e envVal) EnvText() (string, any) { return e.raw, e.inferred }

var testSpec = NewSpec(
	NewStringField("token").AsSecret(),
	NewStringField("name").WithDefault("x"),
	NewIntField("n").Between(1, 9).WithDefault(3),
	NewDurationField("every").WithDefault(time.Second),
	NewSizeField("max").WithDefault(int64(1<<20)),
	NewEnumField("mode", "fast", "slow").WithAliases(map[string]string{"quick": "fast"}).WithDefault("fast"),
	NewStringListField("tags"),
	NewMapField("headers", NewStringField("")).AsSecret(),
	NewObjectField("tls", NewBoolField("verify").WithDefault(true), NewStringField("ca")),
)

func TestParseTypesDefaultsAndEnv(t *testing.T) {
	t.Parallel()
	set, err := testSpec.Parse(PluginConfig{Values: map[string]any{
		"token": envVal{"0042", int64(42)}, "n": envVal{"7", int64(7)}, "every": "0", "max": "64MiB",
		"mode": "QUICK", "tags": "a, b", "tls": map[string]any{"ca": "ca.pem"},
	}, Vars: map[string]string{"tags": "T"}})
	require.NoError(t, err)
	require.Equal(t, "0042", set.String("token"))
	require.Equal(t, "x", set.String("name"))
	require.Equal(t, 7, set.Int("n"))
	require.Zero(t, set.Duration("every"))
	require.Equal(t, int64(64<<20), set.Size("max"))
	require.Equal(t, "fast", set.String("mode"))
	require.Equal(t, []string{"a", "b"}, set.Strings("tags"), "a variable's list needs no brackets")
	require.True(t, set.Object("tls").Bool("verify"))
	require.Equal(t, "ca.pem", set.Object("tls").String("ca"))
	require.True(t, set.Has("n"))
	require.False(t, set.Has("name"))
	require.Panics(t, func() { set.String("nope") }, "a name the spec lacks")
	require.Panics(t, func() { set.Int("name") }, "a getter of another type")
}

func TestParseReportsEveryProblemWithLines(t *testing.T) {
	t.Parallel()
	_, err := testSpec.Parse(PluginConfig{Source: "c.toml", Values: map[string]any{
		"token": int64(5), "n": int64(10), "tls": map[string]any{"verfy": true}, "tagz": []any{},
	}, Lines: map[string]int{"": 2, "token": 3, "n": 4, "tls": 6, "tls.verfy": 7, "tagz": 5}})
	require.EqualError(t, err, `4 configuration errors:
  c.toml:3: plugin_config.token: expected a string, got an integer
  c.toml:4: plugin_config.n: expected an integer from 1 to 9, got 10
  c.toml:5: plugin_config.tagz: unknown key; did you mean "tags"?
  c.toml:7: plugin_config.tls.verfy: unknown key; did you mean "verify"?`)
}

func TestSecret(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{"token": true, "headers": true, "headers.Authorization": true,
		"name": false, "tls.ca": false, "nope": false, "tags[0]": false} {
		require.Equal(t, want, testSpec.Secret(key), key)
	}
}

func TestNewSpecRefusesBadFields(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { NewSpec(NewIntField("a"), NewIntField("a")) })
	require.Panics(t, func() { NewSpec(NewEnumField("a")) })
	require.Panics(t, func() { NewSpec(NewDurationField("a").WithDefault("1s")) }, "a default of the wrong Go type")
	require.Panics(t, func() { NewSpec(NewStringField("a").Require().WithDefault("x")) })
}
