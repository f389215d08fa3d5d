package transform

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/transform/wasm/wasmtest"
	"github.com/stretchr/testify/require"
)

// guestDir is a directory holding the test guest as guest.wasm, as a
// connector file's directory would.
func guestDir(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(wasmtest.GoGuest(t))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "guest.wasm"), b, 0o644))
	return dir
}

func wasmChain(t testing.TB, dir string, specs ...Spec) Chain {
	t.Helper()
	for i := range specs {
		specs[i].Source = filepath.Join(dir, "sink.toml")
	}
	c, err := Build(specs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func wasmSpecOf(fn string, extra map[string]any) Spec {
	cfg := map[string]any{"module": "guest.wasm", "function": fn}
	for k, v := range extra {
		cfg[k] = v
	}
	return Spec{Name: "wasm", Config: cfg}
}

func payloads(ms []connector.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Payload))
	}
	return out
}

func TestWasmInAChain(t *testing.T) {
	t.Parallel()
	dir := guestDir(t)
	c := wasmChain(t, dir,
		Spec{Name: "add_fields", Config: map[string]any{"fields": []any{field("a", map[string]any{"static": 1})}}},
		wasmSpecOf("drop_odd", nil),
		wasmSpecOf("split", nil),
		Spec{Name: "delete_fields", Config: map[string]any{"fields": []any{"a"}}},
		wasmSpecOf("fail_odd", nil),
	)
	in := []connector.Message{
		{Payload: []byte(`{"n":1}`)}, {Payload: []byte(`{"n":2}`), ID: [16]byte{7}}, {Payload: []byte(`not json`)},
		{Payload: []byte(`{"n":4}`)},
	}
	res := c.ApplyBatch(context.Background(), in, connector.SchemaJSON)
	require.Equal(t, []string{`{"n":2,"part":1}`, `{"n":2,"part":2}`, `{"n":4,"part":1}`, `{"n":4,"part":2}`}, payloads(res.Messages))
	require.Equal(t, [16]byte{7}, res.Messages[0].ID, "the first message of a split keeps the id")
	require.Equal(t, [16]byte{}, res.Messages[1].ID)
	require.Equal(t, 1, res.Filtered)
	require.Len(t, res.Failed, 1)
	require.Equal(t, 2, res.Failed[0].Index)
	require.EqualError(t, res.Failed[0].Err, "transform wasm: the module failed the message: the payload is not a JSON object")
	require.Equal(t, connector.SchemaJSON, res.Schema)
	require.Equal(t, `{"n":1}`, string(in[0].Payload), "the input is not changed")
}

func TestWasmKeyHeadersAndTimestamp(t *testing.T) {
	t.Parallel()
	c := wasmChain(t, guestDir(t), wasmSpecOf("count", nil))
	ts := time.UnixMicro(1700000000123456)
	m := connector.Message{Payload: []byte(`x`), OriginTimestamp: ts,
		Headers: []connector.Header{connector.StringHeader("h", "v"), header.New("key", header.RawValue([]byte{1, 2}))}}
	res := c.ApplyBatch(context.Background(), []connector.Message{m, m}, connector.SchemaRaw)
	require.Empty(t, res.Failed)
	require.Len(t, res.Messages, 2)
	got := res.Messages[1]
	require.True(t, ts.Equal(got.OriginTimestamp))
	require.Equal(t, []connector.Header{connector.StringHeader("h", "v"), connector.StringHeader("count", "2"),
		header.New("key", header.RawValue([]byte{1, 2}))}, got.Headers, "the key keeps its kind")
	require.Equal(t, connector.SchemaRaw, res.Schema)
}

func TestWasmFailuresFailTheBatch(t *testing.T) {
	t.Parallel()
	dir := guestDir(t)
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{wasmSpecOf("spin", map[string]any{"timeout": "100ms"}), "transform wasm: wasm module ran past its timeout (100ms); stopped"},
		{wasmSpecOf("grow", map[string]any{"memory_limit": "16MiB"}), "transform wasm: wasm module exceeded its memory limit (16 MiB); stopped"},
	} {
		c := wasmChain(t, dir, tc.spec)
		in := []connector.Message{{Payload: []byte(`{"n":0,"x":"spin grow"}`)}, {Payload: []byte(`{"n":2}`)}}
		res := c.ApplyBatch(context.Background(), in, connector.SchemaJSON)
		require.Empty(t, res.Messages, tc.want)
		require.Len(t, res.Failed, 2)
		require.ErrorContains(t, res.Failed[0].Err, tc.want)
	}
}

// A route verdict passes the message on unchanged, with its Route set.
func TestWasmRouteSetsTheRoute(t *testing.T) {
	t.Parallel()
	c := wasmChain(t, guestDir(t), wasmSpecOf("route", nil))
	in := []connector.Message{{Payload: []byte(`{"n":0}`)}, {Payload: []byte(`{"n":1}`)}}
	res := c.ApplyBatch(context.Background(), in, connector.SchemaJSON)
	require.Empty(t, res.Failed)
	require.Len(t, res.Messages, 2)
	for i, m := range res.Messages {
		require.Equal(t, "other", m.Route)
		require.Equal(t, in[i].Payload, m.Payload)
	}
}

// TestBadWasmTables: a wasm table's problems have the file, line and key.
func TestBadWasmTables(t *testing.T) {
	t.Parallel()
	dir := guestDir(t)
	for i, tc := range []struct{ toml, want string }{
		{"[transforms.wasm]\nfunction = \"x\"\n", "s.toml:7: transforms.wasm.module: required key is missing; expected a string"},
		{"[transforms.wasm]\nmodule = \"missing.wasm\"\n", "s.toml:8: transforms.wasm.module: open " + filepath.Join(dir, "missing.wasm") + ": no such file or directory"},
		{"[transforms.wasm]\nmodule = \"guest.wasm\"\nfunction = \"nope\"\n", `s.toml:8: transforms.wasm.module: ` +
			filepath.Join(dir, "guest.wasm") + `: the module does not export the function "nope" (it exports "add_field", "count"`},
		{"[transforms.wasm]\nmodule = \"guest.wasm\"\nmemory_limit = 100\n", "s.toml:9: transforms.wasm.memory_limit: expected at least 64KiB"},
		{"[transforms.wasm]\nmodule = \"guest.wasm\"\nconfig = 3\n", "s.toml:9: transforms.wasm.config: expected a table"},
		{"[transforms.wasm]\nmodule = \"guest.wasm\"\ntimeout = \"0s\"\n", "s.toml:9: transforms.wasm.timeout: expected a duration above 0"},
	} {
		file := filepath.Join(dir, "s.toml")
		c, err := config.ParseConnector(file, []byte(sinkHeader+tc.toml))
		require.NoError(t, err, "case %d", i)
		var specs []Spec
		for _, tr := range c.Transforms {
			specs = append(specs, Spec{Name: tr.Name, Config: tr.Config, Source: file, Lines: tr.Lines})
		}
		_, err = Build(specs)
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), file+strings.TrimPrefix(tc.want, "s.toml"), "case %d", i)
	}
}

func TestWasmConfigIsPassed(t *testing.T) {
	t.Parallel()
	c := wasmChain(t, guestDir(t), wasmSpecOf("add_field", map[string]any{"config": map[string]any{"key": "env", "value": "prod"}}))
	require.Equal(t, `{"n":1,"env":"prod"}`, apply2(t, c, `{"n":1}`))
}

func apply2(t *testing.T, c Chain, payload string) string {
	t.Helper()
	m := connector.Message{Payload: []byte(payload)}
	_, keep, err := c.Apply(&m, connector.SchemaJSON)
	require.NoError(t, err)
	require.True(t, keep)
	return string(m.Payload)
}
