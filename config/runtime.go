package config

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/internal/backoff"
)

// Runtime is the connector runtime's config.toml: the same sections and
// keys as upstream's runtime, plus Ferry's extensions (marked below).
type Runtime struct {
	HTTP       HTTP       `toml:"http"`
	Iggy       Iggy       `toml:"iggy"`
	Connectors Connectors `toml:"connectors"`
	State      State      `toml:"state"`
	Telemetry  Telemetry  `toml:"telemetry"`
	Logging    Logging    `toml:"logging"`
	// ScaleOut (Ferry extension) runs several runtimes of one
	// configuration against one Iggy server.
	ScaleOut ScaleOut `toml:"scale_out"`
	// Events (Ferry extension) is the [events."NAME"] catalog of declared
	// event types; see config/events.go.
	Events EventCatalog `toml:"events" cfg:"noenv"`

	// File is the config file this was loaded from, made absolute; empty
	// when no file was read.
	File string `toml:"-"`
	// Warnings are problems that do not stop loading, such as an
	// IGGY_CONNECTORS_* variable that addresses no known key.
	Warnings []string `toml:"-"`

	env Env // the environment the config was loaded with (.env included)
}

// Env returns the environment the configuration was loaded with, including
// the variables of the .env file; providers apply connector overrides from
// it.
func (r *Runtime) Env() Env { return r.env }

// Iggy is the [iggy] section: how to reach the Iggy server.
type Iggy struct {
	// Address is host:port of the server. Ferry extension: "" or
	// "embedded" runs Ferry's embedded broker in-process (the default).
	Address  string  `toml:"address"`
	Username string  `toml:"username"`
	Password string  `toml:"password" cfg:"secret"`
	Token    string  `toml:"token" cfg:"secret"` // personal access token; used instead of username/password when set
	TLS      IggyTLS `toml:"tls"`
	// CreateMissing (Ferry extension) creates the streams and topics named
	// by connectors when they do not exist. Upstream requires them to exist.
	CreateMissing bool `toml:"create_missing"`
	// EmbeddedAddress (Ferry extension) is where the embedded broker
	// listens: default "127.0.0.1:8090", the address Iggy clients and the
	// ferry CLI use by default. "127.0.0.1:0" picks a free port.
	EmbeddedAddress string `toml:"embedded_address"`
	// EmbeddedDedupEntries and EmbeddedDedupExpiry (Ferry extensions) turn
	// on the embedded broker's message deduplication by id: each partition
	// remembers that many recent ids (default 4096; 0 turns it off) for
	// that long (default 10m). A batch sent again after a crash, with the
	// same ids, is then stored once (the CDC, webhook, iggy and derive
	// connectors rely on it for their exactly-once effect).
	EmbeddedDedupEntries int           `toml:"embedded_dedup_entries"`
	EmbeddedDedupExpiry  time.Duration `toml:"embedded_dedup_expiry"`
}

// Default message deduplication of the embedded broker.
const (
	DefaultEmbeddedDedupEntries = 4096
	DefaultEmbeddedDedupExpiry  = 10 * time.Minute
)

// Embedded reports whether the runtime should use the embedded broker.
func (i Iggy) Embedded() bool {
	a := strings.TrimSpace(i.Address)
	return a == "" || strings.EqualFold(a, "embedded")
}

// IggyTLS is [iggy.tls].
type IggyTLS struct {
	Enabled bool   `toml:"enabled"`
	CAFile  string `toml:"ca_file"`
	Domain  string `toml:"domain"`
}

// HTTP is the [http] section: the runtime's management API.
type HTTP struct {
	Enabled bool   `toml:"enabled"`
	Address string `toml:"address"`
	// APIKey is the key every request must carry in the api-key header
	// (upstream). Ferry: when empty, the API is not open as upstream's
	// is; the runtime makes a local token at start, readable only by its
	// own user, and requires it instead (see package api).
	APIKey  string      `toml:"api_key" cfg:"secret"`
	CORS    CORS        `toml:"cors"`
	Metrics HTTPMetrics `toml:"metrics"`
	TLS     HTTPTLS     `toml:"tls"`
	// PublicReads (Ferry extension) serves GET /stats and the metrics
	// endpoint without a credential when api_key is empty, for
	// Prometheus scrapers and dashboards; false requires the local token
	// for them too. GET / and /health are always public; with api_key
	// set, everything else needs the key, as upstream.
	PublicReads bool `toml:"public_reads"`
}

// CORS is [http.cors].
type CORS struct {
	Enabled             bool     `toml:"enabled"`
	AllowedMethods      []string `toml:"allowed_methods"`
	AllowedOrigins      []string `toml:"allowed_origins"`
	AllowedHeaders      []string `toml:"allowed_headers"`
	ExposedHeaders      []string `toml:"exposed_headers"`
	AllowCredentials    bool     `toml:"allow_credentials"`
	AllowPrivateNetwork bool     `toml:"allow_private_network"`
}

// HTTPMetrics is [http.metrics]: the Prometheus endpoint.
type HTTPMetrics struct {
	Enabled  bool   `toml:"enabled"`
	Endpoint string `toml:"endpoint"`
}

// HTTPTLS is [http.tls].
type HTTPTLS struct {
	Enabled  bool   `toml:"enabled"`
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
}

// Connectors is the [connectors] section: where connector configurations
// come from. ConfigType "local" uses ConfigDir; "http" uses the other keys.
type Connectors struct {
	ConfigType ProviderType `toml:"config_type"`
	// local
	ConfigDir string `toml:"config_dir"`
	// AllowedDirs (Ferry extension), when set, are the only directories
	// under which connectors may read or write files; relative entries
	// resolve against config.toml's directory. Whatever it says,
	// connectors never touch config_dir, config.toml, the .env file and
	// the state directory.
	AllowedDirs []string `toml:"allowed_dirs"`
	// http
	BaseURL        string            `toml:"base_url"`
	Timeout        time.Duration     `toml:"timeout"`
	RequestHeaders map[string]string `toml:"request_headers" cfg:"secret,noenv"`
	URLTemplates   map[string]string `toml:"url_templates" cfg:"noenv"`
	Response       Response          `toml:"response"`
	Retry          Retry             `toml:"retry"`
}

// Response is [connectors.response]: where the payload and the error are
// in the HTTP provider's JSON responses (dot-separated keys, numeric
// segments index arrays).
type Response struct {
	DataPath  string `toml:"data_path"`
	ErrorPath string `toml:"error_path"`
}

// Retry is a retry policy with exponential backoff. MaxAttempts counts
// retries after the first request.
type Retry struct {
	Enabled           bool          `toml:"enabled"`
	MaxAttempts       uint32        `toml:"max_attempts"`
	InitialBackoff    time.Duration `toml:"initial_backoff"`
	MaxBackoff        time.Duration `toml:"max_backoff"`
	BackoffMultiplier uint32        `toml:"backoff_multiplier"`
}

// Schedule is the retry policy's waits: InitialBackoff, then
// BackoffMultiplier times longer each retry, capped at MaxBackoff, each
// drawn from the upper half of the scheduled wait (jitter), so that
// runtimes restarting together do not retry in step.
func (r Retry) Schedule() backoff.Backoff {
	return backoff.Backoff{Min: r.InitialBackoff, Max: r.MaxBackoff, Factor: float64(max(r.BackoffMultiplier, 1)), Jitter: 0.5}
}

// State is the [state] section: where sources keep their checkpoints.
type State struct {
	Path    string       `toml:"path"`
	Storage StateStorage `toml:"storage"`
	HTTP    StateHTTP    `toml:"http"`
	// Iggy (Ferry extension) is [state.iggy], used when Storage is "iggy".
	Iggy StateIggy `toml:"iggy"`
}

// StateIggy is [state.iggy]: the topic that holds every source's state
// (package state/iggystate), readable by every runtime of a scale-out.
type StateIggy struct {
	Stream string `toml:"stream"`
	Topic  string `toml:"topic"`
}

// ScaleOut is [scale_out] (Ferry extension): with Enabled, each source
// runs in one runtime at a time, under a lease kept in Iggy (package
// lease), and the others stand by to take it over; sinks share their
// partitions through their consumer groups as always. It needs state
// every runtime reads (state.storage = "iggy") and an Iggy server they
// share (not the embedded broker).
type ScaleOut struct {
	Enabled bool `toml:"enabled"`
	// LeaseStream holds the lease topics (lease-<source key>).
	LeaseStream string `toml:"lease_stream"`
	// RenewInterval, HoldTimeout and TakeoverDelay tune the leases (see
	// package lease): a holder checks every RenewInterval, gives up after
	// HoldTimeout unconfirmed, and a new holder waits TakeoverDelay
	// unless the last one released.
	RenewInterval time.Duration `toml:"renew_interval"`
	HoldTimeout   time.Duration `toml:"hold_timeout"`
	TakeoverDelay time.Duration `toml:"takeover_delay"`
}

// StateHTTP is [state.http], used when Storage is "http".
type StateHTTP struct {
	URL            string            `toml:"url" cfg:"secret"` // may carry credentials in its query
	LoadMethod     LoadMethod        `toml:"load_method"`
	SaveMethod     SaveMethod        `toml:"save_method"`
	Timeout        time.Duration     `toml:"timeout"`
	RequestHeaders map[string]string `toml:"request_headers" cfg:"secret,noenv"`
	Retry          Retry             `toml:"retry"`
}

// Telemetry is the [telemetry] section (OpenTelemetry export).
type Telemetry struct {
	Enabled     bool            `toml:"enabled"`
	ServiceName string          `toml:"service_name"`
	Logs        TelemetryTarget `toml:"logs"`
	Traces      TelemetryTarget `toml:"traces"`
	// Metrics (Ferry extension; upstream exports no metrics through OTLP).
	Metrics TelemetryMetrics `toml:"metrics"`
}

// TelemetryMetrics is [telemetry.metrics] (Ferry extension): where the
// runtime's metrics are exported through OTLP, besides Prometheus. An
// empty endpoint means [telemetry.traces]' transport and endpoint.
type TelemetryMetrics struct {
	Transport Transport `toml:"transport"`
	Endpoint  string    `toml:"endpoint"`
	// Interval between exports; 0 means 60s.
	Interval time.Duration `toml:"interval"`
}

// TelemetryTarget is [telemetry.logs] or [telemetry.traces].
type TelemetryTarget struct {
	Transport Transport `toml:"transport"`
	Endpoint  string    `toml:"endpoint"`
}

// Logging is the [logging] section.
type Logging struct {
	Format LogFormat `toml:"format"`
	// Level (Ferry extension) is the minimum level logged.
	Level LogLevel `toml:"level"`
}

// DefaultEmbeddedAddress is where the embedded broker listens by default:
// Iggy's own default TCP address, which clients and the ferry CLI use.
const DefaultEmbeddedAddress = "127.0.0.1:8090"

// Default returns the configuration used for every key a file leaves out:
// upstream's defaults, except that the Iggy address defaults to the
// embedded broker.
func Default() *Runtime {
	return &Runtime{
		HTTP: HTTP{
			Enabled: true,
			Address: "127.0.0.1:8081",
			CORS: CORS{
				AllowedMethods: []string{"GET", "POST", "PUT", "DELETE"},
				AllowedOrigins: []string{"*"},
				AllowedHeaders: []string{"content-type"},
			},
			Metrics:     HTTPMetrics{Endpoint: "/metrics"},
			PublicReads: true,
		},
		Iggy: Iggy{Username: "iggy", Password: "iggy", EmbeddedAddress: DefaultEmbeddedAddress,
			EmbeddedDedupEntries: DefaultEmbeddedDedupEntries, EmbeddedDedupExpiry: DefaultEmbeddedDedupExpiry},
		Connectors: Connectors{
			ConfigType: ProviderLocal,
			Timeout:    10 * time.Second,
			Retry: Retry{
				Enabled: true, MaxAttempts: 3, InitialBackoff: time.Second,
				MaxBackoff: 30 * time.Second, BackoffMultiplier: 2,
			},
		},
		State: State{
			Path:    "local_state",
			Storage: StorageFile,
			HTTP: StateHTTP{
				LoadMethod: "get", SaveMethod: "put", Timeout: 5 * time.Second,
				Retry: Retry{
					Enabled: true, MaxAttempts: 4, InitialBackoff: 200 * time.Millisecond,
					MaxBackoff: 2 * time.Second, BackoffMultiplier: 2,
				},
			},
			Iggy: StateIggy{Stream: "ferry", Topic: "state"},
		},
		ScaleOut: ScaleOut{LeaseStream: "ferry", RenewInterval: 500 * time.Millisecond,
			HoldTimeout: 2 * time.Second, TakeoverDelay: 3 * time.Second},
		Telemetry: Telemetry{
			ServiceName: "iggy-connectors",
			Logs:        TelemetryTarget{Transport: "grpc", Endpoint: "http://localhost:4317"},
			Traces:      TelemetryTarget{Transport: "grpc", Endpoint: "http://localhost:4317"},
		},
		Logging: Logging{Format: LogText, Level: "info"},
		env:     OSEnv(),
	}
}

// Runtime keys allowed for one connectors.config_type only.
var (
	localOnlyKeys = []string{"config_dir"}
	httpOnlyKeys  = []string{"base_url", "timeout", "request_headers", "url_templates", "response", "retry"}
)

// validate checks the values that types alone do not. b has the file and
// the keys present in it.
func (r *Runtime) validate(b *binder) {
	p := path{}
	c := r.Connectors
	cp := p.key("connectors")
	switch c.ConfigType {
	case ProviderLocal:
		for _, k := range httpOnlyKeys {
			if b.has(cp.key(k)) {
				b.fail(cp.key(k), `only used with config_type = "http"; remove it or set config_type = "http"`)
			}
		}
		if c.ConfigDir == "" {
			b.fail(cp.key("config_dir"), `required with config_type = "local": the directory of connector files`)
		}
	case ProviderHTTP:
		for _, k := range localOnlyKeys {
			if b.has(cp.key(k)) {
				b.fail(cp.key(k), `only used with config_type = "local"; remove it or set config_type = "local"`)
			}
		}
		checkURL(b, cp.key("base_url"), c.BaseURL, true)
		for name := range c.URLTemplates {
			if _, ok := defaultTemplates[name]; !ok {
				msg := "unknown URL template"
				if s := suggest(name, templateNames()); s != "" {
					msg += ", did you mean " + strconv.Quote(s) + "?"
				} else {
					msg += "; known templates: " + strings.Join(templateNames(), ", ")
				}
				b.fail(cp.key("url_templates").key(name), "%s", msg)
			}
		}
		checkPositive(b, cp.key("timeout"), c.Timeout)
		validateRetry(b, cp.key("retry"), c.Retry)
	}
	if !r.Iggy.Embedded() {
		checkHostPort(b, p.key("iggy").key("address"), r.Iggy.Address, `or "embedded" for the in-process broker`)
	}
	if r.Iggy.EmbeddedDedupEntries < 0 {
		b.fail(p.key("iggy").key("embedded_dedup_entries"), "expected a number of ids, 0 to turn deduplication off, got %d", r.Iggy.EmbeddedDedupEntries)
	}
	if r.Iggy.EmbeddedDedupExpiry < 0 {
		b.fail(p.key("iggy").key("embedded_dedup_expiry"), `expected a duration such as "10m" ("0" keeps ids until newer ones push them out)`)
	}
	if _, port, err := net.SplitHostPort(r.Iggy.EmbeddedAddress); r.Iggy.Embedded() && (err != nil || !validPort(port)) {
		b.fail(p.key("iggy").key("embedded_address"), `expected host:port such as "127.0.0.1:8090" ("127.0.0.1:0" for any free port), got %q`, r.Iggy.EmbeddedAddress)
	}
	h := r.HTTP
	hp := p.key("http")
	if h.Enabled {
		checkHostPort(b, hp.key("address"), h.Address, "")
	}
	if h.TLS.Enabled {
		if h.TLS.CertFile == "" {
			b.fail(hp.key("tls").key("cert_file"), "required when http.tls.enabled = true")
		}
		if h.TLS.KeyFile == "" {
			b.fail(hp.key("tls").key("key_file"), "required when http.tls.enabled = true")
		}
	}
	if h.Metrics.Enabled && !strings.HasPrefix(h.Metrics.Endpoint, "/") {
		b.fail(hp.key("metrics").key("endpoint"), `expected a path starting with "/", got %q`, h.Metrics.Endpoint)
	}
	for i, m := range h.CORS.AllowedMethods {
		if m != "" && !validMethod(m) {
			b.fail(hp.key("cors").key("allowed_methods").index(i), "expected an HTTP method such as GET, POST, PUT, DELETE; got %q", m)
		}
	}
	for i, o := range h.CORS.AllowedOrigins {
		if o == "*" && i > 0 {
			b.fail(hp.key("cors").key("allowed_origins").index(i), `"*" allows any origin only as the first and only entry`)
		}
	}
	sp := p.key("state")
	if r.State.Path == "" && r.State.Storage == StorageFile {
		b.fail(sp.key("path"), "required: the directory for source state files")
	}
	if r.State.Storage == StorageHTTP {
		checkURL(b, sp.key("http").key("url"), r.State.HTTP.URL, false)
		checkPositive(b, sp.key("http").key("timeout"), r.State.HTTP.Timeout)
		validateRetry(b, sp.key("http").key("retry"), r.State.HTTP.Retry)
	}
	if r.State.Storage == StorageIggy {
		for _, k := range []struct{ key, v string }{{"stream", r.State.Iggy.Stream}, {"topic", r.State.Iggy.Topic}} {
			if k.v == "" || len(k.v) > 255 {
				b.fail(sp.key("iggy").key(k.key), "expected a name of 1 to 255 bytes")
			}
		}
	}
	so := p.key("scale_out")
	if r.ScaleOut.Enabled {
		if r.State.Storage != StorageIggy {
			b.fail(so.key("enabled"), `needs state.storage = "iggy": every runtime must read the sources' state`)
		}
		if r.Iggy.Embedded() {
			b.fail(so.key("enabled"), "needs an Iggy server the runtimes share in [iggy] address, not the embedded broker")
		}
		if r.ScaleOut.LeaseStream == "" || len(r.ScaleOut.LeaseStream) > 255 {
			b.fail(so.key("lease_stream"), "expected a name of 1 to 255 bytes")
		}
		checkPositive(b, so.key("renew_interval"), r.ScaleOut.RenewInterval)
		checkPositive(b, so.key("hold_timeout"), r.ScaleOut.HoldTimeout)
		checkPositive(b, so.key("takeover_delay"), r.ScaleOut.TakeoverDelay)
		if r.ScaleOut.TakeoverDelay <= r.ScaleOut.HoldTimeout {
			b.fail(so.key("takeover_delay"), "must be longer than hold_timeout: the margin is the old holder's time to stop")
		}
	}
}

func validateRetry(b *binder, p path, r Retry) {
	if !r.Enabled {
		return
	}
	if r.BackoffMultiplier == 0 {
		b.fail(p.key("backoff_multiplier"), "expected an integer of at least 1")
	}
	if r.MaxBackoff < r.InitialBackoff {
		b.fail(p.key("max_backoff"), "must not be shorter than initial_backoff (%s)", FormatDuration(r.InitialBackoff))
	}
}

func checkPositive(b *binder, p path, d time.Duration) {
	if d <= 0 {
		b.fail(p, `expected a duration above zero, such as "10s"`)
	}
}

// checkURL checks an http(s) URL without echoing it (it may hold secrets).
func checkURL(b *binder, p path, s string, required bool) {
	if s == "" {
		if required {
			b.fail(p, `required: an http:// or https:// URL`)
		} else {
			b.fail(p, `required when storage = "http": an http:// or https:// URL`)
		}
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		b.fail(p, "expected an http:// or https:// URL with a host")
	}
}

func checkHostPort(b *binder, p path, s, extra string) {
	host, port, err := net.SplitHostPort(s)
	if err == nil {
		n, perr := strconv.Atoi(port)
		if perr == nil && n > 0 && n < 65536 && host != "" {
			return
		}
	}
	msg := `expected host:port such as "127.0.0.1:8090"`
	if extra != "" {
		msg += " " + extra
	}
	b.fail(p, "%s, got %q", msg, s)
}

// validPort: a decimal port, 0 (any free port) to 65535.
func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && n < 65536
}

func validMethod(m string) bool {
	switch strings.ToUpper(m) {
	case "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "CONNECT", "PATCH", "TRACE":
		return true
	}
	return false
}

// keyHints points users of older upstream layouts to the current keys.
func (r *Runtime) keyHints() map[string]string {
	return map[string]string{
		"sinks":   "connectors are configured one per file in connectors.config_dir (older upstream releases used [sinks.*] here)",
		"sources": "connectors are configured one per file in connectors.config_dir (older upstream releases used [sources.*] here)",
	}
}
