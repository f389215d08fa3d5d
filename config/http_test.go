package config

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// configServer is an in-memory config API in upstream's shape, behind an
// envelope {"data": ..., "error": ...}, with custom paths for two templates.
type configServer struct {
	t        *testing.T
	mu       sync.Mutex
	sinks    map[string][]map[string]any // key -> versions
	active   map[string]int
	requests []string
	failNext atomic.Int32 // answer this many requests with 503 first
	apiError string       // answer with {"error": apiError}
}

func newConfigServer(t *testing.T) (*configServer, *httptest.Server) {
	cs := &configServer{t: t, sinks: map[string][]map[string]any{}, active: map[string]int{}}
	cs.sinks["stdout"] = []map[string]any{sinkJSON("stdout", 0, "first"), sinkJSON("stdout", 1, "second")}
	cs.active["stdout"] = 0
	srv := httptest.NewServer(http.HandlerFunc(cs.serve))
	t.Cleanup(srv.Close)
	return cs, srv
}

func sinkJSON(key string, version int, name string) map[string]any {
	return map[string]any{
		"key": key, "enabled": true, "version": version, "name": name, "path": "libiggy_connector_stdout_sink",
		"transforms": nil, "plugin_config_format": nil, "plugin_config": map[string]any{"print_payload": true},
		"streams": []any{map[string]any{"stream": "s", "topics": []any{"t"}, "schema": "json", "batch_length": 10,
			"poll_interval": "5ms", "consumer_group": nil}},
	}
}

func (cs *configServer) reply(w http.ResponseWriter, status int, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "error": nil})
}

func (cs *configServer) serve(w http.ResponseWriter, r *http.Request) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.requests = append(cs.requests, r.Method+" "+r.URL.RequestURI())
	if r.Header.Get("Authorization") != "Bearer cfg-secret" {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"missing token"}`)
		return
	}
	if cs.failNext.Load() > 0 {
		cs.failNext.Add(-1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if cs.apiError != "" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": nil, "error": map[string]any{"message": cs.apiError}})
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/api")
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case r.Method == http.MethodGet && p == "/v2/active": // custom get_active_configs
		sinks := map[string]any{}
		for k, vs := range cs.sinks {
			sinks[k] = vs[cs.active[k]]
		}
		sinks["broken"] = map[string]any{"key": "broken", "streams": []any{map[string]any{"stream": "s", "topics": []any{"t"}, "poll_interval": "eventually"}}}
		cs.reply(w, 200, map[string]any{"sinks": sinks, "sources": map[string]any{}})
	case r.Method == http.MethodGet && p == "/configs/active/versions":
		out := map[string]any{}
		for k := range cs.sinks {
			out[k] = map[string]any{"version": cs.active[k], "created_at": "2025-01-02T03:04:05Z"}
		}
		cs.reply(w, 200, map[string]any{"sinks": out, "sources": map[string]any{}})
	case len(parts) >= 3 && parts[0] == "sinks" && parts[2] == "configs":
		key := parts[1]
		vs, ok := cs.sinks[key]
		switch {
		case r.Method == http.MethodGet && len(parts) == 3:
			if !ok {
				cs.reply(w, 404, nil)
				return
			}
			arr := make([]any, len(vs))
			for i, v := range vs {
				arr[i] = v
			}
			cs.reply(w, 200, arr)
		case r.Method == http.MethodGet && parts[3] == "active":
			if !ok {
				cs.reply(w, 404, nil)
				return
			}
			cs.reply(w, 200, vs[cs.active[key]])
		case r.Method == http.MethodGet:
			n, err := strconv.Atoi(parts[3])
			if !ok || err != nil || n >= len(vs) {
				cs.reply(w, 404, nil)
				return
			}
			cs.reply(w, 200, vs[n])
		case r.Method == http.MethodPut && parts[3] == "active":
			var body struct{ Version int }
			require.NoError(cs.t, json.NewDecoder(r.Body).Decode(&body))
			cs.active[key] = body.Version
			w.WriteHeader(http.StatusOK)
		case r.Method == http.MethodDelete:
			n, _ := strconv.Atoi(r.URL.Query().Get("version"))
			cs.sinks[key] = append(vs[:n:n], vs[n+1:]...)
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusMethodNotAllowed)
		}
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "v2" && parts[1] == "sinks": // custom create_sink
		key := parts[2]
		var body map[string]any
		require.NoError(cs.t, json.NewDecoder(r.Body).Decode(&body))
		require.NotContains(cs.t, body, "key", "CreateSinkConfig has no key")
		require.NotContains(cs.t, body, "version", "CreateSinkConfig has no version")
		body["key"] = key
		body["version"] = len(cs.sinks[key])
		cs.sinks[key] = append(cs.sinks[key], body)
		cs.reply(w, 201, body)
	default:
		cs.reply(w, 404, nil)
	}
}

func newTestProvider(t *testing.T, srv *httptest.Server, mutate func(*Connectors)) *HTTPProvider {
	cfg := Connectors{
		ConfigType: ProviderHTTP, BaseURL: srv.URL + "/api/", Timeout: 5 * time.Second,
		RequestHeaders: map[string]string{"Authorization": "Bearer cfg-secret"},
		URLTemplates:   map[string]string{"get_active_configs": "/v2/active", "create_sink": "/v2/sinks/{key}"},
		Response:       Response{DataPath: "data", ErrorPath: "error"},
		Retry:          Retry{Enabled: true, MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, BackoffMultiplier: 2},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	p, err := NewHTTPProvider(cfg, noEnv)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

func TestHTTPProviderLoad(t *testing.T) {
	t.Parallel()
	cs, srv := newConfigServer(t)
	p := newTestProvider(t, srv, nil)
	cs.failNext.Store(2) // two 503s, then success: retried

	set, err := p.Load(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"GET /api/v2/active", "GET /api/v2/active", "GET /api/v2/active"}, cs.requests)
	require.Len(t, set.Connectors, 1)
	c := set.Connectors[0]
	require.Equal(t, KindSink, c.Type)
	require.Equal(t, "stdout", c.Key)
	require.Equal(t, "first", c.Name)
	require.Equal(t, uint32(10), c.Consumers[0].BatchLength)
	require.Equal(t, "iggy-connect-sink-stdout", c.Consumers[0].ConsumerGroup, "null means the default")
	require.Len(t, set.Errors, 1, "one broken entry does not stop the others")
	require.Equal(t, "broken", set.Errors[0].Key)
	require.Contains(t, set.Errors[0].Error(), "sinks.broken: streams[0].poll_interval: expected a duration")
}

func TestHTTPProviderVersions(t *testing.T) {
	t.Parallel()
	cs, srv := newConfigServer(t)
	p := newTestProvider(t, srv, nil)
	ctx := t.Context()

	vs, err := p.Versions(ctx, KindSink, "stdout")
	require.NoError(t, err)
	require.Equal(t, []uint64{0, 1}, versionsOf(vs))
	require.Equal(t, []bool{true, false}, activeOf(vs))
	require.Equal(t, time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), vs[0].CreatedAt)

	c, err := p.Get(ctx, KindSink, "stdout", 1)
	require.NoError(t, err)
	require.Equal(t, "second", c.Name)
	_, err = p.Get(ctx, KindSink, "stdout", 5)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = p.Active(ctx, KindSink, "ghost")
	require.ErrorIs(t, err, ErrNotFound)

	require.NoError(t, p.SetActive(ctx, KindSink, "stdout", 1))
	act, err := p.Active(ctx, KindSink, "stdout")
	require.NoError(t, err)
	require.Equal(t, uint64(1), act.Version)

	// Create posts upstream's CreateSinkConfig to the custom template.
	n := *act
	n.Name = "third"
	n.Consumers = []ConsumerStream{{Stream: "s", Topics: []string{"t"}, MaxRetries: 5, OnError: PolicyDeadLetter}}
	saved, err := p.Create(ctx, &n)
	require.NoError(t, err)
	require.Equal(t, uint64(2), saved.Version)
	require.Equal(t, "third", saved.Name)
	require.Equal(t, uint32(5), saved.Consumers[0].MaxRetries, "Ferry's keys travel when set")
	require.Equal(t, PolicyDeadLetter, saved.Consumers[0].OnError)

	// Invalid connectors are not sent.
	before := len(cs.requests)
	_, err = p.Create(ctx, &Connector{Type: KindSink, Key: "stdout", Consumers: []ConsumerStream{{Stream: "s"}}})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "streams[0].topics")
	require.Len(t, cs.requests, before)

	// Delete refuses the active version and sends ?version= otherwise.
	err = p.Delete(ctx, KindSink, "stdout", 1)
	require.ErrorIs(t, err, ErrActiveVersion)
	require.NoError(t, p.Delete(ctx, KindSink, "stdout", 0))
	require.Contains(t, cs.requests, "DELETE /api/sinks/stdout/configs?version=0")
	require.ErrorIs(t, p.Delete(ctx, KindSink, "stdout", 9), ErrNotFound)
}

func TestHTTPProviderErrors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	// error_path: a non-null error fails the request with its message.
	cs, srv := newConfigServer(t)
	p := newTestProvider(t, srv, func(c *Connectors) { c.Response.ErrorPath = "error.message" })
	cs.apiError = "quota exceeded"
	_, err := p.Load(ctx)
	require.ErrorContains(t, err, `the API returned an error at "error.message": quota exceeded`)

	// data_path that is not there: the message shows what is.
	_, srv2 := newConfigServer(t)
	p2 := newTestProvider(t, srv2, func(c *Connectors) { c.Response.DataPath = "payload.0" })
	_, err = p2.Load(ctx)
	require.ErrorContains(t, err, `data_path "payload.0" not found in the response; the response holds { data }`)

	// 4xx is not retried, and the error_path message is used.
	cs3, srv3 := newConfigServer(t)
	p3 := newTestProvider(t, srv3, func(c *Connectors) { c.RequestHeaders = nil })
	_, err = p3.Load(ctx)
	require.ErrorContains(t, err, "HTTP 401: missing token")
	require.Len(t, cs3.requests, 1)

	// 5xx until the retries run out.
	cs4, srv4 := newConfigServer(t)
	p4 := newTestProvider(t, srv4, nil)
	cs4.failNext.Store(100)
	_, err = p4.Load(ctx)
	require.ErrorContains(t, err, "HTTP 503")
	require.Len(t, cs4.requests, 4, "the first request and max_attempts = 3 retries")

	// Retries disabled: one request.
	cs5, srv5 := newConfigServer(t)
	p5 := newTestProvider(t, srv5, func(c *Connectors) { c.Retry.Enabled = false })
	cs5.failNext.Store(1)
	_, err = p5.Load(ctx)
	require.Error(t, err)
	require.Len(t, cs5.requests, 1)

	// The timeout bounds each request.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	p6 := newTestProvider(t, hang, func(c *Connectors) { c.Timeout = 20 * time.Millisecond; c.Retry.MaxAttempts = 1 })
	_, err = p6.Load(ctx)
	require.ErrorContains(t, err, "context deadline exceeded")
	require.ErrorContains(t, err, "after 2 attempts")

	// A cancelled context stops the retries.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = p4.Load(cctx)
	require.ErrorIs(t, err, context.Canceled)
}

func TestNewHTTPProviderChecks(t *testing.T) {
	t.Parallel()
	_, err := NewHTTPProvider(Connectors{BaseURL: "ftp://x", URLTemplates: map[string]string{"bogus": "/x"},
		RequestHeaders: map[string]string{"bad header": "v", "X-Ok": "line\nbreak"}}, noEnv)
	require.ErrorIs(t, err, ErrInvalid)
	for _, w := range []string{"connectors.base_url: expected an http://", "connectors.url_templates.bogus: unknown URL template",
		`connectors.request_headers."bad header": not a valid HTTP header name`, "connectors.request_headers.X-Ok: header values cannot contain line breaks"} {
		require.Contains(t, err.Error(), w)
	}
	require.NotContains(t, err.Error(), "line\nbreak", "header values are never echoed")
}

func TestNewProviderSelects(t *testing.T) {
	t.Parallel()
	_, srv := newConfigServer(t)
	rt, err := Parse("c.toml", []byte(`
[connectors]
config_type = "http"
base_url = "`+srv.URL+`/api"
[connectors.request_headers]
Authorization = "Bearer cfg-secret"
[connectors.url_templates]
get_active_configs = "/v2/active"
[connectors.response]
data_path = "data"
`), WithEnv(MapEnv(map[string]string{"IGGY_CONNECTORS_SINK_STDOUT_NAME": "from env"})))
	require.NoError(t, err)
	p, err := NewProvider(rt)
	require.NoError(t, err)
	defer p.Close()
	require.IsType(t, &HTTPProvider{}, p)
	set, err := p.Load(t.Context())
	require.NoError(t, err)
	require.Equal(t, "from env", set.Get(KindSink, "stdout").Name, "overrides apply to fetched connectors, from the runtime's environment")
}
