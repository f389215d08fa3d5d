package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

var secrets = []string{
	"hunter2-iggy", "pat-token-777", "local-api-key-123", "config-api-secret", "state-secret",
	"state-header-secret", "pg-pass-987", "plugin-token-42", "dsn-pass-55", "aws-secret-99",
}

func requireNoSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, sec := range secrets {
		require.NotContains(t, s, sec, "%s leaks a secret:\n%s", what, s)
	}
}

func TestSecretsNotInOutput(t *testing.T) {
	t.Parallel()
	rt, err := Load("testdata/upstream/config_http.toml", WithEnv(MapEnv(map[string]string{
		"IGGY_CONNECTORS_IGGY_PASSWORD": "hunter2-iggy",
		"IGGY_CONNECTORS_IGGY_TOKEN":    "pat-token-777",
		"IGGY_CONNECTORS_HTTP_API_KEY":  "local-api-key-123",
	})))
	require.NoError(t, err)
	require.Equal(t, "hunter2-iggy", rt.Iggy.Password, "the value itself is kept")

	pg := readConnector(t, "testdata/upstream/connectors/postgres_sink.toml", WithEnv(MapEnv(map[string]string{
		"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_API_TOKEN":  "plugin-token-42",
		"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_DSN":        "host=db user=u password=dsn-pass-55 sslmode=off",
		"IGGY_CONNECTORS_SINK_PG_ARCHIVE_PLUGIN_CONFIG_SECRET_KEY": "aws-secret-99",
	})))
	require.Equal(t, "plugin-token-42", pg.PluginConfig["api_token"])

	for name, s := range map[string]string{
		"Runtime.String":        rt.String(),
		"%v *Runtime":           fmt.Sprintf("%v", rt),
		"%+v *Runtime":          fmt.Sprintf("%+v", rt),
		"%#v Runtime":           fmt.Sprintf("%#v", *rt),
		"%v Iggy":               fmt.Sprintf("%v %+v %#v", rt.Iggy, rt.Iggy, rt.Iggy),
		"%v HTTP":               fmt.Sprintf("%v %+v %#v", rt.HTTP, rt.HTTP, rt.HTTP),
		"%v Connectors":         fmt.Sprintf("%v %+v %#v", rt.Connectors, rt.Connectors, rt.Connectors),
		"%v State":              fmt.Sprintf("%v %+v %#v", rt.State, rt.State, rt.State.HTTP),
		"Connector.String":      pg.String(),
		"%+v *Connector":        fmt.Sprintf("%+v %#v", pg, *pg),
		"slog JSON":             logged(true, rt, pg),
		"slog text":             logged(false, rt, pg),
		"slog JSON of sections": logged(true, rt.Iggy, rt.HTTP, rt.Connectors, rt.State),
	} {
		requireNoSecrets(t, name, s)
		require.Contains(t, s, Redacted, name)
	}
	// What is not secret still shows.
	s := pg.String()
	require.Contains(t, s, "postgres://archiver:****@db.internal:5432/archive")
	require.Contains(t, s, "password=**** sslmode=off")
	require.Contains(t, s, `target_table: "iggy_messages"`)
	require.Contains(t, rt.String(), `username: "iggy"`)
	require.Contains(t, rt.String(), `request_headers: {api-key: "****"}`)
}

func logged(json bool, vals ...any) string {
	var buf bytes.Buffer
	var h slog.Handler = slog.NewTextHandler(&buf, nil)
	if json {
		h = slog.NewJSONHandler(&buf, nil)
	}
	l := slog.New(h)
	for i, v := range vals {
		l.Info("config", fmt.Sprintf("v%d", i), v)
	}
	return buf.String()
}

func TestSecretsNotInErrors(t *testing.T) {
	t.Parallel()
	// A secret of the wrong type: the error names the key and type only.
	_, err := Parse("c.toml", []byte("[connectors]\nconfig_dir = \"c\"\n[iggy]\npassword = [\"hunter2-iggy\"]\n"), noEnv)
	require.ErrorContains(t, err, "c.toml:4: iggy.password: expected a string, got an array")
	requireNoSecrets(t, "error", err.Error())

	// A bad state URL is not echoed.
	_, err = Parse("c.toml", []byte("[connectors]\nconfig_dir = \"c\"\n[state]\nstorage = \"http\"\n[state.http]\nurl = \"ftp://u:state-secret@x\"\n"), noEnv)
	require.ErrorContains(t, err, "state.http.url: expected an http:// or https:// URL")
	requireNoSecrets(t, "error", err.Error())

	// A secret-looking plugin_config field given a bad value by variable.
	_, err = ParseConnector("c.toml", []byte("type = \"sink\"\nkey = \"k\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n[plugin_config]\nsecret_pin = 1234\n"),
		WithEnv(MapEnv(map[string]string{"IGGY_CONNECTORS_SINK_K_PLUGIN_CONFIG_SECRET_PIN": "pg-pass-987"})))
	require.ErrorContains(t, err, "IGGY_CONNECTORS_SINK_K_PLUGIN_CONFIG_SECRET_PIN (plugin_config.secret_pin): expected an integer")
	requireNoSecrets(t, "error", err.Error())

	// HTTP errors show URLs without credentials.
	p, err := NewHTTPProvider(Connectors{BaseURL: "http://user:config-api-secret@127.0.0.1:1/x?token=state-secret", Timeout: 1e9}, noEnv)
	require.NoError(t, err)
	_, err = p.Load(t.Context())
	require.Error(t, err)
	requireNoSecrets(t, "HTTP error", err.Error())
	require.Contains(t, err.Error(), "user:****@127.0.0.1:1")
}

func TestLooksSecret(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"password": true, "db_password": true, "Token": true, "api_key": true, "apiKey": true, "secret": true,
		"aws_secret_access_key": true, "private_key": true, "credentials": true, "auth_header": true, "encryption_key": true,
		"url": false, "interval": false, "key": false, "partition_key": false, "routing_key": false, "topic": false,
	} {
		require.Equal(t, want, looksSecret(name), name)
	}
}
