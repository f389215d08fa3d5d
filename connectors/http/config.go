package httpsink

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/webhooksig"
)

// Batch modes.
const (
	ModeIndividual = "individual"
	ModeNDJSON     = "ndjson"
	ModeJSONArray  = "json_array"
	ModeRaw        = "raw"
)

// Signing schemes (signing).
const (
	SigningFerry    = "ferry"
	SigningStandard = "standard-webhooks"
)

// Default headers of the signature (Ferry extensions).
const (
	DefaultSignatureHeader = "X-Ferry-Signature"
	DefaultTimestampHeader = "X-Ferry-Timestamp"
	DefaultRequestIDHeader = "X-Ferry-Request-Id"
	// maxConsecutiveFailures stops a per-message batch after this many
	// requests in a row failed transiently.
	maxConsecutiveFailures = 3
)

var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// Spec is the http sink's plugin_config (see the package doc). Keys
// without "Ferry" in their doc are upstream's (libiggy_connector_http_sink).
var Spec = connector.NewSpec(
	connector.NewStringField("url").Require().WithExample("https://example.com/hooks/iggy").
		WithDoc("the endpoint, http:// or https:// with a host; ${NAME} is the environment variable NAME"),
	connector.NewEnumField("method", methods...).WithDefault(http.MethodPost).
		WithDoc("the request method"),
	connector.NewDurationField("timeout").WithDefault(30*time.Second).WithCheck(positive).
		WithDoc("per request"),
	connector.NewSizeField("max_payload_size_bytes").AtLeast(0).WithDefault(int64(10<<20)).
		WithDoc("largest request body; 0 = unlimited"),
	connector.NewMapField("headers", connector.NewStringField("")).WithExample(map[string]string{"Authorization": "Bearer ${API_TOKEN}"}).
		WithDoc("request headers; values may use ${NAME}"),
	connector.NewEnumField("batch_mode", ModeIndividual, ModeNDJSON, ModeJSONArray, ModeRaw).WithDefault(ModeIndividual).
		WithDoc("individual: a request per message; ndjson or json_array: a request per batch; raw: the payload as the body"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("wrap each payload with its stream, topic, partition, offset, id and timestamp"),
	connector.NewBoolField("include_checksum").WithDefault(false).WithDoc("add the message checksum to the metadata"),
	connector.NewBoolField("include_origin_timestamp").WithDefault(false).WithDoc("add the origin timestamp to the metadata"),
	connector.NewBoolField("health_check_enabled").WithDefault(false).WithDoc("check the endpoint when the sink opens"),
	connector.NewEnumField("health_check_method", methods...).WithDefault(http.MethodHead).WithDoc("the health check's method"),
	connector.NewIntField("max_retries").Between(0, math.MaxUint32).WithDefault(3).
		WithDoc("retries of a request that failed transiently"),
	connector.NewDurationField("retry_delay").WithDefault(time.Second).WithDoc("wait before the first retry"),
	connector.NewFloatField("retry_backoff_multiplier").WithDefault(2.0).WithCheck(atLeastOne).
		WithDoc("each retry waits this many times longer"),
	connector.NewDurationField("max_retry_delay").WithDefault(30*time.Second).WithDoc("longest wait between retries"),
	connector.NewListField("success_status_codes", connector.NewIntField("").Between(100, 599)).AtLeast(1).
		WithDefault([]int{200, 201, 202, 204}).WithDoc("statuses that mean delivered"),
	connector.NewBoolField("tls_danger_accept_invalid_certs").WithDefault(false).
		WithDoc("do not verify TLS certificates (for tests only)"),
	connector.NewIntField("max_connections").AtLeast(1).WithDefault(10).WithDoc("idle connections kept to the host"),
	connector.NewBoolField("verbose_logging").WithDefault(false).WithDoc("log each request"),
	connector.NewStringField("signing_secret").AsSecret().WithExample("${HOOK_SECRET}").
		WithDoc("Ferry: sign each request with HMAC-SHA256 of this secret (may use ${NAME}); empty = unsigned"),
	connector.NewEnumField("signing", SigningFerry, SigningStandard).WithDefault(SigningFerry).
		WithDoc("Ferry: the signing scheme with signing_secret: ferry (X-Ferry-Signature over timestamp, id, method, path, body) "+
			"or standard-webhooks (webhook-id, webhook-timestamp, webhook-signature; the secret is whsec_<base64>)"),
	connector.NewStringListField("signing_secret_env").WithExample([]string{"HOOK_SECRET"}).
		WithDoc("Ferry: environment variables holding more secrets to sign with (standard-webhooks: one signature per secret, for rotation; ferry: the first secret only)"),
	connector.NewStringField("signature_header").WithDefault(DefaultSignatureHeader).WithCheck(headerName).
		WithDoc("Ferry: the signature's header"),
	connector.NewStringField("timestamp_header").WithDefault(DefaultTimestampHeader).WithCheck(headerName).
		WithDoc("Ferry: the signed timestamp's header"),
	connector.NewStringField("request_id_header").WithDefault(DefaultRequestIDHeader).WithCheck(headerName).
		WithDoc("Ferry: the request id's header (the same on every retry)"),
).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	for name, v := range s.StringMap("headers") {
		if !validHeaderName(name) {
			fail("headers", "%q is not a valid header name", name)
		} else if strings.ContainsAny(v, "\r\n\x00") {
			fail(join("headers", name), "the value contains a line break or NUL")
		}
	}
	names := []string{s.String("signature_header"), s.String("timestamp_header"), s.String("request_id_header")}
	for i, a := range names {
		for _, b := range names[i+1:] {
			if strings.EqualFold(a, b) {
				fail("signature_header", "signature_header, timestamp_header and request_id_header must differ; %q is used twice", a)
				return
			}
		}
	}
})

// settings is the configuration the sink runs with: the spec's values,
// with ${NAME} references resolved.
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
	signing         string
	standardKeys    [][]byte // signing = standard-webhooks: the decoded secrets
	signatureHeader string
	timestampHeader string
	requestIDHeader string
}

// settle resolves the ${NAME} references of set; getenv looks them up.
func settle(set *connector.Settings, getenv func(string) (string, bool)) (*settings, error) {
	s := &settings{method: set.String("method"), timeout: set.Duration("timeout"),
		maxBody: uint64(set.Size("max_payload_size_bytes")), mode: set.String("batch_mode"),
		metadata: set.Bool("include_metadata"), checksum: set.Bool("include_checksum"),
		originTS: set.Bool("include_origin_timestamp"), healthCheck: set.Bool("health_check_enabled"),
		healthMethod: set.String("health_check_method"), maxRetries: uint32(set.Int("max_retries")),
		retryDelay: set.Duration("retry_delay"), backoff: set.Float("retry_backoff_multiplier"),
		maxRetryDelay: set.Duration("max_retry_delay"), success: set.Ints("success_status_codes"),
		insecureTLS: set.Bool("tls_danger_accept_invalid_certs"), maxConns: set.Int("max_connections"),
		verbose: set.Bool("verbose_logging"), signatureHeader: set.String("signature_header"),
		timestampHeader: set.String("timestamp_header"), requestIDHeader: set.String("request_id_header"),
		signing: set.String("signing"), headers: http.Header{}}
	raw, err := expand(set.String("url"), getenv)
	if err != nil {
		return nil, set.Errorf("url", "%v", err)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, set.Errorf("url", "expected an http:// or https:// URL with a host")
	}
	s.url, s.safeURL = u, safeURL(u)
	for name, v := range set.StringMap("headers") {
		val, err := expand(v, getenv)
		if err != nil {
			return nil, set.Errorf(join("headers", name), "%v", err)
		}
		if strings.ContainsAny(val, "\r\n\x00") {
			return nil, set.Errorf(join("headers", name), "the value contains a line break or NUL")
		}
		s.headers.Set(name, val)
	}
	if set.Has("signing_secret") {
		secret, err := expand(set.String("signing_secret"), getenv)
		if err != nil {
			return nil, set.Errorf("signing_secret", "%v", err)
		}
		if secret == "" {
			return nil, set.Errorf("signing_secret", "the value is empty after expansion")
		}
		s.secret = []byte(secret)
	}
	var secrets []string
	if s.secret != nil {
		secrets = append(secrets, string(s.secret))
	}
	for i, name := range set.Strings("signing_secret_env") {
		key := fmt.Sprintf("signing_secret_env[%d]", i)
		if !validEnvName(name) {
			return nil, set.Errorf(key, "%q is not a variable name (letters, digits and _)", name)
		}
		v, ok := getenv(name)
		if !ok || v == "" {
			return nil, set.Errorf(key, "environment variable %s is not set or empty", name)
		}
		secrets = append(secrets, v)
	}
	if s.secret == nil && len(secrets) > 0 {
		s.secret = []byte(secrets[0])
	}
	if s.signing == SigningStandard {
		if len(secrets) == 0 {
			return nil, set.Errorf("signing", "standard-webhooks signing needs signing_secret or signing_secret_env")
		}
		for _, sec := range secrets {
			key, err := webhooksig.ParseSecret(sec)
			if err != nil {
				return nil, set.Errorf("signing_secret", "%v", err)
			}
			s.standardKeys = append(s.standardKeys, key)
		}
	}
	return s, nil
}

// join is the key path of a header: headers.Accept, headers."X Y".
func join(table, key string) string {
	if validHeaderName(key) && !strings.Contains(key, ".") {
		return table + "." + key
	}
	return table + "." + strconv.Quote(key)
}

func positive(v any) error {
	if v.(time.Duration) <= 0 {
		return errors.New("expected a duration above zero, such as \"30s\"")
	}
	return nil
}

func atLeastOne(v any) error {
	if v.(float64) < 1 {
		return errors.New("expected a number of at least 1")
	}
	return nil
}

func headerName(v any) error {
	if !validHeaderName(v.(string)) {
		return fmt.Errorf("%q is not a valid header name", v)
	}
	return nil
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
