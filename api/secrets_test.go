package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/config"
)

// A sink holding every kind of secret the built-in connectors take: a
// password key, a DSN and a URL with credentials, an Authorization header,
// a signing secret, a secret in a transform, and a password injected
// through the environment, as the README recommends.
const secretsTOML = `
type = "sink"
key = "vault"
path = "count"
plugin_config_format = "json"

[plugin_config]
password = "S3cret-pass"
connection_string = "postgres://app:S3cret-dsn@db.example:5432/app?sslmode=disable"
dsn = "host=db.example user=app password=S3cret-kv dbname=app"
url = "https://user:S3cret-url@hooks.example/in?token=S3cret-query&x=1"
signing_secret = "S3cret-sign"
headers = { Authorization = "Bearer S3cret-bearer", "X-Api-Key" = "S3cret-header", Accept = "application/json" }
batch = 10

[transforms.add_fields]
enabled = true
[[transforms.add_fields.fields]]
key = "api_token"
value.static = "S3cret-transform"

[[streams]]
stream = "s"
topics = ["t"]
schema = "json"
poll_interval = "5ms"
`

func TestConfigsAPIRedactsSecrets(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, map[string]string{"vault.toml": secretsTOML}, config.HTTP{Metrics: config.HTTPMetrics{Enabled: true}},
		map[string]string{"IGGY_CONNECTORS_SINK_VAULT_PLUGIN_CONFIG_DB_PASSWORD": "S3cret-env",
			"IGGY_CONNECTORS_SINK_VAULT_PLUGIN_CONFIG_API_TOKEN": "98765432123"}) // a number-like secret

	eventually(t, "vault runs", func() bool { return e.statusOf("sink", "vault") == "running" })
	info, err := e.rt.Connector("sink", "vault")
	require.NoError(t, err)
	require.Equal(t, "S3cret-env", info.Config.PluginConfig["db_password"], "the variable reached the connector")
	require.Equal(t, "98765432123", info.Config.PluginConfig["api_token"].(config.EnvValue).Raw)

	paths := []string{"/sinks", "/sinks/vault", "/sinks/vault/transforms", "/sinks/vault/configs", "/sinks/vault/configs/0",
		"/sinks/vault/configs/active", "/stats", "/metrics"}
	for _, f := range []string{"json", "yaml", "toml", "text"} {
		paths = append(paths, "/sinks/vault/configs/plugin?format="+f)
	}
	for _, p := range paths {
		r := e.do("GET", p, "")
		require.Equal(t, http.StatusOK, r.status, "%s: %s", p, r.body)
		require.NotContains(t, string(r.body), "S3cret", "%s leaks a secret: %s", p, r.body)
		require.NotContains(t, string(r.body), "98765432123", "%s leaks a secret: %s", p, r.body)
	}
	r := e.do("GET", "/sinks/vault/configs/plugin?format=json", "")
	body := string(r.body)
	for _, want := range []string{`"password":"****"`, `postgres://app:****@db.example:5432/app`, `password=****`,
		`https://user:****@hooks.example/in?token=****`, `"Accept":"application/json"`, `"batch":10`} {
		require.Contains(t, body, want, "what is not secret stays readable")
	}

	// A configuration read back, edited and stored gets its secrets
	// back from the version it was read from; a changed value is kept.
	r = e.do("GET", "/sinks/vault/configs/active", "")
	edited := strings.Replace(string(r.body), `"batch":10`, `"batch":20`, 1)
	edited = strings.Replace(edited, `"signing_secret":"****"`, `"signing_secret":"new-signing"`, 1)
	r = e.do("POST", "/sinks/vault/configs", edited)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.NotContains(t, string(r.body), "S3cret")
	saved, err := e.rt.Provider().Get(context.Background(), config.KindSink, "vault", 1)
	require.NoError(t, err)
	pc := saved.PluginConfig
	require.Equal(t, "S3cret-pass", pc["password"])
	require.Equal(t, "postgres://app:S3cret-dsn@db.example:5432/app?sslmode=disable", pc["connection_string"])
	require.Equal(t, "https://user:S3cret-url@hooks.example/in?token=S3cret-query&x=1", pc["url"])
	require.Equal(t, "Bearer S3cret-bearer", pc["headers"].(map[string]any)["Authorization"])
	require.Equal(t, "new-signing", pc["signing_secret"])
	require.EqualValues(t, 20, pc["batch"])
	require.Equal(t, "S3cret-transform", saved.Transforms[0].Config["fields"].([]any)[0].(map[string]any)["value"].(map[string]any)["static"])
}

func TestRedactText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"dial postgres://app:pw@db:5432/x: connection refused": "dial postgres://app:****@db:5432/x: connection refused",
		"connect host=db password='a b' user=x failed":         "connect host=db password=**** user=x failed",
		"no secret here": "no secret here",
	} {
		require.Equal(t, want, config.RedactText(in))
	}
}
