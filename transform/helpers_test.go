package transform

import (
	"encoding/json"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

func build(t testing.TB, name string, cfg map[string]any) Chain {
	t.Helper()
	c, err := Build([]Spec{{Name: name, Config: cfg, Source: "sink.toml"}})
	require.NoError(t, err)
	return c
}

func field(key string, value map[string]any) map[string]any {
	return map[string]any{"key": key, "value": value}
}

// run applies c and returns the payload and schema after it.
func run(t *testing.T, c Chain, payload string, schema connector.Schema) (string, connector.Schema) {
	t.Helper()
	m := connector.Message{Payload: []byte(payload)}
	out, keep, err := c.Apply(&m, schema)
	require.NoError(t, err)
	require.True(t, keep)
	return string(m.Payload), out
}

// apply runs c on a JSON payload and decodes the resulting object.
func apply(t *testing.T, c Chain, payload string) map[string]any {
	t.Helper()
	out, schema := run(t, c, payload, connector.SchemaJSON)
	require.Equal(t, connector.SchemaJSON, schema)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), "output %s", out)
	return v
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
