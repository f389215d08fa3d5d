package connector

import "testing"

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
	} {
		if got := tomlValue(c.v); got != c.want {
			t.Errorf("tomlValue(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
}
