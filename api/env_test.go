package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"

	_ "github.com/ferryhq/ferry/connectors/exec"
	_ "github.com/ferryhq/ferry/connectors/file"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/apitoken"
	"github.com/ferryhq/ferry/runtime"
)

// The connectors below are real connectors run by the real runtime on the
// embedded broker; they only count what they do.

// tickSource emits 5 JSON messages per poll, every 10ms, forever.
type tickSource struct{ n int }

func (s *tickSource) Open(context.Context, []byte) error { return nil }

func (s *tickSource) Poll(ctx context.Context) (*connector.Batch, error) {
	t := time.NewTimer(10 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	b := &connector.Batch{Schema: connector.SchemaJSON}
	for range 5 {
		b.Messages = append(b.Messages, connector.Message{Payload: fmt.Appendf(nil, `{"n":%d}`, s.n)})
		s.n++
	}
	return b, nil
}

func (s *tickSource) Close(context.Context) error { return nil }

// countSink counts the messages it consumed, per connector key.
type countSink struct{ n *atomic.Int64 }

func (s *countSink) Open(context.Context) error { return nil }

func (s *countSink) Consume(_ context.Context, b *connector.SinkBatch) error {
	s.n.Add(int64(len(b.Messages)))
	return nil
}

func (s *countSink) Close(context.Context) error { return nil }

// Connector files of the test runtime.
const (
	genTOML = `
type = "source"
key = "gen"
name = "Generator"
path = "tick"
plugin_config_format = "json"

[plugin_config]
interval = "10ms"
password = "hunter2"
nested = { a = 1, list = ["x", "y"] }

[transforms.add_fields]
enabled = true
[[transforms.add_fields.fields]]
key = "via"
value.static = "ferry"

[transforms.delete_fields]
enabled = false
fields = ["n"]

[[streams]]
stream = "s"
topic = "t"
batch_length = 100
linger_time = "5ms"
`
	outTOML = `
type = "sink"
key = "out"
name = "Counter"
path = "count"

[plugin_config]
flush = 5

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
batch_length = 50
poll_interval = "5ms"
`
	otherTOML = `
type = "sink"
key = "other"
path = "count"

[[streams]]
stream = "s"
topics = ["t"]
poll_interval = "5ms"
consumer_group = "other-group"
`
	brokenTOML = `
type = "sink"
key = "broken"
path = "nosuch"

[[streams]]
stream = "s"
topics = ["t"]
`
)

// env is a started runtime with the test connectors and an API server on
// a loopback port.
type env struct {
	t      testing.TB
	dir    string
	rt     *runtime.Runtime
	srv    *Server
	url    string
	key    string // the API key the client sends
	logs   *logBuffer
	mu     sync.Mutex
	counts map[string]*atomic.Int64 // messages consumed, by sink key
}

// newEnv starts a runtime with the given connector files (name -> TOML)
// and the API with cfg (address and defaults filled in).
func newEnv(t testing.TB, files map[string]string, cfg config.HTTP) *env {
	t.Helper()
	return newEnvWith(t, files, cfg, nil)
}

// newEnvWith is newEnv with environment variables for the configuration
// (IGGY_CONNECTORS_* overrides).
func newEnvWith(t testing.TB, files map[string]string, cfg config.HTTP, vars map[string]string) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), counts: map[string]*atomic.Int64{}, key: cfg.APIKey, logs: &logBuffer{}}
	conns := filepath.Join(e.dir, "connectors")
	require.NoError(t, os.MkdirAll(conns, 0o755))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(conns, name), []byte(content), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(e.dir, "config.toml"), []byte(`
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
	reg := connector.NewRegistry()
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSource, Name: "tick",
		NewSource: func(connector.Config) (connector.Source, error) { return &tickSource{}, nil }}))
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSink, Name: "count",
		NewSink: func(c connector.Config) (connector.Sink, error) { return &countSink{n: e.count(c.Key)}, nil }}))
	for _, kind := range []connector.Kind{connector.KindSink, connector.KindSource} {
		// The built-ins that touch files or run commands, for the
		// admission tests.
		for _, name := range []string{"exec", "file"} {
			if info, ok := connector.Default.Lookup(kind, name); ok {
				require.NoError(t, reg.Register(info))
			}
		}
	}
	rcfg, err := config.Load(filepath.Join(e.dir, "config.toml"), config.WithEnv(config.MapEnv(vars)))
	require.NoError(t, err)
	rt, err := runtime.New(rcfg, runtime.Options{Registry: reg, ConfigOptions: []config.Option{config.WithEnv(config.MapEnv(vars))}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, rt.Start(ctx))
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	e.rt = rt
	e.srv, e.url = startServer(t, rt, cfg, e.logs)
	if e.key == "" {
		e.key = localToken(t, e.srv)
	}
	return e
}

func (e *env) count(key string) *atomic.Int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.counts[key] == nil {
		e.counts[key] = &atomic.Int64{}
	}
	return e.counts[key]
}

// startServer starts the API over rt on 127.0.0.1:0 and shuts it down at
// the end of the test.
func startServer(t testing.TB, rt Runtime, cfg config.HTTP, logs *logBuffer) (*Server, string) {
	t.Helper()
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1:0"
	}
	if cfg.Metrics.Endpoint == "" {
		cfg.Metrics.Endpoint = "/metrics"
	}
	var log *slog.Logger
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := New(rt, cfg, log, WithVersion("1.2.3"), WithTokenDir(filepath.Join(t.TempDir(), "tokens")))
	require.NoError(t, err)
	require.NoError(t, srv.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, srv.Shutdown(ctx))
	})
	scheme := "http"
	if cfg.TLS.Enabled {
		scheme = "https"
	}
	return srv, scheme + "://" + srv.Addr()
}

// localToken is the token a server without api_key wrote, read as the
// ferry CLI reads it: from the token directory, by the API's address.
func localToken(t testing.TB, srv *Server) string {
	t.Helper()
	path := srv.TokenPath()
	require.NotEmpty(t, path, "a server without api_key writes a local token")
	tok, err := apitoken.Read(filepath.Dir(path), srv.Addr())
	require.NoError(t, err)
	return tok
}

// unstarted is a real runtime that was not started: no connectors, no
// provider; enough for the cross-cutting tests.
func unstarted(t testing.TB) *runtime.Runtime {
	t.Helper()
	rt, err := runtime.New(config.Default(), runtime.Options{})
	require.NoError(t, err)
	return rt
}

// response is one answered request.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request with the env's API key.
func (e *env) do(method, path string, body string) response {
	e.t.Helper()
	h := http.Header{}
	if e.key != "" {
		h.Set(APIKeyHeader, e.key)
	}
	return request(e.t, http.DefaultClient, method, e.url+path, body, h)
}

func request(t testing.TB, client *http.Client, method, url, body string, h http.Header) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for k, vs := range h {
		req.Header[k] = vs
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return response{status: res.StatusCode, header: res.Header, body: data}
}

// object decodes a JSON object body.
func (r response) object(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

// array decodes a JSON array of objects.
func (r response) array(t testing.TB) []map[string]any {
	t.Helper()
	var a []map[string]any
	require.NoError(t, json.Unmarshal(r.body, &a), "body: %s", r.body)
	return a
}

// requireError checks an error answer: status and upstream's
// {"code", "reason"} body.
func requireError(t testing.TB, r response, status int, code, reasonPart string) {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	m := r.object(t)
	require.ElementsMatch(t, []string{"code", "reason"}, keys(m), "error body %s", r.body)
	require.Equal(t, code, m["code"], "body: %s", r.body)
	require.Contains(t, m["reason"], reasonPart)
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// eventually waits for cond (connectortest.Eventually).
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	connectortest.Eventually(t, what, cond)
}

// statusOf returns a connector's status as the API shows it.
func (e *env) statusOf(kind, key string) string {
	r := e.do("GET", "/"+kind+"s/"+key, "")
	if r.status != http.StatusOK {
		return fmt.Sprintf("HTTP %d", r.status)
	}
	var m map[string]any
	if json.Unmarshal(r.body, &m) != nil {
		return "bad body"
	}
	s, _ := m["status"].(string)
	return s
}

// logBuffer collects log output, safe for concurrent writers.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
