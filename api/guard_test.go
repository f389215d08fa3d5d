package api

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/stretchr/testify/require"
)

// send is request with a chosen Host header ("" keeps the URL's) and
// headers set as given (no Content-Type is added).
func send(t testing.TB, method, url, host, body string, h http.Header) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	if host != "" {
		req.Host = host
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return response{status: res.StatusCode, header: res.Header, body: data}
}

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// execBody is the reviewer's attack: an exec sink that leaves a mark.
func execBody(mark string) string {
	return fmt.Sprintf(`{"enabled": true, "name": "x", "path": "exec", "streams": [{"stream": "s", "topics": ["t"]}],
		"plugin_config": {"command": "touch %s"}}`, mark)
}

// TestBrowserAttackIsRefused replays the reviewer's reproduction against a
// runtime without an API key: a web page's "simple" POSTs (text/plain, no
// preflight) and DNS-rebound requests cannot create or start an exec sink,
// and neither can a plain client without a key.
func TestBrowserAttackIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{})
	mark := filepath.Join(t.TempDir(), "PWNED")
	port := e.url[strings.LastIndex(e.url, ":")+1:]
	for i, tc := range []struct {
		name   string
		host   string
		h      http.Header
		status int
		code   string
	}{
		{"cross-origin text/plain", "", headers("Origin", "http://evil.example", "Content-Type", "text/plain;charset=UTF-8"), http.StatusForbidden, codeOriginNotAllowed},
		{"cross-origin form", "", headers("Origin", "http://evil.example", "Content-Type", "application/x-www-form-urlencoded"), http.StatusForbidden, codeOriginNotAllowed},
		{"cross-origin JSON", "", headers("Origin", "http://evil.example", "Content-Type", "application/json"), http.StatusForbidden, codeOriginNotAllowed},
		{"sandboxed page", "", headers("Origin", "null", "Content-Type", "text/plain"), http.StatusForbidden, codeOriginNotAllowed},
		{"DNS rebinding", "evil.example:" + port, headers("Origin", "http://evil.example:"+port, "Content-Type", "text/plain"), http.StatusForbidden, codeHostNotAllowed},
		{"DNS rebinding, same origin", "evil.example:" + port, headers("Content-Type", "application/json"), http.StatusForbidden, codeHostNotAllowed},
		{"text/plain without Origin", "", headers("Content-Type", "text/plain"), http.StatusUnsupportedMediaType, codeUnsupportedMedia},
		{"no Content-Type", "", nil, http.StatusUnsupportedMediaType, codeUnsupportedMedia},
		{"JSON without the local token", "", headers("Content-Type", "application/json"), http.StatusUnauthorized, codeUnauthorized},
		{"JSON with a wrong token", "", headers("Content-Type", "application/json", APIKeyHeader, strings.Repeat("0", 64)), http.StatusUnauthorized, codeUnauthorized},
	} {
		r := send(t, "POST", e.url+"/sinks/pwn/configs", tc.host, execBody(mark), tc.h)
		requireError(t, r, tc.status, tc.code, "")
		r = send(t, "POST", e.url+"/sinks/pwn/restart", tc.host, "", tc.h)
		require.NotEqual(t, http.StatusNoContent, r.status, "case %d %s: restart", i, tc.name)
		require.Equal(t, http.StatusNotFound, e.do("GET", "/sinks/pwn/configs", "").status, "case %d %s: nothing stored", i, tc.name)
	}
	require.NoFileExists(t, mark)
	entries, err := os.ReadDir(filepath.Join(e.dir, "connectors"))
	require.NoError(t, err)
	for _, en := range entries {
		require.NotContains(t, en.Name(), "pwn")
	}
}

func TestHostHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{})
	port := e.url[strings.LastIndex(e.url, ":")+1:]
	for i, tc := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:" + port, true},
		{"127.0.0.1", true},
		{"127.1.2.3:" + port, true},
		{"localhost:" + port, true},
		{"LocalHost.:" + port, true},
		{"[::1]:" + port, true},
		{"[::1]", true},
		{"evil.example:" + port, false},
		{"evil.example", false},
		{"localhost.evil.example:" + port, false},
		{"127.0.0.1.nip.io:" + port, false},
		{"192.0.2.1:" + port, false},
	} {
		for _, m := range []struct{ method, path string }{{"GET", "/health"}, {"GET", "/sinks"}, {"POST", "/sinks/out/restart"}} {
			r := send(t, m.method, e.url+m.path, tc.host, "", headers(APIKeyHeader, e.key))
			if tc.ok {
				require.Less(t, r.status, 300, "case %d: %s %s with Host %q: %s", i, m.method, m.path, tc.host, r.body)
			} else {
				requireError(t, r, http.StatusForbidden, codeHostNotAllowed, "DNS rebinding")
			}
		}
	}

	// The host of [http] address counts as the API's own; a name bound
	// to loopback gets the check too.
	e2 := newEnv(t, nil, config.HTTP{Address: "localhost:0"})
	port2 := e2.url[strings.LastIndex(e2.url, ":")+1:]
	require.Equal(t, http.StatusOK, send(t, "GET", e2.url+"/sinks", "localhost:"+port2, "", headers(APIKeyHeader, e2.key)).status)
	require.Equal(t, http.StatusForbidden, send(t, "GET", e2.url+"/sinks", "evil.example:"+port2, "", nil).status)

	// Beyond loopback the Host check does not apply (the API answers to
	// the names the machine has); the Origin check still does.
	srv, err := New(unstarted(t), config.HTTP{Address: "0.0.0.0:0"}, nil)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://ferry.internal:8081/health", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	rec = httptest.NewRecorder()
	req := httptest.NewRequest("GET", "http://ferry.internal:8081/health", nil)
	req.Header.Set("Origin", "http://evil.example")
	srv.Handler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code)
}

func TestOriginHeader(t *testing.T) {
	t.Parallel()
	const key = "Qz7-key"
	noKey := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{})
	keyed := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{APIKey: key})
	listed := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{APIKey: key,
		CORS: config.CORS{Enabled: true, AllowedOrigins: []string{"https://console.example"}}})
	listedNoKey := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{
		CORS: config.CORS{Enabled: true, AllowedOrigins: []string{"https://console.example", "null"}}})
	anyNoKey := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{CORS: config.CORS{Enabled: true, AllowedOrigins: []string{"*"}}})
	self := func(e *env) string { return e.url } // http://127.0.0.1:<port>
	for i, tc := range []struct {
		name         string
		e            *env
		method, path string
		origin       []string // Origin headers sent
		ownOrigin    bool     // send the API's own origin instead
		status       int
	}{
		{"curl GET, no key", noKey, "GET", "/sinks", nil, false, http.StatusOK},
		{"curl restart, no key", noKey, "POST", "/sinks/out/restart", nil, false, http.StatusNoContent},
		{"same origin restart, no key", noKey, "POST", "/sinks/out/restart", nil, true, http.StatusNoContent},
		{"same origin GET, no key", noKey, "GET", "/sinks", nil, true, http.StatusOK},
		{"foreign GET, no key", noKey, "GET", "/sinks", []string{"https://evil.example"}, false, http.StatusForbidden},
		{"foreign health, no key", noKey, "GET", "/health", []string{"https://evil.example"}, false, http.StatusForbidden},
		{"foreign restart, no key", noKey, "POST", "/sinks/out/restart", []string{"https://evil.example"}, false, http.StatusForbidden},
		{"foreign DELETE, no key", noKey, "DELETE", "/sinks/out", []string{"https://evil.example"}, false, http.StatusForbidden},
		{"other port of loopback", noKey, "POST", "/sinks/out/restart", []string{"http://127.0.0.1:1"}, false, http.StatusForbidden},
		{"null origin", noKey, "GET", "/sinks", []string{"null"}, false, http.StatusForbidden},
		{"two origins", noKey, "GET", "/sinks", []string{"https://a.example", "https://b.example"}, false, http.StatusForbidden},
		{"foreign GET with key", keyed, "GET", "/sinks", []string{"https://evil.example"}, false, http.StatusOK},
		{"foreign restart with key", keyed, "POST", "/sinks/out/restart", []string{"https://evil.example"}, false, http.StatusForbidden},
		{"foreign PUT with key", keyed, "PUT", "/sinks/out/configs/active", []string{"https://evil.example"}, false, http.StatusForbidden},
		{"same origin restart with key", keyed, "POST", "/sinks/out/restart", nil, true, http.StatusNoContent},
		{"listed restart", listed, "POST", "/sinks/out/restart", []string{"https://console.example"}, false, http.StatusNoContent},
		{"unlisted restart", listed, "POST", "/sinks/out/restart", []string{"https://evil.example"}, false, http.StatusForbidden},
		{"listed GET, no key", listedNoKey, "GET", "/sinks", []string{"https://console.example"}, false, http.StatusOK},
		{"listed null, no key", listedNoKey, "POST", "/sinks/out/restart", []string{"null"}, false, http.StatusNoContent},
		{"unlisted GET, no key", listedNoKey, "GET", "/sinks", []string{"https://evil.example"}, false, http.StatusForbidden},
		{"any origin allowed, no key", anyNoKey, "POST", "/sinks/out/restart", []string{"https://evil.example"}, false, http.StatusNoContent},
	} {
		h := http.Header{}
		if tc.e.key != "" {
			h.Set(APIKeyHeader, tc.e.key)
		}
		for _, o := range tc.origin {
			h.Add("Origin", o)
		}
		if tc.ownOrigin {
			h.Set("Origin", self(tc.e))
		}
		r := send(t, tc.method, tc.e.url+tc.path, "", "", h)
		require.Equal(t, tc.status, r.status, "case %d %s: %s", i, tc.name, r.body)
		if tc.status == http.StatusForbidden {
			requireError(t, r, http.StatusForbidden, codeOriginNotAllowed, "allowed_origins")
		}
	}
	// The listed origin with localhost: the API's own origin under either name.
	port := noKey.url[strings.LastIndex(noKey.url, ":")+1:]
	r := send(t, "POST", noKey.url+"/sinks/out/restart", "localhost:"+port, "", headers("Origin", "http://localhost:"+port, APIKeyHeader, noKey.key))
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
}

func TestJSONBodiesOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{})
	for i, tc := range []struct {
		contentType string
		ok          bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"Application/JSON", true},
		{"application/vnd.ferry+json", true},
		{"text/plain", false},
		{"text/plain; charset=utf-8", false},
		{"application/x-www-form-urlencoded", false},
		{"multipart/form-data; boundary=x", false},
		{"application/jsonp", false},
		{"json", false},
		{"", false},
	} {
		h := headers("Content-Type", tc.contentType, APIKeyHeader, e.key)
		r := send(t, "POST", e.url+"/sinks/out/configs", "", createOutV1, h)
		if tc.ok {
			require.Equal(t, http.StatusOK, r.status, "case %d %q: %s", i, tc.contentType, r.body)
			continue
		}
		requireError(t, r, http.StatusUnsupportedMediaType, codeUnsupportedMedia, "Content-Type: application/json")
		r = send(t, "PUT", e.url+"/sinks/out/configs/active", "", `{"version": 0}`, h)
		requireError(t, r, http.StatusUnsupportedMediaType, codeUnsupportedMedia, "curl")
	}
	// Requests without a body need no Content-Type.
	require.Equal(t, http.StatusNoContent, send(t, "POST", e.url+"/sinks/out/restart", "", "", headers(APIKeyHeader, e.key)).status)
	require.Equal(t, http.StatusNoContent, send(t, "DELETE", e.url+"/sinks/out/configs?version=1", "", "", headers(APIKeyHeader, e.key)).status)
}

func TestExecSinksNeedACredential(t *testing.T) {
	t.Parallel()
	const key = "Qz7-key"
	e := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{})
	mark := filepath.Join(t.TempDir(), "mark")
	json := headers("Content-Type", "application/json")
	for i, path := range []string{"exec", "EXEC", "libiggy_connector_exec_sink.so", "/opt/iggy/iggy-connector-exec.so", "iggy_connector_exec"} {
		body := strings.Replace(execBody(mark), `"exec"`, fmt.Sprintf("%q", path), 1)
		r := send(t, "POST", e.url+"/sinks/hook-x/configs", "", body, json)
		requireError(t, r, http.StatusUnauthorized, codeUnauthorized, "local token")
		require.NotContains(t, string(r.body), e.key, "case %d: the answer does not give the token away", i)
	}
	require.Equal(t, http.StatusNotFound, e.do("GET", "/sinks/hook-x/configs", "").status, "nothing stored")

	// The owner, who holds the local token, creates and activates it.
	r := e.do("POST", "/sinks/hook-x/configs", execBody(mark))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = e.do("PUT", "/sinks/hook-x/configs/active", `{"version": 0}`)
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)

	// With api_key configured, the key is the credential and the local
	// token is not written.
	srv, url := startServer(t, e.rt, config.HTTP{APIKey: key}, nil)
	require.Empty(t, srv.TokenPath())
	requireError(t, send(t, "POST", url+"/sinks/hook-y/configs", "", execBody(mark), json), http.StatusUnauthorized, codeUnauthorized, "")
	r = send(t, "POST", url+"/sinks/hook-y/configs", "", execBody(mark), headers(APIKeyHeader, key, "Content-Type", "application/json"))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.NoFileExists(t, mark, "nothing was started")
}

func TestConnectorLocksDoNotLeak(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{})
	lockCount := func() int {
		e.srv.restartMu.Lock()
		defer e.srv.restartMu.Unlock()
		return len(e.srv.restarts)
	}
	for i := range 50 {
		require.Equal(t, http.StatusNotFound, e.do("DELETE", fmt.Sprintf("/sinks/random-%d", i), "").status)
	}
	require.Equal(t, http.StatusNoContent, e.do("POST", "/sinks/out/restart", "").status)
	require.Zero(t, lockCount(), "no lock is kept for keys no request holds")

	// One connector's lock still serializes: a second holder waits for
	// the first, and the entry goes when both are done.
	unlock := e.srv.lockConnector("sink", "k")
	acquired := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		unlock2 := e.srv.lockConnector("sink", "k")
		close(acquired)
		unlock2()
	}()
	eventually(t, "the second request waits for the lock", func() bool {
		e.srv.restartMu.Lock()
		defer e.srv.restartMu.Unlock()
		l := e.srv.restarts["sink/k"]
		return l != nil && l.refs == 2
	})
	select {
	case <-acquired:
		t.Fatal("the lock was taken twice")
	default:
	}
	unlock()
	wg.Wait()
	require.Zero(t, lockCount())
}
