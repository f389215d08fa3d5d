package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/webhooksig"
)

// Verification schemes of an endpoint (verify).
const (
	VerifyStandard = "standard-webhooks"
	VerifyGitHub   = "github"
	VerifyStripe   = "stripe"
	VerifyHMAC     = "hmac"
	VerifyBearer   = "bearer"
	VerifyBasic    = "basic"
	VerifyNone     = "none"
)

// Body formats of an endpoint (format).
const (
	FormatJSON = "json"
	FormatForm = "form"
	FormatRaw  = "raw"
)

// DefaultAddress is where the listener binds when address is not set:
// loopback, so a copied snippet exposes nothing.
const DefaultAddress = "127.0.0.1:8088"

// maxIggyPayload is Iggy's largest message payload.
const maxIggyPayload = 64_000_000

func endpointFields() []connector.Field {
	return []connector.Field{
		connector.NewStringField("path").WithExample("/github").WithCheck(checkPath).
			WithDoc("the request path this endpoint answers, such as /github (or endpoint_id)"),
		connector.NewStringField("endpoint_id").WithCheck(checkEndpointID).
			WithDoc("upstream: 32 lowercase hex digits; the endpoint answers POST /e/<endpoint_id>"),
		connector.NewStringField("topic").WithDoc("the topic of the [[streams]] stream its messages go to (default: the [[streams]] topic)"),
		connector.NewStringField("stream").WithDoc("not supported: messages go to the connector's [[streams]] stream (set it there)"),
		connector.NewEnumField("method", http.MethodPost, http.MethodPut, http.MethodPatch).WithDefault(http.MethodPost).
			WithDoc("the method the endpoint accepts; others answer 405"),
		connector.NewEnumField("verify", VerifyStandard, VerifyGitHub, VerifyStripe, VerifyHMAC, VerifyBearer, VerifyBasic, VerifyNone).
			WithDoc("how a request proves it is from the provider (default none, or what auth_type says)"),
		connector.NewEnumField("auth_type", "none", "bearer", "hmac-sha256", "hmac-sha1").
			WithDoc("upstream: none, bearer, hmac-sha256 or hmac-sha1 (hex HMAC of the body in hmac_header after hmac_prefix)"),
		connector.NewStringField("secret").AsSecret().WithExample("${GH_SECRET}").
			WithDoc("the secret; ${NAME} is the environment variable NAME (basic: user:password; standard-webhooks: whsec_...)"),
		connector.NewStringListField("secret_env").WithExample([]string{"GH_SECRET", "GH_SECRET_OLD"}).
			WithDoc("environment variables holding secrets, any of which verifies (rotation)"),
		connector.NewStringField("auth_secret").AsSecret().WithDoc("upstream: the secret (as secret)"),
		connector.NewStringField("header").WithCheck(headerName).WithDoc("hmac: the signature's header (default X-Signature)"),
		connector.NewStringField("hmac_header").WithCheck(headerName).WithDoc("upstream: hmac: the signature's header (default X-Hub-Signature-256)"),
		connector.NewEnumField("algorithm", webhooksig.SHA1, webhooksig.SHA256, webhooksig.SHA512).WithDoc("hmac: the hash (default sha256)"),
		connector.NewEnumField("encoding", webhooksig.Hex, webhooksig.Base64).WithDoc("hmac: the signature's encoding (default hex)"),
		connector.NewStringField("prefix").WithDoc("hmac: text before the encoded signature, such as sha256= (default none)"),
		connector.NewStringField("hmac_prefix").WithDoc("upstream: as prefix (default sha256=)"),
		connector.NewDurationField("tolerance").WithDefault(webhooksig.DefaultTolerance).WithCheck(positive).
			WithDoc("standard-webhooks and stripe: the largest difference between the signed timestamp and now"),
		connector.NewStringField("id_header").WithCheck(headerName).
			WithDoc("the header carrying the provider's delivery id, to deduplicate by (default: webhook-id, X-GitHub-Delivery, Stripe's event id; none for the others)"),
		connector.NewEnumField("format", FormatJSON, FormatForm, FormatRaw).
			WithDoc("json: the body must be JSON; form: a urlencoded form, sent as a JSON object; raw: the bytes as they are (default json; raw for upstream's endpoint_id)"),
		connector.NewIntField("expires_at").AtLeast(0).WithDoc("upstream: unix seconds after which the endpoint answers 404"),
	}
}

// Spec is the webhook source's plugin_config (see the package doc). Keys
// whose doc starts with "upstream" are upstream's http source's
// (libiggy_connector_http_source).
var Spec = connector.NewSpec(
	connector.NewStringField("address").WithExample("0.0.0.0:8088").
		WithDoc("the listener's host:port, its own (not the management API's); default "+DefaultAddress),
	connector.NewStringField("listen_addr").WithDoc("upstream: as address"),
	connector.NewStringField("tls_cert_file").WithDoc("serve HTTPS with this PEM certificate (chain) file"),
	connector.NewStringField("tls_key_file").WithDoc("the PEM key of tls_cert_file"),
	connector.NewStringField("public_url").WithExample("https://hooks.example.com").
		WithDoc("the URL providers reach the listener at, for ferry webhook's output only"),
	connector.NewSizeField("max_body_size").AtLeast(1).WithDefault(int64(1<<20)).
		WithDoc("largest request body; larger ones answer 413 unread"),
	connector.NewIntField("max_body_size_bytes").Between(1, maxIggyPayload).WithDoc("upstream: as max_body_size"),
	connector.NewIntField("max_pending").Between(1, 1_000_000).WithDefault(1000).
		WithDoc("requests waiting to be stored at once; more answer 429 with Retry-After"),
	connector.NewIntField("buffer_capacity").Between(1, 1_000_000).WithDoc("upstream: as max_pending"),
	connector.NewIntField("max_batch_size").Between(1, 100_000).WithDefault(500).WithDoc("messages a poll hands the runtime at most"),
	connector.NewDurationField("wait_timeout").WithDefault(10*time.Second).WithCheck(positive).
		WithDoc("how long a request waits for its message to be stored before answering 503 (the provider retries; the retry is deduplicated)"),
	connector.NewDurationField("retry_after").WithDefault(time.Second).WithCheck(positive).
		WithDoc("the Retry-After of 429 and 503 answers (whole seconds, at least 1)"),
	connector.NewDurationField("dedup_window").WithDefault(72*time.Hour).WithCheck(positive).
		WithDoc("how long a delivery id is remembered: a delivery seen again within it answers 2xx and sends nothing"),
	connector.NewIntField("dedup_max_entries").Between(1, 1_000_000).WithDefault(10_000).
		WithDoc("delivery ids remembered at most (the oldest go first); the source's state holds them, 24 bytes each"),
	connector.NewStringListField("forward_headers").WithExample([]string{"X-GitHub-Event", "X-GitHub-Delivery"}).
		WithDoc("request headers copied into Iggy headers, under their names as written here (values cut to 255 bytes)"),
	connector.NewBoolField("include_http_metadata").WithDefault(true).
		WithDoc("add the headers iggy_source_instance, iggy_http_remote_addr, iggy_http_received_at, webhook_endpoint and webhook_delivery_id"),
	connector.NewStringField("instance_name").WithDoc("upstream: the iggy_source_instance header's value (default: the connector key)"),
	connector.NewStringField("topic_path").WithDoc("upstream: also answer POST /topics/<topic_path>, guarded by auth_bearer_token"),
	connector.NewStringField("auth_bearer_token").AsSecret().WithDoc("upstream: the bearer token of topic_path; may use ${NAME}"),
	connector.NewStringField("admin_listen_addr").WithDoc("upstream: accepted and unused (Ferry has no second listener)"),
	connector.NewStringField("management_token").AsSecret().WithDoc("upstream: accepted and unused (no endpoint management API)"),
	connector.NewIntField("max_consecutive_nacks").AtLeast(1).WithDoc("upstream: accepted and unused (Ferry retries a batch until it is stored)"),
	connector.NewListField("endpoints", connector.NewObjectField("", endpointFields()...)).
		WithDoc("the endpoints: path (or endpoint_id), verification, secrets, format"),
)

// settings is what the source runs with, checked and with secrets
// resolved.
type settings struct {
	address           string
	certFile, keyFile string
	maxBody           int64
	maxPending        int
	maxBatch          int
	waitTimeout       time.Duration
	retryAfter        string // seconds, for the header
	window            time.Duration
	maxEntries        int
	forward           []string
	metadata          bool
	instance          string
	endpoints         map[string]*endpoint // by path
}

// endpoint is one path the listener answers.
type endpoint struct {
	path      string
	method    string
	route     string // Message.Route: the topic, "" for the stream's
	verify    string
	secrets   [][]byte
	hmac      webhooksig.HMAC
	header    string // hmac: the signature's header
	tolerance time.Duration
	idHeader  string
	format    string
	expiresAt time.Time // zero: never
}

// settle checks the settings and resolves secrets with getenv.
func settle(key string, set *connector.Settings, getenv func(string) (string, bool)) (*settings, error) {
	s := &settings{address: DefaultAddress, certFile: set.String("tls_cert_file"), keyFile: set.String("tls_key_file"),
		maxBody: set.Size("max_body_size"), maxPending: set.Int("max_pending"), maxBatch: set.Int("max_batch_size"),
		waitTimeout: set.Duration("wait_timeout"), window: set.Duration("dedup_window"), maxEntries: set.Int("dedup_max_entries"),
		forward: set.Strings("forward_headers"), metadata: set.Bool("include_http_metadata"), instance: key,
		endpoints: map[string]*endpoint{}}
	s.retryAfter = retryAfterSeconds(set.Duration("retry_after"))
	var err error
	if s.address, err = either(set, "address", "listen_addr", DefaultAddress); err != nil {
		return nil, err
	}
	if _, _, err := net.SplitHostPort(s.address); err != nil {
		return nil, set.Errorf(pick(set, "address", "listen_addr"), "%q is not host:port: %v", s.address, err)
	}
	if set.Has("max_body_size_bytes") {
		if set.Has("max_body_size") {
			return nil, set.Errorf("max_body_size_bytes", "set max_body_size or upstream's max_body_size_bytes, not both")
		}
		s.maxBody = int64(set.Int("max_body_size_bytes"))
	}
	if s.maxBody > maxIggyPayload {
		return nil, set.Errorf("max_body_size", "%d bytes is above Iggy's largest payload (%d)", s.maxBody, maxIggyPayload)
	}
	if set.Has("buffer_capacity") {
		if set.Has("max_pending") {
			return nil, set.Errorf("buffer_capacity", "set max_pending or upstream's buffer_capacity, not both")
		}
		s.maxPending = set.Int("buffer_capacity")
	}
	if (s.certFile == "") != (s.keyFile == "") {
		return nil, set.Errorf("tls_cert_file", "tls_cert_file and tls_key_file go together; one is missing")
	}
	for _, f := range []string{"tls_cert_file", "tls_key_file"} {
		if p := set.String(f); p != "" {
			if _, err := os.Stat(p); err != nil {
				return nil, set.Errorf(f, "%v", err)
			}
		}
	}
	if set.String("instance_name") != "" {
		s.instance = set.String("instance_name")
	}
	for i, h := range s.forward {
		if !validHeaderName(h) {
			return nil, set.Errorf(fmt.Sprintf("forward_headers[%d]", i), "%q is not a header name", h)
		}
		switch http.CanonicalHeaderKey(h) {
		case "Authorization", "Proxy-Authorization", "Cookie":
			return nil, set.Errorf(fmt.Sprintf("forward_headers[%d]", i), "%s carries a credential; it is never copied into messages", h)
		}
	}
	if tp := set.String("topic_path"); tp != "" {
		if strings.ContainsAny(tp, "/?#") {
			return nil, set.Errorf("topic_path", "%q: a single path segment without / ? #", tp)
		}
		ep := &endpoint{path: "/topics/" + tp, method: http.MethodPost, verify: VerifyNone, format: FormatRaw, tolerance: webhooksig.DefaultTolerance}
		if set.Has("auth_bearer_token") {
			tok, err := expand(set.String("auth_bearer_token"), getenv)
			if err != nil {
				return nil, set.Errorf("auth_bearer_token", "%v", err)
			}
			ep.verify, ep.secrets = VerifyBearer, [][]byte{[]byte(tok)}
		}
		s.endpoints[ep.path] = ep
	}
	for i, es := range set.Objects("endpoints") {
		ep, err := settleEndpoint(es, getenv)
		if err != nil {
			return nil, err
		}
		if ep.tolerance > s.window && (ep.verify == VerifyStandard || ep.verify == VerifyStripe) {
			return nil, set.Errorf(fmt.Sprintf("endpoints[%d].tolerance", i), "%s is longer than dedup_window (%s): a replay inside the tolerance could be stored twice", ep.tolerance, s.window)
		}
		if s.endpoints[ep.path] != nil {
			return nil, set.Errorf(fmt.Sprintf("endpoints[%d]", i), "path %s is used twice", ep.path)
		}
		s.endpoints[ep.path] = ep
	}
	if len(s.endpoints) == 0 {
		return nil, set.Errorf("endpoints", "no endpoint: add [[plugin_config.endpoints]] with a path (or upstream's topic_path)")
	}
	return s, nil
}

func settleEndpoint(es *connector.Settings, getenv func(string) (string, bool)) (*endpoint, error) {
	ep := &endpoint{method: es.String("method"), route: es.String("topic"), tolerance: es.Duration("tolerance"),
		idHeader: es.String("id_header"), format: FormatJSON}
	switch {
	case es.Has("path") && es.Has("endpoint_id"):
		return nil, es.Errorf("path", "set path or upstream's endpoint_id, not both")
	case es.Has("path"):
		ep.path = es.String("path")
	case es.Has("endpoint_id"):
		ep.path, ep.format = "/e/"+es.String("endpoint_id"), FormatRaw
	default:
		return nil, es.Errorf("path", "an endpoint needs a path, such as \"/github\"")
	}
	if es.Has("stream") {
		return nil, es.Errorf("stream", "an endpoint's messages go to the connector's [[streams]] stream; set the stream there and the endpoint's topic here")
	}
	if es.Has("format") {
		ep.format = es.String("format")
	}
	if es.Has("expires_at") {
		ep.expiresAt = time.Unix(int64(es.Int("expires_at")), 0)
	}
	ep.verify = VerifyNone
	switch {
	case es.Has("verify") && es.Has("auth_type"):
		return nil, es.Errorf("verify", "set verify or upstream's auth_type, not both")
	case es.Has("verify"):
		ep.verify = es.String("verify")
	case es.Has("auth_type"):
		switch es.String("auth_type") {
		case "bearer":
			ep.verify = VerifyBearer
		case "hmac-sha256", "hmac-sha1":
			ep.verify = VerifyHMAC
			ep.hmac = webhooksig.HMAC{Algorithm: strings.TrimPrefix(es.String("auth_type"), "hmac-"), Encoding: webhooksig.Hex, Prefix: "sha256="}
			ep.header = webhooksig.GitHubHeader
		}
	}
	if ep.verify == VerifyHMAC {
		if ep.hmac.Algorithm == "" {
			ep.hmac = webhooksig.HMAC{Algorithm: webhooksig.SHA256, Encoding: webhooksig.Hex}
			ep.header = "X-Signature"
		}
		for _, k := range [][2]string{{"header", "hmac_header"}, {"prefix", "hmac_prefix"}} {
			if es.Has(k[0]) && es.Has(k[1]) {
				return nil, es.Errorf(k[0], "set %s or upstream's %s, not both", k[0], k[1])
			}
		}
		if h := es.String("header") + es.String("hmac_header"); h != "" {
			ep.header = h
		}
		if es.Has("prefix") || es.Has("hmac_prefix") {
			ep.hmac.Prefix = es.String("prefix") + es.String("hmac_prefix")
		}
		if es.Has("algorithm") {
			ep.hmac.Algorithm = es.String("algorithm")
		}
		if es.Has("encoding") {
			ep.hmac.Encoding = es.String("encoding")
		}
	} else {
		for _, k := range []string{"header", "hmac_header", "algorithm", "encoding", "prefix", "hmac_prefix"} {
			if es.Has(k) {
				return nil, es.Errorf(k, "is for verify = \"hmac\"; this endpoint verifies with %s", ep.verify)
			}
		}
	}
	raw, err := secrets(es, getenv)
	if err != nil {
		return nil, err
	}
	switch {
	case ep.verify == VerifyNone && len(raw) > 0:
		return nil, es.Errorf("secret", "verify = \"none\" takes no secret; say how to verify with verify")
	case ep.verify != VerifyNone && len(raw) == 0:
		return nil, es.Errorf("secret", "verify = %q needs a secret: secret = \"${NAME}\" or secret_env = [\"NAME\"]", ep.verify)
	}
	for _, r := range raw {
		b := []byte(r)
		switch ep.verify {
		case VerifyStandard:
			if b, err = webhooksig.ParseSecret(r); err != nil {
				return nil, es.Errorf("secret", "%v", err)
			}
		case VerifyBasic:
			if !strings.Contains(r, ":") {
				return nil, es.Errorf("secret", "verify = \"basic\" takes user:password; the value has no ':'")
			}
		}
		ep.secrets = append(ep.secrets, b)
	}
	return ep, nil
}

// secrets are the endpoint's secrets: secret (or auth_secret) expanded,
// then each secret_env variable's value.
func secrets(es *connector.Settings, getenv func(string) (string, bool)) ([]string, error) {
	var out []string
	if es.Has("secret") && es.Has("auth_secret") {
		return nil, es.Errorf("secret", "set secret or upstream's auth_secret, not both")
	}
	for _, k := range []string{"secret", "auth_secret"} {
		if !es.Has(k) {
			continue
		}
		v, err := expand(es.String(k), getenv)
		if err != nil {
			return nil, es.Errorf(k, "%v", err)
		}
		if v == "" {
			return nil, es.Errorf(k, "the value is empty after expansion")
		}
		out = append(out, v)
	}
	for i, name := range es.Strings("secret_env") {
		key := fmt.Sprintf("secret_env[%d]", i)
		if !validEnvName(name) {
			return nil, es.Errorf(key, "%q is not a variable name (letters, digits and _)", name)
		}
		v, ok := getenv(name)
		if !ok {
			return nil, es.Errorf(key, "environment variable %s is not set in the runtime's environment (set it where ferry run starts)", name)
		}
		if v == "" {
			return nil, es.Errorf(key, "environment variable %s is empty", name)
		}
		out = append(out, v)
	}
	return out, nil
}

// either is the value of a Ferry key or its upstream spelling, not both.
func either(set *connector.Settings, ours, theirs, def string) (string, error) {
	switch {
	case set.Has(ours) && set.Has(theirs):
		return "", set.Errorf(theirs, "set %s or upstream's %s, not both", ours, theirs)
	case set.Has(ours):
		return set.String(ours), nil
	case set.Has(theirs):
		return set.String(theirs), nil
	}
	return def, nil
}

func pick(set *connector.Settings, ours, theirs string) string {
	if set.Has(theirs) {
		return theirs
	}
	return ours
}

func checkPath(v any) error {
	p := v.(string)
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \t\r\n") {
		return errors.New("expected a path starting with /, without ?, # or spaces, such as \"/github\"")
	}
	return nil
}

func checkEndpointID(v any) error {
	id := v.(string)
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return errors.New("expected 32 lowercase hex digits (openssl rand -hex 16)")
	}
	return nil
}

func positive(v any) error {
	if v.(time.Duration) <= 0 {
		return errors.New("expected a duration above zero, such as \"10s\"")
	}
	return nil
}

func headerName(v any) error {
	if !validHeaderName(v.(string)) {
		return fmt.Errorf("%q is not a header name", v)
	}
	return nil
}

func validHeaderName(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}
