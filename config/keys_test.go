package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The key keys parse, read back through MarshalTOML, and bad values fail
// with the file, line and key.
func TestStreamKeyKeys(t *testing.T) {
	t.Parallel()
	c, err := ParseConnector("keys.toml", []byte(`
type = "source"
key = "files"
[[streams]]
stream = "s"
topic = "a"
key_field = "user.id"
key_required = true
[[streams]]
stream = "s"
topic = "b"
key_template = "{customer}-{{{region.name}}}"
[[streams]]
stream = "s"
topic = "c"
`), noEnv)
	require.NoError(t, err)
	a, b, none := c.Producers[0].StreamKey, c.Producers[1].StreamKey, c.Producers[2].StreamKey
	require.Equal(t, KeyPath("user.id"), a.KeyField)
	require.Equal(t, []string{"user", "id"}, a.KeyField.Segments())
	require.True(t, a.KeyRequired)
	require.True(t, a.HasKeyRule())
	parts, err := b.KeyTemplate.Parts()
	require.NoError(t, err)
	require.Equal(t, []KeyPart{{Field: "customer"}, {Literal: "-{"}, {Field: "region.name"}, {Literal: "}"}}, parts)
	require.False(t, none.HasKeyRule())

	out, err := c.MarshalTOML()
	require.NoError(t, err)
	back, err := ParseConnector("back.toml", out, noEnv)
	require.NoError(t, err, "%s", out)
	for i := range c.Producers {
		require.Equal(t, c.Producers[i].StreamKey, back.Producers[i].StreamKey, "streams[%d] reads back:\n%s", i, out)
	}
	require.NotContains(t, string(out[len(out)-40:]), "key_", "an unset key is not rendered")
}

func TestStreamKeyErrors(t *testing.T) {
	t.Parallel()
	const head = "type = \"source\"\nkey = \"gen\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n" // lines 1-5
	for i, tc := range []struct{ src, want string }{
		{head + "key_field = \"\"\n", `gen.toml:6: streams[0].key_field: expected a JSON field name or a dotted path`},
		{head + "key_field = \"user..id\"\n", `gen.toml:6: streams[0].key_field: "user..id" has an empty name at part 2`},
		{head + "key_field = 3\n", `gen.toml:6: streams[0].key_field: expected a JSON path such as "user.id", got an integer (3)`},
		{head + "key_template = \"plain\"\n", `gen.toml:6: streams[0].key_template: "plain" has no {field}`},
		{head + "key_template = \"{a\"\n", `gen.toml:6: streams[0].key_template: "{a": the field opened at byte 0 is not closed`},
		{head + "key_template = \"a}\"\n", `gen.toml:6: streams[0].key_template: "a}": a '}' at byte 1 closes no field`},
		{head + "key_template = \"{}\"\n", `gen.toml:6: streams[0].key_template: "{}": the field at byte 0: expected a JSON field name`},
		{head + "key_field = \"a\"\nkey_template = \"{b}\"\n", `gen.toml:7: streams[0].key_template: give key_field or key_template, not both`},
		{head + "key_template = \"{b}\"\nkey_field = \"a\"\n", `gen.toml:7: streams[0].key_field: give key_field or key_template, not both`},
		{head + "key_required = \"yes\"\n", `gen.toml:6: streams[0].key_required: expected true or false`},
		{head + "key_fields = \"a\"\n", `gen.toml:6: streams[0].key_fields: unknown key; did you mean "key_field"?`},
	} {
		_, err := ParseConnector("gen.toml", []byte(tc.src), noEnv)
		require.ErrorIs(t, err, ErrInvalid, "case %d", i)
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}

func FuzzParseKeyTemplate(f *testing.F) {
	for _, s := range []string{"{a}", "{a}-{b.c}", "{{x}}{y}", "{", "}", "{a.}", "", "{a}{b}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts, err := ParseKeyTemplate(s)
		if err != nil {
			return
		}
		fields := 0
		for _, p := range parts {
			if p.Field != "" {
				fields++
				if _, err := ParseKeyPath(string(p.Field)); err != nil {
					t.Fatalf("%q: field %q: %v", s, p.Field, err)
				}
			} else if p.Literal == "" {
				t.Fatalf("%q: an empty literal part", s)
			}
		}
		if fields == 0 {
			t.Fatalf("%q parsed with no field", s)
		}
	})
}
