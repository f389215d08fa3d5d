package httpsink

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// Config is the http sink's plugin_config (see the package doc).
type Config struct {
	URL                         string              `json:"url"`
	Method                      string              `json:"method"`
	Timeout                     *connector.Duration `json:"timeout"`
	MaxPayloadSizeBytes         *uint64             `json:"max_payload_size_bytes"`
	Headers                     map[string]string   `json:"headers"`
	BatchMode                   string              `json:"batch_mode"`
	IncludeMetadata             *bool               `json:"include_metadata"`
	IncludeChecksum             bool                `json:"include_checksum"`
	IncludeOriginTimestamp      bool                `json:"include_origin_timestamp"`
	HealthCheckEnabled          bool                `json:"health_check_enabled"`
	HealthCheckMethod           string              `json:"health_check_method"`
	MaxRetries                  *uint32             `json:"max_retries"`
	RetryDelay                  *connector.Duration `json:"retry_delay"`
	RetryBackoffMultiplier      *float64            `json:"retry_backoff_multiplier"`
	MaxRetryDelay               *connector.Duration `json:"max_retry_delay"`
	SuccessStatusCodes          []int               `json:"success_status_codes"`
	TLSDangerAcceptInvalidCerts bool                `json:"tls_danger_accept_invalid_certs"`
	MaxConnections              *int                `json:"max_connections"`
	VerboseLogging              bool                `json:"verbose_logging"`

	// Ferry extensions.
	SigningSecret   string `json:"signing_secret"`
	SignatureHeader string `json:"signature_header"`
	TimestampHeader string `json:"timestamp_header"`
	RequestIDHeader string `json:"request_id_header"`
}

// Batch modes.
const (
	ModeIndividual = "individual"
	ModeNDJSON     = "ndjson"
	ModeJSONArray  = "json_array"
	ModeRaw        = "raw"
)

// Defaults, as upstream.
const (
	DefaultTimeout         = 30 * time.Second
	DefaultMaxPayloadSize  = 10 << 20
	DefaultMaxRetries      = 3
	DefaultRetryDelay      = time.Second
	DefaultBackoff         = 2.0
	DefaultMaxRetryDelay   = 30 * time.Second
	DefaultMaxConnections  = 10
	DefaultSignatureHeader = "X-Ferry-Signature"
	DefaultTimestampHeader = "X-Ferry-Timestamp"
	DefaultRequestIDHeader = "X-Ferry-Request-Id"
	// maxConsecutiveFailures stops a per-message batch after this many
	// requests in a row failed transiently.
	maxConsecutiveFailures = 3
)

var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// settings is a checked configuration with defaults applied and secrets
// resolved.
type settings struct {
	url             *url.URL
	safeURL         string // for logs and errors: no query, no user info
	method          string
	timeout         time.Duration
	maxBody         uint64 // 0 = unlimited
	headers         http.Header
	mode            string
	metadata        bool
	checksum        bool
	originTS        bool
	healthCheck     bool
	healthMethod    string
	maxRetries      uint32
	retryDelay      time.Duration
	backoff         float64
	maxRetryDelay   time.Duration
	success         []int
	insecureTLS     bool
	maxConns        int
	verbose         bool
	secret          []byte
	signatureHeader string
	timestampHeader string
	requestIDHeader string
}

// settle checks c and applies the defaults; getenv resolves ${NAME}.
func settle(c Config, p connector.PluginConfig, getenv func(string) (string, bool)) (*settings, error) {
	s := &settings{method: http.MethodPost, timeout: DefaultTimeout, maxBody: DefaultMaxPayloadSize,
		mode: ModeIndividual, metadata: true, healthMethod: http.MethodHead, maxRetries: DefaultMaxRetries,
		retryDelay: DefaultRetryDelay, backoff: DefaultBackoff, maxRetryDelay: DefaultMaxRetryDelay,
		success: []int{200, 201, 202, 204}, maxConns: DefaultMaxConnections,
		checksum: c.IncludeChecksum, originTS: c.IncludeOriginTimestamp, healthCheck: c.HealthCheckEnabled,
		insecureTLS: c.TLSDangerAcceptInvalidCerts, verbose: c.VerboseLogging,
		signatureHeader: DefaultSignatureHeader, timestampHeader: DefaultTimestampHeader, requestIDHeader: DefaultRequestIDHeader,
		headers: http.Header{}}
	where := func(key string) string { return where(p, key) }

	if err := p.Required("url", c.URL); err != nil {
		return nil, err
	}
	raw, err := expand(c.URL, getenv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where("url"), err)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s is not an http:// or https:// URL with a host", where("url"))
	}
	s.url, s.safeURL = u, safeURL(u)

	if c.Method != "" {
		if s.method, err = method(c.Method, where("method")); err != nil {
			return nil, err
		}
	}
	if c.HealthCheckMethod != "" {
		if s.healthMethod, err = method(c.HealthCheckMethod, where("health_check_method")); err != nil {
			return nil, err
		}
	}
	if c.BatchMode != "" {
		s.mode = strings.ToLower(c.BatchMode)
		if !slices.Contains([]string{ModeIndividual, ModeNDJSON, ModeJSONArray, ModeRaw}, s.mode) {
			return nil, fmt.Errorf("%s is %q, want individual, ndjson, json_array or raw", where("batch_mode"), c.BatchMode)
		}
	}
	if c.Timeout != nil {
		if s.timeout = c.Timeout.D(); s.timeout <= 0 {
			return nil, fmt.Errorf("%s must be positive", where("timeout"))
		}
	}
	if c.MaxPayloadSizeBytes != nil {
		s.maxBody = *c.MaxPayloadSizeBytes
	}
	if c.IncludeMetadata != nil {
		s.metadata = *c.IncludeMetadata
	}
	if c.MaxRetries != nil {
		s.maxRetries = *c.MaxRetries
	}
	if c.RetryDelay != nil {
		s.retryDelay = max(c.RetryDelay.D(), 0)
	}
	if c.RetryBackoffMultiplier != nil {
		s.backoff = max(*c.RetryBackoffMultiplier, 1)
	}
	if c.MaxRetryDelay != nil {
		s.maxRetryDelay = max(c.MaxRetryDelay.D(), 0)
	}
	if c.SuccessStatusCodes != nil {
		if len(c.SuccessStatusCodes) == 0 {
			return nil, fmt.Errorf("%s is empty", where("success_status_codes"))
		}
		for _, code := range c.SuccessStatusCodes {
			if code < 100 || code > 599 {
				return nil, fmt.Errorf("%s: %d is not an HTTP status code", where("success_status_codes"), code)
			}
		}
		s.success = c.SuccessStatusCodes
	}
	if c.MaxConnections != nil {
		if *c.MaxConnections < 1 {
			return nil, fmt.Errorf("%s must be at least 1", where("max_connections"))
		}
		s.maxConns = *c.MaxConnections
	}
	for name, v := range c.Headers {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("%s: %q is not a valid header name", where("headers"), name)
		}
		val, err := expand(v, getenv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where("headers."+name), err)
		}
		if strings.ContainsAny(val, "\r\n\x00") {
			return nil, fmt.Errorf("%s: the value contains a line break or NUL", where("headers."+name))
		}
		s.headers.Set(name, val)
	}
	if c.SigningSecret != "" {
		secret, err := expand(c.SigningSecret, getenv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where("signing_secret"), err)
		}
		if secret == "" {
			return nil, fmt.Errorf("%s is empty after expansion", where("signing_secret"))
		}
		s.secret = []byte(secret)
	}
	for _, h := range []struct {
		key string
		in  string
		out *string
	}{{"signature_header", c.SignatureHeader, &s.signatureHeader}, {"timestamp_header", c.TimestampHeader, &s.timestampHeader},
		{"request_id_header", c.RequestIDHeader, &s.requestIDHeader}} {
		if h.in == "" {
			continue
		}
		if !validHeaderName(h.in) {
			return nil, fmt.Errorf("%s: %q is not a valid header name", where(h.key), h.in)
		}
		*h.out = h.in
	}
	names := []string{s.signatureHeader, s.timestampHeader, s.requestIDHeader}
	for i, a := range names {
		for _, b := range names[i+1:] {
			if strings.EqualFold(a, b) {
				return nil, fmt.Errorf("%s: signature_header, timestamp_header and request_id_header must differ; %q is used twice", where("signature_header"), a)
			}
		}
	}
	return s, nil
}

func where(p connector.PluginConfig, key string) string {
	w := "plugin_config." + key
	if p.Source != "" {
		w = p.Source + ": " + w
	}
	return w
}

func method(m, where string) (string, error) {
	up := strings.ToUpper(m)
	if !slices.Contains(methods, up) {
		return "", fmt.Errorf("%s is %q, want one of %s", where, m, strings.Join(methods, ", "))
	}
	return up, nil
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// safeURL is u without user info and query, for logs and errors.
func safeURL(u *url.URL) string {
	c := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return c.String()
}

// errUnsetVariable is wrapped by expand's error for a missing variable.
var errUnsetVariable = errors.New("environment variable is not set")

// expand replaces ${NAME} with the value of the environment variable
// NAME; "$${" is a literal "${". A "$" not followed by "{" stays.
func expand(s string, getenv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' { // "$${" → "${"
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q has no closing }", s[i:])
		}
		name := s[i+2 : i+end]
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s} is not a valid variable name (letters, digits and _)", name)
		}
		v, ok := getenv(name)
		if !ok {
			return "", fmt.Errorf("%s: %w", name, errUnsetVariable)
		}
		b.WriteString(v)
		s = s[i+end+1:]
	}
}

func validEnvName(n string) bool {
	if n == "" {
		return false
	}
	for i, r := range n {
		ok := r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}
