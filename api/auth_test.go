package api

import (
	"crypto/sha256"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/stretchr/testify/require"
)

func TestAPIKey(t *testing.T) {
	t.Parallel()
	const key = "s3cret-Key"
	logs := &logBuffer{}
	_, url := startServer(t, unstarted(t), config.HTTP{APIKey: key, Metrics: config.HTTPMetrics{Enabled: true}}, logs)
	for i, tc := range []struct {
		method, path string
		header       []string // api-key values sent
		status       int
	}{
		{"GET", "/", nil, http.StatusOK},
		{"GET", "/health", nil, http.StatusOK},
		{"GET", "/health", []string{"wrong"}, http.StatusOK},
		{"GET", "/sinks", nil, http.StatusUnauthorized},
		{"GET", "/sinks", []string{"wrong"}, http.StatusUnauthorized},
		{"GET", "/sinks", []string{key + "x"}, http.StatusUnauthorized},
		{"GET", "/sinks", []string{key[:len(key)-1]}, http.StatusUnauthorized},
		{"GET", "/sinks", []string{strings.ToUpper(key)}, http.StatusUnauthorized},
		{"GET", "/sinks", []string{""}, http.StatusUnauthorized},
		{"GET", "/sinks", []string{key, key}, http.StatusUnauthorized},
		{"GET", "/sinks", []string{key}, http.StatusOK},
		{"GET", "/sources", []string{key}, http.StatusOK},
		{"GET", "/stats", nil, http.StatusUnauthorized},
		{"GET", "/stats", []string{key}, http.StatusOK},
		{"GET", "/metrics", nil, http.StatusUnauthorized},
		{"GET", "/metrics", []string{key}, http.StatusOK},
		{"POST", "/sinks/x/restart", nil, http.StatusUnauthorized},
		{"PUT", "/sinks/x/configs/active", nil, http.StatusUnauthorized},
		{"GET", "/health/", nil, http.StatusUnauthorized}, // only the exact public paths
		{"GET", "/nothing", nil, http.StatusUnauthorized},
		{"GET", "/nothing", []string{key}, http.StatusNotFound},
	} {
		h := http.Header{}
		for _, v := range tc.header {
			h.Add(APIKeyHeader, v)
		}
		r := request(t, http.DefaultClient, tc.method, url+tc.path, "", h)
		require.Equal(t, tc.status, r.status, "case %d: %s %s with %q: %s", i, tc.method, tc.path, tc.header, r.body)
		if r.status == http.StatusUnauthorized {
			requireError(t, r, http.StatusUnauthorized, "unauthorized", "api-key")
		}
	}
	require.NotContains(t, logs.String(), key, "the API key is never logged")
	require.NotContains(t, logs.String(), "wrong", "presented keys are never logged")
}

func TestNoAPIKeyMeansTheLocalToken(t *testing.T) {
	t.Parallel()
	srv, url := startServer(t, unstarted(t), config.HTTP{Metrics: config.HTTPMetrics{Enabled: true}, PublicReads: true}, nil)
	tok := localToken(t, srv)
	fi, err := os.Stat(srv.TokenPath())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "only the runtime's user can read the token")

	for _, h := range []http.Header{nil, headers(APIKeyHeader, "anything"), headers(APIKeyHeader, strings.ToUpper(tok))} {
		for _, m := range []struct{ method, path string }{{"GET", "/sinks"}, {"GET", "/sources/x/configs"}, {"POST", "/sinks/x/restart"}, {"DELETE", "/sinks/x"}} {
			r := request(t, http.DefaultClient, m.method, url+m.path, "", h)
			requireError(t, r, http.StatusUnauthorized, codeUnauthorized, "local token")
		}
	}
	r := request(t, http.DefaultClient, "GET", url+"/sinks", "", headers(APIKeyHeader, tok))
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "[]", string(r.body))

	// Read-only, secret-free paths stay open for scrapers and dashboards.
	for _, p := range []string{"/", "/health", "/stats", "/metrics"} {
		require.Equal(t, http.StatusOK, request(t, http.DefaultClient, "GET", url+p, "", nil).status, p)
	}
	// public_reads = false closes /stats and /metrics too.
	srv2, url2 := startServer(t, unstarted(t), config.HTTP{Metrics: config.HTTPMetrics{Enabled: true}, PublicReads: false}, nil)
	for _, p := range []string{"/stats", "/metrics"} {
		requireError(t, request(t, http.DefaultClient, "GET", url2+p, "", nil), http.StatusUnauthorized, codeUnauthorized, "")
		require.Equal(t, http.StatusOK, request(t, http.DefaultClient, "GET", url2+p, "", headers(APIKeyHeader, localToken(t, srv2))).status, p)
	}
	require.Equal(t, http.StatusOK, request(t, http.DefaultClient, "GET", url2+"/health", "", nil).status)

	// The token file goes with the server.
	path := srv.TokenPath()
	require.NoError(t, srv.Close())
	require.NoFileExists(t, path)
}

func TestKeyMatchesInConstantTime(t *testing.T) {
	t.Parallel()
	want := sha256.Sum256([]byte("abc123"))
	for i, tc := range []struct {
		got string
		ok  bool
	}{
		{"abc123", true},
		{"abc124", false},
		{"abc12", false},
		{"abc1234", false},
		{"", false},
		{"ABC123", false},
		{strings.Repeat("a", 10000), false},
	} {
		require.Equal(t, tc.ok, keyMatches(tc.got, want), "case %d %q", i, tc.got)
	}
}
