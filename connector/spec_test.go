package connector

import (
	"errors"
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

// shapeSpec has the shapes transform tables need: lists of tables, a
// value of any type, a name or a table, a check of a whole table.
var shapeSpec = NewSpec(
	NewListField("items", NewObjectField("",
		NewStringField("key").Require(),
		NewAnyField("value"),
	)),
	NewEitherField("test",
		NewEnumField("", "is_null", "is_string"),
		NewObjectField("", NewFloatField("above"), NewFloatField("below")).WithCheck(func(v any) error {
			if s := v.(*Settings); s.Has("above") == s.Has("below") {
				return errors.New("expected one of above, below")
			}
			return nil
		}),
	),
)

func TestParseListsOfTablesAnyAndEither(t *testing.T) {
	t.Parallel()
	set, err := shapeSpec.Parse(PluginConfig{Values: map[string]any{
		"items": []any{map[string]any{"key": "a", "value": []any{int64(1), "x"}}, map[string]any{"key": "b"}},
		"test":  map[string]any{"above": int64(2)},
	}})
	require.NoError(t, err)
	items := set.Objects("items")
	require.Len(t, items, 2)
	require.Equal(t, "a", items[0].String("key"))
	require.Equal(t, []any{int64(1), "x"}, items[0].Value("value"))
	require.False(t, items[1].Has("value"))
	require.Equal(t, 2.0, set.Value("test").(*Settings).Float("above"))

	set, err = shapeSpec.Parse(PluginConfig{Values: map[string]any{"test": "IS_NULL", "items": []any{}}})
	require.NoError(t, err)
	require.Equal(t, "is_null", set.Value("test"))
	require.Empty(t, set.Objects("items"))

	_, err = shapeSpec.Parse(PluginConfig{Source: "c.toml", Values: map[string]any{
		"items": []any{map[string]any{"kye": "a"}}, "test": map[string]any{},
	}, Lines: map[string]int{"items": 2, "items[0].kye": 3, "test": 5}})
	require.EqualError(t, err, `3 configuration errors:
  c.toml:3: plugin_config.items[0].kye: unknown key; did you mean "key"?
  c.toml:2: plugin_config.items[0].key: required key is missing; expected a string
  c.toml:5: plugin_config.test: expected one of above, below`)
	_, err = shapeSpec.Parse(PluginConfig{Values: map[string]any{"test": true}})
	require.EqualError(t, err, `plugin_config.test: expected one of "is_null", "is_string" or a table, got a boolean (true)`)
	_, err = shapeSpec.Parse(PluginConfig{Values: map[string]any{"test": "is_nul"}})
	require.EqualError(t, err, `plugin_config.test: expected one of "is_null", "is_string", got "is_nul"; did you mean "is_null"?`)

	require.Panics(t, func() { NewSpec(NewEitherField("a", NewStringField(""))) }, "one alternative")
	require.Panics(t, func() { NewSpec(NewEitherField("a", NewStringField(""), NewEnumField("", "x"))) }, "two take a string")
}
