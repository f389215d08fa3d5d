package api

import (
	"context"
	"crypto/tls"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/internal/tlstest"
	"github.com/stretchr/testify/require"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, returning
// the file names and a pool that trusts the certificate.
func TestTLS(t *testing.T) {
	t.Parallel()
	tc := tlstest.SelfSigned(t)
	certFile, keyFile, pool := tc.CertFile, tc.KeyFile, tc.Pool
	_, url := startServer(t, unstarted(t), config.HTTP{TLS: config.HTTPTLS{Enabled: true, CertFile: certFile, KeyFile: keyFile}}, nil)
	require.True(t, strings.HasPrefix(url, "https://"))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	r := request(t, client, "GET", url+"/health", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, map[string]any{"status": "healthy"}, r.object(t))

	// Plain HTTP is not served on the TLS port.
	res, err := http.Get("http://" + strings.TrimPrefix(url, "https://") + "/health")
	if err == nil {
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
		res.Body.Close()
	}

	for i, tc := range []struct {
		tls     config.HTTPTLS
		mention string
	}{
		{config.HTTPTLS{Enabled: true, KeyFile: keyFile}, "cert_file"},
		{config.HTTPTLS{Enabled: true, CertFile: certFile}, "key_file"},
		{config.HTTPTLS{Enabled: true, CertFile: filepath.Join(t.TempDir(), "none.pem"), KeyFile: keyFile}, "none.pem"},
		{config.HTTPTLS{Enabled: true, CertFile: keyFile, KeyFile: certFile}, "cert_file"},
	} {
		_, err := New(unstarted(t), config.HTTP{Address: "127.0.0.1:0", TLS: tc.tls}, nil)
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), tc.mention, "case %d", i)
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	rt := unstarted(t)
	srv, err := New(rt, config.HTTP{Address: "127.0.0.1:0"}, nil)
	require.NoError(t, err)
	require.Empty(t, srv.Addr(), "no address before Start")
	require.NoError(t, srv.Start(context.Background()))
	addr := srv.Addr()
	require.NotEmpty(t, addr)
	require.Error(t, srv.Start(context.Background()), "second Start")

	// The port is taken: another server cannot start on it.
	other, err := New(rt, config.HTTP{Address: addr}, nil)
	require.NoError(t, err)
	err = other.Start(context.Background())
	require.Error(t, err)
	require.Contains(t, err.Error(), addr)
	require.NoError(t, other.Shutdown(context.Background()), "shutting down a server that never started")

	r := request(t, http.DefaultClient, "GET", "http://"+addr+"/health", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(ctx))
	require.NoError(t, srv.Shutdown(ctx), "idempotent")
	require.NoError(t, srv.Close(), "idempotent")
	require.Error(t, srv.Start(context.Background()), "no Start after Shutdown")
	_, err = http.Get("http://" + addr + "/health")
	require.Error(t, err, "nothing listens any more")

	// Close stops a running server at once.
	srv2, err := New(rt, config.HTTP{Address: "127.0.0.1:0"}, nil)
	require.NoError(t, err)
	require.NoError(t, srv2.Start(context.Background()))
	require.NoError(t, srv2.Close())
	require.NoError(t, srv2.Close())

	for i, tc := range []struct {
		cfg     config.HTTP
		mention string
	}{
		{config.HTTP{Address: "nohost"}, "http.address"},
		{config.HTTP{Address: ""}, "http.address"},
		{config.HTTP{Address: "127.0.0.1:0", Metrics: config.HTTPMetrics{Enabled: true, Endpoint: "metrics"}}, "http.metrics.endpoint"},
		{config.HTTP{Address: "127.0.0.1:0", Metrics: config.HTTPMetrics{Enabled: true, Endpoint: "/"}}, "http.metrics.endpoint"},
		{config.HTTP{Address: "127.0.0.1:0", Metrics: config.HTTPMetrics{Enabled: true, Endpoint: "/stats"}}, "conflicts"},
		{config.HTTP{Address: "127.0.0.1:0", Metrics: config.HTTPMetrics{Enabled: true, Endpoint: "/sinks"}}, "conflicts"},
		{config.HTTP{Address: "127.0.0.1:0", Metrics: config.HTTPMetrics{Enabled: true, Endpoint: "/m/{x}"}}, "braces"},
	} {
		_, err := New(rt, tc.cfg, nil)
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), tc.mention, "case %d", i)
	}
	_, err = New(nil, config.HTTP{Address: "127.0.0.1:0"}, nil)
	require.Error(t, err)
	_, err = New(rt, config.HTTP{Address: "127.0.0.1:0"}, nil, WithRestartTimeout(0))
	require.Error(t, err)
}

func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	rt := unstarted(t)
	srv, url := startServer(t, rt, config.HTTP{Metrics: config.HTTPMetrics{Enabled: true, Endpoint: "/prom/"}, PublicReads: true}, nil)
	r := request(t, http.DefaultClient, "GET", url+"/prom/", "", nil)
	require.Equal(t, http.StatusOK, r.status, "public without the token")
	require.Contains(t, string(r.body), "iggy_connectors_sinks_total 0\n")
	tok := headers(APIKeyHeader, localToken(t, srv))
	require.Equal(t, http.StatusNotFound, request(t, http.DefaultClient, "GET", url+"/prom/x", "", tok).status, "the exact path only")
	require.Equal(t, http.StatusNotFound, request(t, http.DefaultClient, "GET", url+"/metrics", "", tok).status)

	srv, url = startServer(t, rt, config.HTTP{Metrics: config.HTTPMetrics{Enabled: false}}, nil)
	require.Equal(t, http.StatusNotFound, request(t, http.DefaultClient, "GET", url+"/metrics", "", headers(APIKeyHeader, localToken(t, srv))).status, "metrics disabled")
}

func TestStartupWarnings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for i, tc := range []struct {
		cfg  config.HTTP
		want []string // a word of each expected warning, in order
	}{
		{config.HTTP{Address: "127.0.0.1:8081"}, nil},
		{config.HTTP{Address: "[::1]:8081"}, nil},
		{config.HTTP{Address: "[::ffff:127.0.0.1]:8081"}, nil},
		{config.HTTP{Address: "localhost:8081"}, nil},
		{config.HTTP{Address: "0.0.0.0:8081"}, []string{"no http.api_key", "http.tls disabled"}},
		{config.HTTP{Address: ":8081"}, []string{"no http.api_key", "http.tls disabled"}},
		{config.HTTP{Address: "192.0.2.1:8081", APIKey: "Qz7-secret"}, []string{"http.tls disabled"}},
		{config.HTTP{Address: "192.0.2.1:8081", APIKey: "Qz7-secret", TLS: config.HTTPTLS{Enabled: true}}, nil},
		{config.HTTP{Address: "no-such-host.invalid:8081", APIKey: "Qz7-secret", TLS: config.HTTPTLS{Enabled: true}}, nil},
		{config.HTTP{Address: "no-such-host.invalid:8081"}, []string{"no http.api_key", "http.tls disabled"}},
		{config.HTTP{Address: "127.0.0.1:8081", CORS: config.CORS{Enabled: true, AllowedOrigins: []string{"*"}}}, []string{"http.cors"}},
		{config.HTTP{Address: "127.0.0.1:8081", CORS: config.CORS{Enabled: true, AllowedOrigins: []string{"https://a.example", "null"}}}, []string{"http.cors"}},
		{config.HTTP{Address: "127.0.0.1:8081", CORS: config.CORS{Enabled: false, AllowedOrigins: []string{"*"}}}, nil},
		{config.HTTP{Address: "127.0.0.1:8081", APIKey: "Qz7-secret", CORS: config.CORS{Enabled: true, AllowedOrigins: []string{"*"}}}, nil},
		{config.HTTP{Address: "127.0.0.1:8081", CORS: config.CORS{Enabled: true, AllowedOrigins: []string{"https://a.example"}}}, nil},
	} {
		got := containmentWarnings(ctx, tc.cfg)
		require.Len(t, got, len(tc.want), "case %d %s: %q", i, tc.cfg.Address, got)
		for j, w := range tc.want {
			require.Contains(t, got[j], w, "case %d", i)
		}
		for _, w := range got {
			if tc.cfg.APIKey != "" {
				require.NotContains(t, w, tc.cfg.APIKey)
			}
		}
	}

	// Start logs them; a loopback server without a key logs none.
	logs := &logBuffer{}
	startServer(t, unstarted(t), config.HTTP{}, logs)
	require.NotContains(t, logs.String(), "level=WARN")
}

func TestSemverNumber(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		in   string
		want int64 // -1: none
	}{
		{"1.2.3", 1002003},
		{"0.1.0-dev", 1000},
		{"v0.5.0", 5000},
		{"4294.967.295", 4294967295},
		{"4294.967.296", -1},
		{"1.1000.0", -1},
		{"1.2", -1},
		{"dev", -1},
		{"", -1},
	} {
		got := semverNumber(tc.in)
		if tc.want < 0 {
			require.Nil(t, got, "case %d %q", i, tc.in)
			continue
		}
		require.NotNil(t, got, "case %d %q", i, tc.in)
		require.Equal(t, uint32(tc.want), *got, "case %d %q", i, tc.in)
	}
}
