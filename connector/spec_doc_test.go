package connector

import (
	"errors"
	"testing"
)

// Examples and defaults render as TOML that loads, also lists written as
// TOML decodes them ([]any), which rendered unquoted before.
func TestTOMLValue(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{[]any{"nyc.users", "a\"b"}, `["nyc.users", "a\"b"]`},
		{[]any{int64(3), true}, `[3, true]`},
		{[]string{"x"}, `["x"]`},
		{true, "true"},
		{7, "7"},
		{"s", `"s"`},
		{map[string]any{"b": "x", "a": int64(2)}, `{ a = 2, b = "x" }`},
		{map[string]string{"k": "v"}, `{ k = "v" }`},
		{map[string]any{}, "{}"},
	} {
		if got := tomlValue(c.v); got != c.want {
			t.Errorf("tomlValue(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
}

// Errorf formats as fmt.Errorf does: a cause wrapped with %w is printed
// and unwrapped to, and the error still names the key.
func TestErrorfWraps(t *testing.T) {
	cause := errors.New("connection refused")
	err := PluginConfig{Source: "c.toml"}.Errorf("url", "cannot reach %s: %w", "x", cause)
	if !errors.Is(err, cause) {
		t.Fatalf("%v does not unwrap to its cause", err)
	}
	if got := err.Error(); got != "c.toml: plugin_config.url: cannot reach x: connection refused" {
		t.Fatalf("Error() = %q", got)
	}
	var se *SettingError
	if !errors.As(err, &se) || se.Key != "plugin_config.url" {
		t.Fatalf("not a SettingError naming the key: %#v", err)
	}
}

// A map field takes a default as TOML decodes a table, as well as a
// map[string]string.
func TestMapDefaults(t *testing.T) {
	NewSpec(NewStringMapField("h").WithDefault(map[string]any{}), NewStringMapField("g").WithDefault(map[string]any{"a": "b"}))
	defer func() {
		if recover() == nil {
			t.Fatal("a map default of the wrong element type was taken")
		}
	}()
	NewSpec(NewStringMapField("h").WithDefault(map[string]any{"a": 1}))
}
