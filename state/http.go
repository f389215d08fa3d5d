package state

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/internal/backoff"
)

// ErrNoETag is wrapped when the state service answers a GET or PUT without
// an ETag header: without one, conditional saves are impossible. After a PUT
// the write may have happened; fix the service.
var ErrNoETag = errors.New("state service sent no ETag")

// HTTPStore keeps state in an HTTP service. The protocol:
//
//   - Load: GET <url>. 200 returns the body and its ETag as the Version;
//     404 means ErrNotFound.
//   - Save: PUT <url> with the data as the body (Content-Type
//     application/octet-stream unless a header option sets another) and
//     "If-Match: <version>", or "If-None-Match: *" when expected is zero.
//     It carries an Idempotency-Key header, random per Save call and the
//     same on every retry of that call. 200, 201 and 204 succeed and must
//     carry the new ETag; if none is sent Save returns an error wrapping
//     ErrNoETag (a follow-up GET could return another writer's ETag and
//     hide a lost update, so Save does not guess). 412 means ErrConflict.
//   - Delete: DELETE <url> with an Idempotency-Key. 200, 202 and 204
//     succeed; 404 means ErrNotFound.
//
// Requests that fail with a connection error, a per-attempt timeout, 408,
// 429 or a 5xx status are retried with capped exponential backoff and
// jitter, or after the server's Retry-After when it sends one. Other
// statuses are returned at once as an *HTTPStatusError. 412 is never
// retried.
//
// A retried PUT whose first attempt did reach the server is only safe if
// the service honours Idempotency-Key (replays the first answer for a key
// it has seen). A service that does not will answer the retry with 412, and
// Save reports a conflict although its own write was applied; the caller
// then loads the state and sees its data. Likewise a retried DELETE may then
// report ErrNotFound.
//
// Versions are the ETags exactly as the service sends them. If-Match uses
// strong comparison, so the service must send strong ETags (not W/"...").
//
// Secrets stay out of errors: errors show the URL without user info and
// query, never show request headers, and quote at most 200 bytes of an
// error answer in which every configured header value, each word of it,
// and the URL's password (those of 4 bytes or more) are replaced by
// "[redacted]", in case the service echoes credentials. The store does not log.
type HTTPStore struct {
	cfg       httpConfig
	tmpl      string // URL template containing exactly one "{key}"
	keyInPath bool   // "{key}" is before the query: path-escape, else query-escape
	secrets   []string

	sleep func(context.Context, time.Duration) error // replaced in tests

	closeCtx  context.Context // cancelled by Close: aborts calls in flight
	closeFn   context.CancelFunc
	closeOnce sync.Once
}

var _ Store = (*HTTPStore)(nil)

// Retry is the HTTPStore's retry policy. Zero fields take the defaults.
type Retry struct {
	// MaxAttempts is the number of attempts per call, the first included;
	// 1 disables retries. Default 5.
	MaxAttempts int
	// InitialBackoff is the wait before the second attempt; each later wait
	// doubles, up to MaxBackoff. A wait is drawn at random from
	// [d/2, d]. Default 100ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the backoff. Default 5s.
	MaxBackoff time.Duration
	// MaxRetryAfter caps a server's Retry-After; longer requests are
	// shortened to it. Default 30s.
	MaxRetryAfter time.Duration
}

// HTTPOption configures an HTTPStore.
type HTTPOption interface{ apply(*httpConfig) error }

type httpOptionFunc func(*httpConfig) error

func (f httpOptionFunc) apply(c *httpConfig) error { return f(c) }

type httpConfig struct {
	header    http.Header
	timeout   time.Duration
	retry     Retry
	client    *http.Client
	ownClient bool
}

func defaultHTTPConfig() httpConfig {
	return httpConfig{
		header:  http.Header{},
		timeout: 10 * time.Second,
		retry: Retry{
			MaxAttempts:    5,
			InitialBackoff: 100 * time.Millisecond,
			MaxBackoff:     5 * time.Second,
			MaxRetryAfter:  30 * time.Second,
		},
	}
}

// reservedHeaders are set by the store itself.
var reservedHeaders = []string{"If-Match", "If-None-Match", "Idempotency-Key", "Content-Length", "Host"}

// WithHeader adds a header sent with every request, e.g. Authorization.
// Its value is treated as a secret: it never appears in errors. The
// protocol headers (If-Match, If-None-Match, Idempotency-Key,
// Content-Length, Host) cannot be set. Default: no extra headers.
func WithHeader(name, value string) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		if name == "" || strings.ContainsFunc(name, func(r rune) bool {
			return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
		}) {
			return fmt.Errorf("header name %q is not a valid HTTP token", name)
		}
		for _, h := range reservedHeaders {
			if strings.EqualFold(name, h) {
				return fmt.Errorf("header %s is set by the state store and cannot be configured", h)
			}
		}
		if strings.ContainsFunc(value, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }) {
			return fmt.Errorf("header %s: value contains a control character", name) // value not shown: secret
		}
		c.header.Add(name, value)
		return nil
	})
}

// WithTimeout bounds each attempt (connect, send, read the answer); a
// timed-out attempt is retried. Default 10s.
func WithTimeout(d time.Duration) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		if d <= 0 {
			return fmt.Errorf("timeout %v: must be positive", d)
		}
		c.timeout = d
		return nil
	})
}

// WithRetry sets the retry policy; zero fields keep their defaults (see
// Retry).
func WithRetry(r Retry) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		if r.MaxAttempts < 0 || r.InitialBackoff < 0 || r.MaxBackoff < 0 || r.MaxRetryAfter < 0 {
			return fmt.Errorf("retry policy %+v: negative values are not allowed", r)
		}
		if r.MaxAttempts > 0 {
			c.retry.MaxAttempts = r.MaxAttempts
		}
		if r.InitialBackoff > 0 {
			c.retry.InitialBackoff = r.InitialBackoff
		}
		if r.MaxBackoff > 0 {
			c.retry.MaxBackoff = r.MaxBackoff
		}
		if r.MaxRetryAfter > 0 {
			c.retry.MaxRetryAfter = r.MaxRetryAfter
		}
		return nil
	})
}

// WithHTTPClient sets the client used for requests (TLS settings, proxies).
// Close does not close a client given here. Default: a client of the store's
// own, with a clone of http.DefaultTransport.
func WithHTTPClient(client *http.Client) HTTPOption {
	return httpOptionFunc(func(c *httpConfig) error {
		if client == nil {
			return errors.New("nil HTTP client")
		}
		c.client = client
		return nil
	})
}

// NewHTTP returns a store for the service at rawURL: either a base URL, with
// state for key at <base>/<key>, or a template containing "{key}" once,
// e.g. "https://svc/state/{key}?ns=ferry". Keys are escaped for the part of
// the URL they land in. Options configure headers, timeout, retries and the
// client.
func NewHTTP(rawURL string, opts ...HTTPOption) (*HTTPStore, error) {
	cfg := defaultHTTPConfig()
	for _, o := range opts {
		if err := o.apply(&cfg); err != nil {
			return nil, fmt.Errorf("state: http store: %w", err)
		}
	}
	if cfg.retry.MaxBackoff < cfg.retry.InitialBackoff {
		cfg.retry.MaxBackoff = cfg.retry.InitialBackoff
	}
	tmpl := rawURL
	switch n := strings.Count(rawURL, "{key}"); n {
	case 0:
		tmpl = strings.TrimRight(rawURL, "/") + "/{key}"
		if strings.ContainsAny(rawURL, "?#") {
			return nil, errors.New(`state: http store: a base URL with a query or fragment needs "{key}" to say where the key goes`)
		}
	case 1:
	default:
		return nil, fmt.Errorf(`state: http store: URL template has "{key}" %d times, want once`, n)
	}
	u, err := url.Parse(strings.Replace(tmpl, "{key}", "k", 1))
	if err != nil {
		return nil, fmt.Errorf("state: http store: bad URL: %w", stripURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("state: http store: URL scheme %q, want http or https", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("state: http store: URL has no host")
	}
	if u.Fragment != "" {
		return nil, errors.New("state: http store: URL must not have a fragment")
	}
	if cfg.client == nil {
		cfg.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		cfg.ownClient = true
	}
	s := &HTTPStore{
		cfg:       cfg,
		tmpl:      tmpl,
		keyInPath: !strings.Contains(tmpl[:strings.Index(tmpl, "{key}")], "?"),
		sleep:     backoff.Sleep,
	}
	for _, vs := range cfg.header {
		for _, v := range vs {
			// The whole value and its words ("Bearer <token>": the token
			// alone may be echoed).
			s.secrets = append(s.secrets, v)
			s.secrets = append(s.secrets, strings.Fields(v)...)
		}
	}
	if p, ok := u.User.Password(); ok {
		s.secrets = append(s.secrets, p)
	}
	// Shorter values would redact ordinary words; longest first, so a
	// whole value goes before its parts.
	s.secrets = slices.DeleteFunc(s.secrets, func(v string) bool { return len(v) < 4 })
	slices.SortFunc(s.secrets, func(a, b string) int { return len(b) - len(a) })
	s.closeCtx, s.closeFn = context.WithCancel(context.Background())
	return s, nil
}

// Load GETs the state for key.
func (s *HTTPStore) Load(ctx context.Context, key string) (State, error) {
	res, err := s.call(ctx, http.MethodGet, key, nil, nil)
	if err != nil {
		return State{}, fmt.Errorf("state %q: load: %w", key, err)
	}
	switch res.status {
	case http.StatusOK:
		if res.tooLarge {
			return State{}, fmt.Errorf("state %q: load: %w: body over %d bytes", key, ErrTooLarge, MaxStateSize)
		}
		etag := res.header.Get("ETag")
		if etag == "" {
			return State{}, fmt.Errorf("state %q: load: GET %s: %w", key, res.where, ErrNoETag)
		}
		return State{Data: res.body, Version: Version(etag)}, nil
	case http.StatusNotFound:
		return State{}, fmt.Errorf("state %q: %w", key, ErrNotFound)
	default:
		return State{}, fmt.Errorf("state %q: load: %w", key, s.statusError(res))
	}
}

// Save PUTs data for key conditionally on expected.
func (s *HTTPStore) Save(ctx context.Context, key string, data []byte, expected Version) (Version, error) {
	if len(data) > MaxStateSize {
		return "", fmt.Errorf("state %q: save: %w: %d bytes, the limit is %d", key, ErrTooLarge, len(data), MaxStateSize)
	}
	h := http.Header{}
	switch {
	case expected.IsZero():
		h.Set("If-None-Match", "*")
	case expected == "*" || strings.ContainsAny(string(expected), "\r\n"):
		return "", fmt.Errorf("state %q: save: expected version %q is not an entity tag", key, expected)
	default:
		h.Set("If-Match", string(expected))
	}
	h.Set("Idempotency-Key", rand.Text())
	if s.cfg.header.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/octet-stream")
	}
	if data == nil {
		data = []byte{} // a body, even if empty: PUT with Content-Length: 0
	}
	res, err := s.call(ctx, http.MethodPut, key, data, h)
	if err != nil {
		return "", fmt.Errorf("state %q: save: %w", key, err)
	}
	switch res.status {
	case http.StatusOK, http.StatusCreated, http.StatusNoContent:
		etag := res.header.Get("ETag")
		if etag == "" {
			return "", fmt.Errorf("state %q: save: PUT %s answered %d: %w (the write may have happened)", key, res.where, res.status, ErrNoETag)
		}
		return Version(etag), nil
	case http.StatusPreconditionFailed:
		return "", &ConflictError{Key: key, Expected: expected}
	default:
		return "", fmt.Errorf("state %q: save: %w", key, s.statusError(res))
	}
}

// Delete sends DELETE for key.
func (s *HTTPStore) Delete(ctx context.Context, key string) error {
	h := http.Header{"Idempotency-Key": {rand.Text()}}
	res, err := s.call(ctx, http.MethodDelete, key, nil, h)
	if err != nil {
		return fmt.Errorf("state %q: delete: %w", key, err)
	}
	switch res.status {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return nil
	case http.StatusNotFound:
		return fmt.Errorf("state %q: delete: %w", key, ErrNotFound)
	default:
		return fmt.Errorf("state %q: delete: %w", key, s.statusError(res))
	}
}

// Close aborts calls in flight, makes later calls fail with ErrClosed and
// closes idle connections of the store's own client. It is idempotent.
func (s *HTTPStore) Close() error {
	s.closeOnce.Do(func() {
		s.closeFn()
		if s.cfg.ownClient {
			s.cfg.client.CloseIdleConnections()
		}
	})
	return nil
}

// URL returns the URL of key's state with user info and query removed, as
// it appears in errors.
func (s *HTTPStore) URL(key string) string { u, _ := s.keyURL(key); return redactURL(u) }

func (s *HTTPStore) keyURL(key string) (*url.URL, error) {
	esc := url.PathEscape(key)
	if !s.keyInPath {
		esc = url.QueryEscape(key)
	}
	return url.Parse(strings.Replace(s.tmpl, "{key}", esc, 1))
}
