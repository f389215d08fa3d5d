package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	_ "github.com/ferryhq/ferry/connectors/derive"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

// Connector files of the views test: a derive sink that cannot start
// (an unknown aggregate) and a sink that keeps no view.
const (
	viewBrokenTOML = `
type = "sink"
key = "derive-broken"
path = "derive"
[[streams]]
stream = "v"
topics = ["in"]
schema = "json"
consumer_group = "broken"
[plugin_config]
to = "v/broken"
aggregates = ["median(x)"]
`
	viewCountTOML = `
type = "sink"
key = "plain"
path = "count"
[[streams]]
stream = "v"
topics = ["in"]
poll_interval = "5ms"
consumer_group = "plain"
`
)

const viewAPIKey = "views-test-key"

// viewEnv starts a runtime with the sinks above and the API with an
// api_key, and creates two real derive sinks through the API, as ferry
// derive create does (they need the embedded broker's address, known once
// the runtime started): "derive-counts", a view named as ferry derive
// names them, and "raw", a derive sink named otherwise; both count the
// messages of v/in per message key.
func viewEnv(t *testing.T) (*env, *runtime.Runtime) {
	t.Helper()
	dir := t.TempDir()
	conns := filepath.Join(dir, "connectors")
	require.NoError(t, os.MkdirAll(conns, 0o755))
	for name, content := range map[string]string{"plain.toml": viewCountTOML, "broken.toml": viewBrokenTOML} {
		require.NoError(t, os.WriteFile(filepath.Join(conns, name), []byte(content), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(`
[iggy]
address = "embedded"
embedded_address = "127.0.0.1:0"
[state]
path = "state"
[connectors]
config_type = "local"
config_dir = "connectors"
[http]
enabled = false
`), 0o644))
	e := &env{t: t, dir: dir, counts: map[string]*atomic.Int64{}, key: viewAPIKey}
	reg := connector.NewRegistry()
	info, ok := connector.Default.Lookup(connector.KindSink, "derive")
	require.True(t, ok, "the derive sink is registered")
	require.NoError(t, reg.Register(info))
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSink, Name: "count",
		NewSink: func(c connector.Config) (connector.Sink, error) { return &countSink{n: e.count(c.Key)}, nil }}))
	noEnv := config.WithEnv(config.MapEnv(nil))
	rcfg, err := config.Load(filepath.Join(dir, "config.toml"), noEnv)
	require.NoError(t, err)
	rt, err := runtime.New(rcfg, runtime.Options{Registry: reg, ConfigOptions: []config.Option{noEnv}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, rt.Start(ctx))
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	e.rt = rt
	e.srv, e.url = startServer(t, rt, config.HTTP{APIKey: viewAPIKey}, nil)
	for _, key := range []string{"derive-counts", "raw"} {
		body, err := json.Marshal(map[string]any{"enabled": true, "name": key, "path": "derive",
			"streams":       []map[string]any{{"stream": "v", "topics": []string{"in"}, "schema": "json", "poll_interval": "5ms", "consumer_group": key}},
			"plugin_config": map[string]any{"to": "v/out-" + key, "aggregates": []string{"count(*)"}, "address": rt.IggyAddress()}})
		require.NoError(t, err)
		r := e.do("POST", "/sinks/"+key+"/configs", string(body))
		require.Equal(t, http.StatusOK, r.status, "create %s: %s", key, r.body)
		version := r.object(t)["version"]
		r = e.do("PUT", "/sinks/"+key+"/configs/active", fmt.Sprintf(`{"version":%v}`, version))
		require.Equal(t, http.StatusNoContent, r.status, "activate %s: %s", key, r.body)
		r = e.do("POST", "/sinks/"+key+"/restart", "")
		require.Equal(t, http.StatusNoContent, r.status, "start %s: %s", key, r.body)
	}
	return e, rt
}

// TestViewErrors checks GET /views/{name}/{key} against real derive sinks:
// keys that need escaping in a URL (a slash, unicode, spaces and reserved
// characters, control bytes in a raw key, "." and "..") are found under
// their escaped form, through the derive-NAME sink and through a derive
// sink named as it is; and the errors: an unknown view, a sink that keeps no view, an absent key, no
// or a wrong credential, a missing key segment, a derive sink that is
// not running.
func TestViewErrors(t *testing.T) {
	t.Parallel()
	e, rt := viewEnv(t)
	eventually(t, "sinks running", func() bool {
		return e.statusOf("sink", "derive-counts") == "running" && e.statusOf("sink", "raw") == "running" &&
			e.statusOf("sink", "plain") == "running" && e.statusOf("sink", "derive-broken") == "error"
	})

	keys := map[string]int{ // key → how many messages carry it
		"a/b":           2,
		"ключ ✓":        3,
		"sp ace?#%&=+":  1,
		"\x00\x01\x7f/": 2, // sent as a raw (binary) key; the derive sink wants UTF-8
		"..":            1,
		".":             2,
		"plain-ascii_1": 4,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := iggy.Dial(ctx, rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	var msgs []iggy.Message
	for k, n := range keys {
		v := header.StringValue(k)
		if k == "\x00\x01\x7f/" {
			v = header.RawValue([]byte(k))
		}
		for range n {
			msgs = append(msgs, iggy.Message{Payload: []byte(`{"x":1}`), Headers: []header.Header{header.New(iggy.KeyHeader, v)}})
		}
	}
	_, err = cl.SendMessages(ctx, iggy.NamedID("v"), iggy.NamedID("in"), iggy.Balanced(), msgs)
	require.NoError(t, err)

	// A client escapes the key as one path segment; "." and ".." as %2E,
	// or the server's path cleaning takes them for directories.
	path := func(name, key string) string {
		if key == "." || key == ".." {
			return "/views/" + url.PathEscape(name) + "/" + strings.Repeat("%2E", len(key))
		}
		return "/views/" + url.PathEscape(name) + "/" + url.PathEscape(key)
	}
	count := func(r response) float64 {
		var b struct {
			View  string
			Key   string
			Value struct{ Count float64 }
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &b) != nil {
			return -1
		}
		return b.Value.Count
	}
	for _, name := range []string{"counts", "raw"} {
		eventually(t, name+": every key counted", func() bool {
			for k, n := range keys {
				if r := e.do("GET", path(name, k), ""); count(r) != float64(n) {
					return false
				}
			}
			return true
		})
	}
	r := e.do("GET", path("counts", "ключ ✓"), "")
	require.Equal(t, http.StatusOK, r.status)
	m := r.object(t)
	require.Equal(t, "counts", m["view"])
	require.Equal(t, "ключ ✓", m["key"], "the key unescaped, as the sink holds it")
	require.Equal(t, map[string]any{"key": "ключ ✓", "count": float64(3)}, m["value"])
	r = e.do("GET", path("counts", "a/b"), "")
	require.Equal(t, "a/b", r.object(t)["key"], "%%2F is a slash inside the key segment")
	r = e.do("GET", path("counts", "\x00\x01\x7f/"), "")
	require.Equal(t, map[string]any{"key": "\x00\x01\x7f/", "count": float64(2)}, r.object(t)["value"], "control bytes escaped")
	r = e.do("GET", path("counts", ".."), "")
	require.Equal(t, "..", r.object(t)["key"])
	// Keys that differ from the ones stored only once unescaped do not
	// match: "a%2Fb" escaped twice is the key "a%2Fb".
	requireError(t, e.do("GET", path("counts", "a%2Fb"), ""), http.StatusNotFound, codeNoKey, "no value for this key")

	t.Run("unknown view", func(t *testing.T) {
		requireError(t, e.do("GET", path("nosuch", "a/b"), ""), http.StatusNotFound, "sink_not_found", "nosuch")
	})
	t.Run("sink without a view", func(t *testing.T) {
		requireError(t, e.do("GET", path("plain", "plain-ascii_1"), ""), http.StatusNotFound, codeNoView, "answers no point lookups")
	})
	t.Run("absent key", func(t *testing.T) {
		requireError(t, e.do("GET", path("counts", "nobody"), ""), http.StatusNotFound, codeNoKey, `key "nobody"`)
		requireError(t, e.do("GET", path("raw", "nobody"), ""), http.StatusNotFound, codeNoKey, "no value for this key")
	})
	t.Run("no key segment", func(t *testing.T) {
		r := e.do("GET", "/views/counts/", "")
		require.Equal(t, http.StatusNotFound, r.status, "body %s", r.body)
	})
	t.Run("credentials", func(t *testing.T) {
		r := request(t, http.DefaultClient, "GET", e.url+path("counts", "a/b"), "", nil)
		requireError(t, r, http.StatusUnauthorized, codeUnauthorized, "missing api-key header")
		require.NotContains(t, string(r.body), "count", "no value without a credential")
		r = request(t, http.DefaultClient, "GET", e.url+path("counts", "a/b"), "", http.Header{APIKeyHeader: {"wrong"}})
		requireError(t, r, http.StatusUnauthorized, codeUnauthorized, "invalid api-key header")
		// An unknown view answers 401 too: no probing for names.
		r = request(t, http.DefaultClient, "GET", e.url+path("nosuch", "k"), "", nil)
		require.Equal(t, http.StatusUnauthorized, r.status)
	})
	t.Run("derive sink not running", func(t *testing.T) {
		requireError(t, e.do("GET", path("broken", "a/b"), ""), http.StatusNotFound, codeNoView, "not running")
	})
}
