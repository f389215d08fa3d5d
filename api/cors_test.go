package api

import (
	"net/http"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/stretchr/testify/require"
)

// defaultCORS is upstream's default [http.cors], enabled.
func defaultCORS() config.CORS {
	c := config.Default().HTTP.CORS
	c.Enabled = true
	c.ExposedHeaders = []string{""}
	return c
}

func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	_, url := startServer(t, unstarted(t), config.HTTP{APIKey: "k", CORS: defaultCORS()}, nil)
	h := http.Header{}
	h.Set("Origin", "https://console.example")
	h.Set("Access-Control-Request-Method", "PUT")
	h.Set("Access-Control-Request-Headers", "content-type, api-key")
	r := request(t, http.DefaultClient, "OPTIONS", url+"/sinks/x/configs/active", "", h)
	require.Equal(t, http.StatusOK, r.status, "a preflight is answered without the API key")
	require.Empty(t, r.body)
	require.Equal(t, "*", r.header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "GET,POST,PUT,DELETE", r.header.Get("Access-Control-Allow-Methods"))
	require.Equal(t, "content-type", r.header.Get("Access-Control-Allow-Headers"))
	require.Equal(t, vary, r.header.Get("Vary"))
	require.Empty(t, r.header.Get("Access-Control-Allow-Credentials"))
	require.Empty(t, r.header.Get("Access-Control-Expose-Headers"), `[""] exposes nothing`)

	// A simple request gets the origin headers, also on a 401.
	h = http.Header{}
	h.Set("Origin", "https://console.example")
	r = request(t, http.DefaultClient, "GET", url+"/sinks", "", h)
	require.Equal(t, http.StatusUnauthorized, r.status)
	require.Equal(t, "*", r.header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, vary, r.header.Get("Vary"))
	require.Empty(t, r.header.Get("Access-Control-Allow-Methods"), "methods only on preflights")
}

func TestCORSPolicies(t *testing.T) {
	t.Parallel()
	rt := unstarted(t)
	for i, tc := range []struct {
		name    string
		cors    config.CORS
		method  string
		reqHdrs map[string]string
		want    map[string]string // "" means absent
	}{
		{
			name:    "listed origin is echoed",
			cors:    config.CORS{Enabled: true, AllowedOrigins: []string{"https://a.example", "https://b.example"}, AllowedMethods: []string{"get", "post"}},
			method:  "OPTIONS",
			reqHdrs: map[string]string{"Origin": "https://b.example", "Access-Control-Request-Method": "POST"},
			want:    map[string]string{"Access-Control-Allow-Origin": "https://b.example", "Access-Control-Allow-Methods": "GET,POST", "Access-Control-Allow-Headers": ""},
		},
		{
			name:    "unlisted origin gets no allow-origin",
			cors:    config.CORS{Enabled: true, AllowedOrigins: []string{"https://a.example"}},
			method:  "GET",
			reqHdrs: map[string]string{"Origin": "https://evil.example"},
			want:    map[string]string{"Access-Control-Allow-Origin": "", "Vary": vary},
		},
		{
			name:    "empty origin list sends no allow-origin",
			cors:    config.CORS{Enabled: true},
			method:  "GET",
			reqHdrs: map[string]string{"Origin": "https://a.example"},
			want:    map[string]string{"Access-Control-Allow-Origin": ""},
		},
		{
			name:    "credentials and exposed headers on simple requests",
			cors:    config.CORS{Enabled: true, AllowedOrigins: []string{"https://a.example"}, AllowCredentials: true, ExposedHeaders: []string{"X-Total", "ETag"}},
			method:  "GET",
			reqHdrs: map[string]string{"Origin": "https://a.example"},
			want: map[string]string{"Access-Control-Allow-Origin": "https://a.example", "Access-Control-Allow-Credentials": "true",
				"Access-Control-Expose-Headers": "x-total,etag"},
		},
		{
			name:    "private network when asked",
			cors:    config.CORS{Enabled: true, AllowedOrigins: []string{"*"}, AllowPrivateNetwork: true},
			method:  "OPTIONS",
			reqHdrs: map[string]string{"Origin": "https://a.example", "Access-Control-Request-Private-Network": "true"},
			want:    map[string]string{"Access-Control-Allow-Private-Network": "true", "Access-Control-Allow-Origin": "*"},
		},
		{
			name:    "private network not asked",
			cors:    config.CORS{Enabled: true, AllowedOrigins: []string{"*"}, AllowPrivateNetwork: true},
			method:  "OPTIONS",
			reqHdrs: map[string]string{"Origin": "https://a.example"},
			want:    map[string]string{"Access-Control-Allow-Private-Network": ""},
		},
		{
			name:    "private network not allowed",
			cors:    config.CORS{Enabled: true, AllowedOrigins: []string{"*"}},
			method:  "OPTIONS",
			reqHdrs: map[string]string{"Origin": "https://a.example", "Access-Control-Request-Private-Network": "true"},
			want:    map[string]string{"Access-Control-Allow-Private-Network": ""},
		},
		{
			name:    "disabled",
			cors:    config.CORS{Enabled: false, AllowedOrigins: []string{"*"}},
			method:  "GET",
			reqHdrs: map[string]string{"Origin": "https://a.example"},
			want:    map[string]string{"Access-Control-Allow-Origin": "", "Vary": ""},
		},
	} {
		// With an API key: without one, a request from an origin CORS does
		// not allow is refused before CORS sees it (guard_test.go).
		_, url := startServer(t, rt, config.HTTP{APIKey: "k", CORS: tc.cors}, nil)
		h := http.Header{}
		for k, v := range tc.reqHdrs {
			h.Set(k, v)
		}
		r := request(t, http.DefaultClient, tc.method, url+"/health", "", h)
		require.Equal(t, http.StatusOK, r.status, "case %d %s", i, tc.name)
		for k, v := range tc.want {
			require.Equal(t, v, r.header.Get(k), "case %d %s: header %s", i, tc.name, k)
		}
	}
}

func TestCORSConfigErrors(t *testing.T) {
	t.Parallel()
	rt := unstarted(t)
	for i, tc := range []struct {
		cors    config.CORS
		mention string
	}{
		{config.CORS{Enabled: true, AllowedOrigins: []string{"https://a.example", "*"}}, "allowed_origins[1]"},
		{config.CORS{Enabled: true, AllowedOrigins: []string{"*", "https://a.example"}}, "allowed_origins"},
		{config.CORS{Enabled: true, AllowedOrigins: []string{"*"}, AllowCredentials: true}, "allow_credentials"},
		{config.CORS{Enabled: true, AllowedOrigins: []string{"bad origin"}}, "allowed_origins[0]"},
		{config.CORS{Enabled: true, AllowedMethods: []string{"GET", "FETCH"}}, "allowed_methods[1]"},
		{config.CORS{Enabled: true, AllowedHeaders: []string{"content type"}}, "allowed_headers[0]"},
		{config.CORS{Enabled: true, ExposedHeaders: []string{"x:y"}}, "exposed_headers[0]"},
	} {
		_, err := New(rt, config.HTTP{Address: "127.0.0.1:0", CORS: tc.cors}, nil)
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), tc.mention, "case %d", i)
	}
	// The same settings are fine while CORS is off.
	_, err := New(rt, config.HTTP{Address: "127.0.0.1:0", CORS: config.CORS{AllowedMethods: []string{"FETCH"}}}, nil)
	require.NoError(t, err)
}
