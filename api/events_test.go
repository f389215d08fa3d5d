package api

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/eventtypes"
	"github.com/ferryhq/ferry/runtime"
)

// eventsEnv is a running runtime whose config.toml declares two event
// types: a source produces one, a sink and a hook consume them, and a
// second sink consumes a type nobody produces.
func eventsEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), counts: map[string]*atomic.Int64{}, logs: &logBuffer{}}
	conns := filepath.Join(e.dir, "connectors")
	require.NoError(t, os.MkdirAll(filepath.Join(e.dir, "schemas"), 0o755))
	require.NoError(t, os.MkdirAll(conns, 0o755))
	files := map[string]string{
		"config.toml": `[iggy]
address = "embedded"
embedded_address = "127.0.0.1:0"
create_missing = true
[state]
path = "state"
[connectors]
config_type = "local"
config_dir = "connectors"
[http]
enabled = false

[events."tick.happened"]
description = "A tick"
version = "2.0.0"
schema_path = "schemas/tick.json"

[events."tock.happened"]
schema = '{"type": "object"}'
`,
		"schemas/tick.json":         `{"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}`,
		"connectors/gen.toml":       "type = \"source\"\nkey = \"gen\"\npath = \"tick\"\n[[streams]]\nstream = \"app\"\ntopic = \"ticks\"\nproduces = [\"tick.happened\"]\n",
		"connectors/out.toml":       "type = \"sink\"\nkey = \"out\"\npath = \"count\"\n[[streams]]\nstream = \"app\"\ntopics = [\"ticks\"]\nconsumes = [\"tick.happened\"]\n",
		"connectors/tocks.toml":     "type = \"sink\"\nkey = \"tocks\"\npath = \"count\"\n[[streams]]\nstream = \"app\"\ntopics = [\"tocks\"]\nconsumes = [\"tock.happened\"]\n",
		"connectors/hook-loud.toml": "type = \"sink\"\nkey = \"hook-loud\"\npath = \"exec\"\n[plugin_config]\ncommand = \"true\"\n[[streams]]\nstream = \"app\"\ntopics = [\"ticks\"]\nconsumes = [\"tick.happened\"]\n",
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644))
	}
	reg := connector.NewRegistry()
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSource, Name: "tick",
		NewSource: func(connector.Config) (connector.Source, error) { return &tickSource{}, nil }}))
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSink, Name: "count",
		NewSink: func(c connector.Config) (connector.Sink, error) { return &countSink{n: e.count(c.Key)}, nil }}))
	info, ok := connector.Default.Lookup(connector.KindSink, "exec")
	require.True(t, ok)
	require.NoError(t, reg.Register(info))
	noEnv := config.WithEnv(config.MapEnv(nil))
	rcfg, err := config.Load(filepath.Join(e.dir, "config.toml"), noEnv)
	require.NoError(t, err)
	rt, err := runtime.New(rcfg, runtime.Options{Registry: reg, ConfigOptions: []config.Option{noEnv}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, rt.Start(ctx))
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	e.rt = rt
	e.srv, e.url = startServer(t, rt, config.HTTP{}, e.logs)
	e.key = localToken(t, e.srv)
	return e
}

func TestEventsEndpoint(t *testing.T) {
	t.Parallel()
	e := eventsEnv(t)

	r := e.do("GET", "/events", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	var body struct {
		Types []struct {
			Name      string                `json:"name"`
			Version   string                `json:"version"`
			Schema    json.RawMessage       `json:"schema"`
			Producers []eventtypes.Endpoint `json:"producers"`
			Consumers []eventtypes.Endpoint `json:"consumers"`
		} `json:"types"`
		Errors   []string             `json:"errors"`
		Findings []eventtypes.Finding `json:"findings"`
	}
	require.NoError(t, json.Unmarshal(r.body, &body))
	require.Len(t, body.Types, 2)
	tick := body.Types[0]
	require.Equal(t, "tick.happened", tick.Name)
	require.Equal(t, "2.0.0", tick.Version)
	require.JSONEq(t, `{"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}`, string(tick.Schema))
	require.Equal(t, "gen", tick.Producers[0].Key)
	require.Equal(t, []string{"sink out", "hook hook-loud"}, []string{tick.Consumers[1].Kind + " " + tick.Consumers[1].Key, tick.Consumers[0].Kind + " " + tick.Consumers[0].Key})
	require.Empty(t, body.Errors)
	require.Len(t, body.Findings, 1)
	require.Equal(t, "tock.happened", body.Findings[0].Type)
	require.Contains(t, body.Findings[0].Message, "sink tocks (app/tocks) consumes it, but nobody produces it")

	// What GET /events answers is a snapshot `ferry events check
	// --against` reads back.
	snap, err := eventtypes.ParseCatalog(r.body)
	require.NoError(t, err)
	require.Equal(t, []string{"tick.happened", "tock.happened"}, snap.Names())

	r = e.do("GET", "/asyncapi.yaml", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "application/yaml"))
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(r.body, &doc))
	require.Equal(t, "3.0.0", doc["asyncapi"])
	ops := doc["operations"].(map[string]any)
	require.Len(t, ops, 4, "a send for the source, a receive for each sink and the hook: %s", r.body)
	require.Equal(t, "send", ops["gen.send.app.ticks"].(map[string]any)["action"])
	require.Equal(t, "receive", ops["hook-loud.receive.app.ticks"].(map[string]any)["action"])
	require.Equal(t, "app/ticks", doc["channels"].(map[string]any)["app.ticks"].(map[string]any)["address"])

	// Both need the API's credential.
	for _, p := range []string{"/events", "/asyncapi.yaml"} {
		res := request(t, http.DefaultClient, "GET", e.url+p, "", http.Header{})
		require.Equal(t, http.StatusUnauthorized, res.status, p)
	}
}
