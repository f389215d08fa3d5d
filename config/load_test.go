package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var noEnv = WithEnv(MapEnv(nil))

func TestLoadUpstreamExample(t *testing.T) {
	t.Parallel()
	rt, err := Load("testdata/upstream/config.toml", noEnv)
	require.NoError(t, err)
	dir, err := filepath.Abs("testdata/upstream")
	require.NoError(t, err)

	require.Equal(t, filepath.Join(dir, "config.toml"), rt.File)
	require.Equal(t, HTTP{
		Enabled: true, Address: "127.0.0.1:9081", APIKey: "local-api-key-123",
		CORS: CORS{
			Enabled: true, AllowedMethods: []string{"GET", "POST", "PUT", "DELETE"},
			AllowedOrigins: []string{"https://console.example.org"}, AllowedHeaders: []string{"content-type", "api-key"},
			ExposedHeaders: []string{""}, AllowCredentials: true,
		},
		Metrics:     HTTPMetrics{Enabled: true, Endpoint: "/prom"},
		PublicReads: true,
		TLS:         HTTPTLS{CertFile: filepath.Join(dir, "certs/runtime_cert.pem"), KeyFile: filepath.Join(dir, "certs/runtime_key.pem")},
	}, rt.HTTP)
	require.Equal(t, Iggy{
		Address: "iggy.internal:8090", Username: "connector-bot", Password: "hunter2-iggy",
		TLS:             IggyTLS{Enabled: true, CAFile: filepath.Join(dir, "certs/ca.pem"), Domain: "iggy.internal"},
		EmbeddedAddress: DefaultEmbeddedAddress, EmbeddedDedupEntries: DefaultEmbeddedDedupEntries, EmbeddedDedupExpiry: DefaultEmbeddedDedupExpiry,
	}, rt.Iggy)
	require.False(t, rt.Iggy.Embedded())
	require.Equal(t, filepath.Join(dir, "runtime_state"), rt.State.Path)
	require.Equal(t, StorageFile, rt.State.Storage)
	require.Equal(t, ProviderLocal, rt.Connectors.ConfigType)
	require.Equal(t, filepath.Join(dir, "connectors"), rt.Connectors.ConfigDir)
	require.Equal(t, Telemetry{
		ServiceName: "connectors-edge",
		Logs:        TelemetryTarget{Transport: "http", Endpoint: "http://otel:4318/v1/logs"},
		Traces:      TelemetryTarget{Transport: "grpc", Endpoint: "http://otel:4317"},
	}, rt.Telemetry)
	require.Equal(t, Logging{Format: LogJSON, Level: "info"}, rt.Logging)
	require.Empty(t, rt.Warnings)
}

func TestLoadHTTPProviderConfig(t *testing.T) {
	t.Parallel()
	rt, err := Load("testdata/upstream/config_http.toml", noEnv)
	require.NoError(t, err)
	require.Equal(t, Connectors{
		ConfigType: ProviderHTTP, BaseURL: "http://config.internal:8080/api", Timeout: 7 * time.Second,
		RequestHeaders: map[string]string{"api-key": "config-api-secret"},
		URLTemplates:   map[string]string{"create_sink": "/v2/sinks/{key}", "get_active_configs": "/v2/active"},
		Response:       Response{DataPath: "data", ErrorPath: "error"},
		Retry:          Retry{Enabled: true, MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 20 * time.Second, BackoffMultiplier: 2},
	}, rt.Connectors)
	require.Equal(t, State{
		Path: rt.State.Path, Storage: StorageHTTP,
		HTTP: StateHTTP{
			URL: "http://state.internal:8080/connectors/state?token=state-secret", LoadMethod: "post", SaveMethod: "patch",
			Timeout: 3 * time.Second, RequestHeaders: map[string]string{"authorization": "Bearer state-header-secret"},
			Retry: Retry{Enabled: true, MaxAttempts: 6, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, BackoffMultiplier: 3},
		},
		Iggy: StateIggy{Stream: "ferry", Topic: "state"},
	}, rt.State)
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	// A file with only a connector directory: everything else is default.
	rt, err := Parse("min.toml", []byte("[connectors]\nconfig_dir = \"c\"\n"), noEnv)
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"http.enabled", rt.HTTP.Enabled, true},
		{"http.address", rt.HTTP.Address, "127.0.0.1:8081"},
		{"http.api_key", rt.HTTP.APIKey, ""},
		{"http.cors.enabled", rt.HTTP.CORS.Enabled, false},
		{"http.cors.allowed_methods", rt.HTTP.CORS.AllowedMethods, []string{"GET", "POST", "PUT", "DELETE"}},
		{"http.metrics.enabled", rt.HTTP.Metrics.Enabled, false},
		{"http.metrics.endpoint", rt.HTTP.Metrics.Endpoint, "/metrics"},
		{"http.tls.enabled", rt.HTTP.TLS.Enabled, false},
		{"iggy.address", rt.Iggy.Address, ""},
		{"iggy embedded", rt.Iggy.Embedded(), true},
		{"iggy.username", rt.Iggy.Username, "iggy"},
		{"iggy.password", rt.Iggy.Password, "iggy"},
		{"iggy.create_missing", rt.Iggy.CreateMissing, false},
		{"state.storage", rt.State.Storage, StorageFile},
		{"state.path is local_state", filepath.Base(rt.State.Path), "local_state"},
		{"state.http.timeout", rt.State.HTTP.Timeout, 5 * time.Second},
		{"state.http.retry.max_attempts", rt.State.HTTP.Retry.MaxAttempts, uint32(4)},
		{"connectors.config_type", rt.Connectors.ConfigType, ProviderLocal},
		{"connectors.timeout", rt.Connectors.Timeout, 10 * time.Second},
		{"connectors.retry", rt.Connectors.Retry, Retry{Enabled: true, MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: 30 * time.Second, BackoffMultiplier: 2}},
		{"telemetry.service_name", rt.Telemetry.ServiceName, "iggy-connectors"},
		{"telemetry.logs.transport", rt.Telemetry.Logs.Transport, Transport("grpc")},
		{"logging.format", rt.Logging.Format, LogText},
		{"logging.level", rt.Logging.Level, LogLevel("info")},
	} {
		require.Equal(t, tc.want, tc.got, tc.name)
	}

	// Connector defaults.
	c, err := ParseConnector("c.toml", []byte(`
type = "sink"
key = "s1"
[[streams]]
stream = "a"
topics = ["b"]
`), noEnv)
	require.NoError(t, err)
	require.True(t, c.Enabled)
	require.Equal(t, "s1", c.Name)
	require.Equal(t, ConsumerStream{
		Stream: "a", Topics: []string{"b"}, Schema: SchemaJSON, BatchLength: 1000, PollInterval: 5 * time.Millisecond,
		ConsumerGroup: "iggy-connect-sink-s1", MaxRetries: 3, RetryBackoff: 100 * time.Millisecond,
		MaxRetryBackoff: 10 * time.Second, OnError: PolicyStop, Ordering: OrderPartition,
	}, c.Consumers[0])
	src, err := ParseConnector("s.toml", []byte("type = \"source\"\nkey = \"r\"\n[[streams]]\nstream = \"a\"\ntopic = \"b\"\n"), noEnv)
	require.NoError(t, err)
	require.Equal(t, ProducerStream{Stream: "a", Topic: "b", Schema: SchemaJSON, BatchLength: 1000, LingerTime: 5 * time.Millisecond}, src.Producers[0])
}

func TestRuntimeEnvOverrides(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		vars  map[string]string
		check func(t *testing.T, rt *Runtime)
	}{
		{map[string]string{"IGGY_CONNECTORS_IGGY_ADDRESS": "10.1.1.1:8090"}, func(t *testing.T, rt *Runtime) {
			require.Equal(t, "10.1.1.1:8090", rt.Iggy.Address)
		}},
		{map[string]string{"IGGY_CONNECTORS_IGGY_PASSWORD": "from-env", "IGGY_CONNECTORS_IGGY_TLS_ENABLED": "false"}, func(t *testing.T, rt *Runtime) {
			require.Equal(t, "from-env", rt.Iggy.Password)
			require.False(t, rt.Iggy.TLS.Enabled)
		}},
		{map[string]string{"IGGY_CONNECTORS_HTTP_METRICS_ENABLED": "FALSE", "IGGY_CONNECTORS_HTTP_METRICS_ENDPOINT": "/m"}, func(t *testing.T, rt *Runtime) {
			require.False(t, rt.HTTP.Metrics.Enabled)
			require.Equal(t, "/m", rt.HTTP.Metrics.Endpoint)
		}},
		{map[string]string{"IGGY_CONNECTORS_HTTP_CORS_ALLOWED_ORIGINS": `["https://a.example", "https://b.example"]`}, func(t *testing.T, rt *Runtime) {
			require.Equal(t, []string{"https://a.example", "https://b.example"}, rt.HTTP.CORS.AllowedOrigins)
		}},
		{map[string]string{"IGGY_CONNECTORS_HTTP_CORS_ALLOWED_METHODS": "GET,PATCH"}, func(t *testing.T, rt *Runtime) {
			require.Equal(t, []string{"GET", "PATCH"}, rt.HTTP.CORS.AllowedMethods)
		}},
		{map[string]string{"IGGY_CONNECTORS_LOGGING_FORMAT": "TEXT", "IGGY_CONNECTORS_LOGGING_LEVEL": "debug"}, func(t *testing.T, rt *Runtime) {
			require.Equal(t, LogText, rt.Logging.Format)
			require.Equal(t, LogLevel("debug"), rt.Logging.Level)
		}},
		{map[string]string{"IGGY_CONNECTORS_IGGY_CREATE_MISSING": "true", "IGGY_CONNECTORS_IGGY_ADDRESS": "embedded"}, func(t *testing.T, rt *Runtime) {
			require.True(t, rt.Iggy.CreateMissing)
			require.True(t, rt.Iggy.Embedded())
		}},
		{map[string]string{"IGGY_CONNECTORS_STATE_PATH": "/var/lib/ferry/state"}, func(t *testing.T, rt *Runtime) {
			require.Equal(t, "/var/lib/ferry/state", rt.State.Path)
		}},
		{map[string]string{"IGGY_CONNECTORS_CONNECTORS_CONFIG_DIR": "/etc/ferry/connectors"}, func(t *testing.T, rt *Runtime) {
			require.Equal(t, "/etc/ferry/connectors", rt.Connectors.ConfigDir)
		}},
		{map[string]string{"IGGY_CONNECTORS_IGGY_USERNAME": ""}, func(t *testing.T, rt *Runtime) {
			require.Equal(t, "connector-bot", rt.Iggy.Username, "an empty value counts as unset")
		}},
		{map[string]string{"IGGY_CONNECTORS_IGGY_USRNAME": "x", "IGGY_CONNECTORS_SINK_X_ENABLED": "true", EnvConfigPath: "ignored.toml"}, func(t *testing.T, rt *Runtime) {
			require.Len(t, rt.Warnings, 1)
			require.Contains(t, rt.Warnings[0], "IGGY_CONNECTORS_IGGY_USRNAME")
			require.Contains(t, rt.Warnings[0], "did you mean IGGY_CONNECTORS_IGGY_USERNAME?")
		}},
	} {
		rt, err := Load("testdata/upstream/config.toml", WithEnv(MapEnv(tc.vars)))
		require.NoError(t, err, "case %d", i)
		tc.check(t, rt)
	}

	// The HTTP provider's keys, on a config that selects it.
	rt, err := Load("testdata/upstream/config_http.toml", WithEnv(MapEnv(map[string]string{
		"IGGY_CONNECTORS_CONNECTORS_BASE_URL":                 "https://cfg.example/api",
		"IGGY_CONNECTORS_CONNECTORS_TIMEOUT":                  "1m 30s",
		"IGGY_CONNECTORS_CONNECTORS_RETRY_MAX_ATTEMPTS":       "9",
		"IGGY_CONNECTORS_CONNECTORS_RESPONSE_DATA_PATH":       "payload.0",
		"IGGY_CONNECTORS_STATE_HTTP_RETRY_BACKOFF_MULTIPLIER": "4",
	})))
	require.NoError(t, err)
	require.Equal(t, "https://cfg.example/api", rt.Connectors.BaseURL)
	require.Equal(t, 90*time.Second, rt.Connectors.Timeout)
	require.Equal(t, uint32(9), rt.Connectors.Retry.MaxAttempts)
	require.Equal(t, "payload.0", rt.Connectors.Response.DataPath)
	require.Equal(t, uint32(4), rt.State.HTTP.Retry.BackoffMultiplier)
}

func TestRuntimeEnvErrors(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		vars map[string]string
		want []string
		not  string
	}{
		{map[string]string{"IGGY_CONNECTORS_HTTP_ENABLED": "maybe"},
			[]string{"environment variable IGGY_CONNECTORS_HTTP_ENABLED", "(http.enabled)", "expected true or false", `"maybe"`}, ""},
		{map[string]string{"IGGY_CONNECTORS_CONNECTORS_RETRY_MAX_ATTEMPTS": "-1"},
			[]string{"IGGY_CONNECTORS_CONNECTORS_RETRY_MAX_ATTEMPTS", "connectors.retry.max_attempts", "expected an integer from 0 to 4294967295"}, ""},
		{map[string]string{"IGGY_CONNECTORS_STATE_HTTP_TIMEOUT": "soon"},
			[]string{"IGGY_CONNECTORS_STATE_HTTP_TIMEOUT", "state.http.timeout", `expected a duration such as "5ms"`}, ""},
		{map[string]string{"IGGY_CONNECTORS_LOGGING_FORMAT": "xml"},
			[]string{"IGGY_CONNECTORS_LOGGING_FORMAT", "logging.format", `expected one of "text", "json", got "xml"`}, ""},
		{map[string]string{"IGGY_CONNECTORS_HTTP_ADDRESS": "nowhere"},
			[]string{"config.toml", "environment variable IGGY_CONNECTORS_HTTP_ADDRESS", "http.address", "expected host:port"}, ""},
		{map[string]string{"IGGY_CONNECTORS_IGGY_PORT": "1", "IGGY_CONNECTORS_HTTP_API_KEY": ""}, nil, ""},
	} {
		_, err := Load("testdata/upstream/config.toml", WithEnv(MapEnv(tc.vars)))
		if tc.want == nil {
			require.NoError(t, err, "case %d", i)
			continue
		}
		require.Error(t, err, "case %d", i)
		require.ErrorIs(t, err, ErrInvalid, "case %d", i)
		for _, w := range tc.want {
			require.Contains(t, err.Error(), w, "case %d", i)
		}
	}
}

func TestDotenv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	envFile := filepath.Join(dir, "ferry.env")
	require.NoError(t, os.WriteFile(envFile, []byte(`# credentials for the runtime
IGGY_CONNECTORS_IGGY_PASSWORD="p@ss \"quoted\" # not a comment"
export IGGY_CONNECTORS_IGGY_USERNAME = 'literal $user'
IGGY_CONNECTORS_HTTP_ADDRESS=127.0.0.1:7000   # a comment
IGGY_CONNECTORS_IGGY_TOKEN="two
lines"
IGGY_CONNECTORS_LOGGING_FORMAT=json
`), 0o600))
	cfg := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[connectors]\nconfig_dir = \"c\"\n"), 0o600))

	rt, err := Load("", WithEnv(MapEnv(map[string]string{
		EnvConfigPath:                    cfg,
		EnvDotenvPath:                    envFile,
		"IGGY_CONNECTORS_LOGGING_FORMAT": "text", // the process environment wins over .env
	})))
	require.NoError(t, err)
	require.Equal(t, `p@ss "quoted" # not a comment`, rt.Iggy.Password)
	require.Equal(t, "literal $user", rt.Iggy.Username)
	require.Equal(t, "127.0.0.1:7000", rt.HTTP.Address)
	require.Equal(t, "two\nlines", rt.Iggy.Token)
	require.Equal(t, LogText, rt.Logging.Format)
	v, ok := rt.Env().Lookup("IGGY_CONNECTORS_IGGY_USERNAME")
	require.True(t, ok, "the runtime's Env includes the .env variables")
	require.Equal(t, "literal $user", v)

	// A broken .env names the file and the line.
	bad := filepath.Join(dir, "bad.env")
	require.NoError(t, os.WriteFile(bad, []byte("A=1\nB=\"unterminated\n"), 0o600))
	_, err = Load(cfg, WithEnv(MapEnv(map[string]string{EnvDotenvPath: bad})))
	require.Error(t, err)
	require.Contains(t, err.Error(), "bad.env:2: B: missing closing \" quote")

	_, err = Load(cfg, WithEnv(MapEnv(map[string]string{EnvDotenvPath: filepath.Join(dir, "missing.env")})))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestParseDotenvCases(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		in   string
		want map[string]string
		err  string
	}{
		{"", map[string]string{}, ""},
		{"A=1\r\nB=2\r\n", map[string]string{"A": "1", "B": "2"}, ""},
		{"  # comment\n\nA = x y  \n", map[string]string{"A": "x y"}, ""},
		{"A=x#y\n", map[string]string{"A": "x#y"}, ""},
		{"A=\n", map[string]string{"A": ""}, ""},
		{`A="tab\tnew\nline\\"`, map[string]string{"A": "tab\tnew\nline\\"}, ""},
		{`A='no\nescape'`, map[string]string{"A": `no\nescape`}, ""},
		{"A=1\nA=2\n", map[string]string{"A": "2"}, ""},
		{"1A=x\n", nil, "t.env:1: expected KEY=VALUE"},
		{"A x\n", nil, "t.env:1: expected '=' after A"},
		{"A=\"x\" y\n", nil, "t.env:1: A: unexpected text after the closing quote"},
		{"A='x\n", nil, "missing closing ' quote"},
	} {
		got, err := ParseDotenv("t.env", []byte(tc.in))
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, "case %d", i)
			continue
		}
		require.NoError(t, err, "case %d", i)
		require.Equal(t, tc.want, got, "case %d", i)
	}
}

func TestRuntimeFileErrors(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		src  string
		want []string
	}{
		// unknown key, with a suggestion
		{"[connectors]\nconfig_dir = \"c\"\n[http]\nadress = \"x\"\n",
			[]string{"rt.toml:4: http.adress: unknown key; did you mean \"address\"?"}},
		// unknown section
		{"[connectors]\nconfig_dir = \"c\"\n[sinks.stdout]\nenabled = true\n",
			[]string{"rt.toml:3: sinks: unknown key; connectors are configured one per file"}},
		// wrong type
		{"[connectors]\nconfig_dir = \"c\"\n[http]\nenabled = \"true\"\n",
			[]string{"rt.toml:4: http.enabled: expected true or false, got the string \"true\"; write it without quotes"}},
		{"[connectors]\nconfig_dir = 5\n",
			[]string{"rt.toml:2: connectors.config_dir: expected a string, got an integer (5)"}},
		// bad duration
		{"[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\ntimeout = \"10 parsecs\"\n",
			[]string{"rt.toml:4: connectors.timeout: expected a duration such as \"5ms\", \"1s\" or \"1h 30m\", got \"10 parsecs\""}},
		{"[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\ntimeout = 10\n",
			[]string{"connectors.timeout: expected a duration such as \"5ms\", \"1s\" or \"1h 30m\", got an integer (10)"}},
		// enum
		{"[connectors]\nconfig_type = \"lokal\"\n",
			[]string{"rt.toml:2: connectors.config_type: expected one of \"local\", \"http\", got \"lokal\" (did you mean \"local\"?)"}},
		// missing required by config_type
		{"[connectors]\nconfig_type = \"local\"\n",
			[]string{"connectors.config_dir: required with config_type = \"local\""}},
		{"[connectors]\nconfig_type = \"http\"\n",
			[]string{"connectors.base_url: required: an http:// or https:// URL"}},
		// keys of the other provider
		{"[connectors]\nconfig_dir = \"c\"\nbase_url = \"http://x\"\n",
			[]string{"rt.toml:3: connectors.base_url: only used with config_type = \"http\""}},
		{"[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.url_templates]\nget_sink_cfg = \"/x\"\n",
			[]string{"rt.toml:5: connectors.url_templates.get_sink_cfg: unknown URL template, did you mean \"get_sink_config\"?"}},
		// out of range
		{"[connectors]\nconfig_type = \"http\"\nbase_url = \"http://x\"\n[connectors.retry]\nmax_attempts = -2\n",
			[]string{"rt.toml:5: connectors.retry.max_attempts: -2 is out of range; expected an integer from 0 to 4294967295"}},
		// several problems at once
		{"[connectors]\nconfig_dir = \"c\"\n[iggy]\naddress = \"nope\"\n[http.tls]\nenabled = true\n",
			[]string{"3 configuration errors", "rt.toml:4: iggy.address: expected host:port", "http.tls.cert_file: required", "http.tls.key_file: required"}},
		// TOML syntax
		{"[connectors]\nconfig_dir = \"c\n",
			[]string{"rt.toml:2: invalid TOML"}},
		// CORS
		{"[connectors]\nconfig_dir = \"c\"\n[http.cors]\nallowed_origins = [\"https://a\", \"*\"]\nallowed_methods = [\"GET\", \"FETCH\"]\n",
			[]string{"http.cors.allowed_origins[1]: \"*\" allows any origin only as the first", "rt.toml:5: http.cors.allowed_methods[1]: expected an HTTP method"}},
	} {
		_, err := Parse("rt.toml", []byte(tc.src), noEnv)
		require.Error(t, err, "case %d", i)
		var es Errors
		require.True(t, errors.As(err, &es), "case %d: %T", i, err)
		for _, w := range tc.want {
			require.Contains(t, err.Error(), w, "case %d", i)
		}
	}
}

func TestConfigPath(t *testing.T) {
	t.Parallel()
	env := MapEnv(map[string]string{EnvConfigPath: "/from/env.toml"})
	require.Equal(t, "/flag.toml", ConfigPath("/flag.toml", env))
	require.Equal(t, "/from/env.toml", ConfigPath("", env))
	require.Equal(t, "", ConfigPath("", MapEnv(nil)))

	_, err := Load("testdata/does-not-exist.toml", noEnv)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Contains(t, err.Error(), "testdata/does-not-exist.toml")
}

func TestRelativePaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "conf", "connectors"), 0o755))
	cfg := filepath.Join(dir, "conf", "config.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[state]\npath = \"st\"\n[connectors]\nconfig_dir = \"connectors\"\n"), 0o600))
	rt, err := Load(cfg, noEnv)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "conf", "st"), rt.State.Path)
	require.Equal(t, filepath.Join(dir, "conf", "connectors"), rt.Connectors.ConfigDir)

	// A path that exists only relative to the working directory (upstream's
	// examples) is taken from there.
	require.NoError(t, os.WriteFile(cfg, []byte("[connectors]\nconfig_dir = \"testdata/upstream/connectors\"\n"), 0o600))
	rt, err = Load(cfg, noEnv)
	require.NoError(t, err)
	want, _ := filepath.Abs("testdata/upstream/connectors")
	require.Equal(t, want, rt.Connectors.ConfigDir)
}

func TestQuickstartExample(t *testing.T) {
	t.Parallel()
	rt, err := Load("../examples/quickstart/config.toml", noEnv)
	require.NoError(t, err)
	require.True(t, rt.Iggy.Embedded())
	require.True(t, rt.Iggy.CreateMissing)
	require.True(t, strings.HasSuffix(rt.Connectors.ConfigDir, filepath.Join("examples", "quickstart", "connectors")))
	require.True(t, strings.HasSuffix(rt.State.Path, filepath.Join("examples", "quickstart", "state")))

	p, err := NewProvider(rt)
	require.NoError(t, err)
	defer p.Close()
	set, err := p.Load(t.Context())
	require.NoError(t, err)
	require.Empty(t, set.Errors)
	require.Len(t, set.Connectors, 2)
	src, sink := set.Get(KindSource, "random"), set.Get(KindSink, "stdout")
	require.NotNil(t, src)
	require.NotNil(t, sink)
	require.Equal(t, "random", src.PluginName())
	require.Equal(t, "stdout", sink.PluginName())
	require.Equal(t, ProducerStream{Stream: "quickstart", Topic: "events", Schema: SchemaJSON, BatchLength: 100, LingerTime: 5 * time.Millisecond}, src.Producers[0])
	require.Equal(t, map[string]any{"interval": "500ms", "max_count": int64(1000), "messages_range": []any{int64(1), int64(5)}, "payload_size": int64(32)}, src.PluginConfig)
	require.Equal(t, "quickstart", sink.Consumers[0].Stream)
	require.Equal(t, []string{"events"}, sink.Consumers[0].Topics)
	require.Equal(t, map[string]any{"print_payload": true}, sink.PluginConfig)
}

func TestRetrySchedule(t *testing.T) {
	t.Parallel()
	r := Retry{Enabled: true, MaxAttempts: 5, InitialBackoff: time.Second, MaxBackoff: 5 * time.Second, BackoffMultiplier: 2}
	b := r.Schedule()
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		d := b.Next()
		require.LessOrEqual(t, d, want, "retry %d", n)
		require.GreaterOrEqual(t, d, want/2, "retry %d: jitter takes at most half", n)
	}
	huge := Retry{InitialBackoff: time.Hour, MaxBackoff: 1 << 62, BackoffMultiplier: 1 << 31}.Schedule()
	for range 3 {
		huge.Next()
	}
	require.LessOrEqual(t, huge.Next(), time.Duration(1<<62), "no overflow")
}

func TestIggyEmbedded(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{"": true, "embedded": true, " Embedded ": true, "localhost:8090": false} {
		require.Equal(t, want, Iggy{Address: addr}.Embedded(), addr)
	}
}

// The production example (examples/deploy) loads: an Iggy server over TLS
// as a limited user, secrets from the environment.
func TestDeployExample(t *testing.T) {
	t.Parallel()
	rt, err := Load("../examples/deploy/config.toml", WithEnv(MapEnv(map[string]string{
		"IGGY_CONNECTORS_IGGY_PASSWORD": "s3cret", "IGGY_CONNECTORS_HTTP_API_KEY": "k3y"})))
	require.NoError(t, err)
	require.False(t, rt.Iggy.Embedded())
	require.Equal(t, "iggy.internal:8090", rt.Iggy.Address)
	require.Equal(t, "ferry", rt.Iggy.Username)
	require.Equal(t, "s3cret", rt.Iggy.Password)
	require.Equal(t, IggyTLS{Enabled: true, CAFile: "/etc/ferry/iggy-ca.pem", Domain: "iggy.internal"}, rt.Iggy.TLS)
	require.False(t, rt.Iggy.CreateMissing)
	require.Equal(t, "/var/lib/ferry", rt.State.Path)
	require.Equal(t, "/etc/ferry/connectors", rt.Connectors.ConfigDir)
	require.Equal(t, "127.0.0.1:8081", rt.HTTP.Address)
	require.Equal(t, "k3y", rt.HTTP.APIKey)
}

// [state] storage = "iggy" and [scale_out] (Ferry extensions): defaults,
// and what scale-out needs refused with the key named.
func TestScaleOutConfig(t *testing.T) {
	t.Parallel()
	load := func(toml string) (*Runtime, error) {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.toml")
		require.NoError(t, os.WriteFile(path, []byte("[connectors]\nconfig_dir = \"c\"\n"+toml), 0o644))
		return Load(path, noEnv)
	}
	rt, err := load("[iggy]\naddress = \"iggy:8090\"\n[state]\nstorage = \"iggy\"\n[scale_out]\nenabled = true\n")
	require.NoError(t, err)
	require.Equal(t, StorageIggy, rt.State.Storage)
	require.Equal(t, StateIggy{Stream: "ferry", Topic: "state"}, rt.State.Iggy)
	require.Equal(t, ScaleOut{Enabled: true, LeaseStream: "ferry", RenewInterval: 500 * time.Millisecond,
		HoldTimeout: 2 * time.Second, TakeoverDelay: 3 * time.Second}, rt.ScaleOut)
	for _, tc := range []struct{ toml, want string }{
		{"[iggy]\naddress = \"iggy:8090\"\n[scale_out]\nenabled = true\n", `scale_out.enabled: needs state.storage = "iggy"`},
		{"[state]\nstorage = \"iggy\"\n[scale_out]\nenabled = true\n", "scale_out.enabled: needs an Iggy server"},
		{"[iggy]\naddress = \"iggy:8090\"\n[state]\nstorage = \"iggy\"\n[state.iggy]\ntopic = \"\"\n", "state.iggy.topic"},
		{"[iggy]\naddress = \"iggy:8090\"\n[state]\nstorage = \"iggy\"\n[scale_out]\nenabled = true\nhold_timeout = \"5s\"\n", "scale_out.takeover_delay"},
	} {
		_, err := load(tc.toml)
		require.ErrorContains(t, err, tc.want, tc.toml)
	}
}
