package state

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ferryhq/ferry/internal/backoff"
)

// httpResult is one answer from the state service, body already read.
type httpResult struct {
	method   string
	where    string // redacted URL
	status   int
	header   http.Header
	body     []byte // the state for a 200 GET, else at most errorBodyLimit bytes
	tooLarge bool   // a 200 GET body over MaxStateSize
}

const (
	errorBodyLimit = 4 << 10 // bytes of a non-state answer read for the error excerpt
	excerptLen     = 200     // bytes of the body quoted in an HTTPStatusError
)

// HTTPStatusError is an answer from the state service that the store does
// not expect, e.g. 400 or 403, or the last of a run of 5xx answers.
type HTTPStatusError struct {
	Method     string
	URL        string // without user info and query
	StatusCode int
	Excerpt    string // start of the body, secrets redacted
}

func (e *HTTPStatusError) Error() string {
	msg := fmt.Sprintf("state service answered %s %s with %d %s", e.Method, e.URL, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Excerpt != "" {
		msg += fmt.Sprintf(": %q", e.Excerpt)
	}
	return msg
}

// call sends one request, retrying as the store's policy says, and returns
// the first answer that is not retryable. Errors are transport errors,
// context errors, or the last retryable answer once attempts run out.
func (s *HTTPStore) call(ctx context.Context, method, key string, body []byte, h http.Header) (*httpResult, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if s.closeCtx.Err() != nil {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u, err := s.keyURL(key)
	if err != nil {
		return nil, fmt.Errorf("build URL: %w", stripURLError(err))
	}
	where := redactURL(u)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.closeCtx, cancel)
	defer stop()

	retry := s.schedule()
	for attempt := 1; ; attempt++ {
		res, err := s.attempt(ctx, method, u, where, body, h)
		var wait time.Duration
		haveWait := false
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, s.abortError(ctx, method, where, err)
		case err != nil:
			if !retryableTransport(err) {
				return nil, fmt.Errorf("%s %s: %w", method, where, err)
			}
		case retryableStatus(res.status):
			err = s.statusError(res)
			wait, haveWait = parseRetryAfter(res.header.Get("Retry-After"), time.Now())
		default:
			return res, nil
		}
		if attempt >= s.cfg.retry.MaxAttempts {
			return nil, fmt.Errorf("%s %s: giving up after %d attempts: %w", method, where, attempt, err)
		}
		if next := retry.Next(); haveWait {
			wait = min(wait, s.cfg.retry.MaxRetryAfter)
		} else {
			wait = next
		}
		if serr := s.sleep(ctx, wait); serr != nil {
			return nil, s.abortError(ctx, method, where, err)
		}
	}
}

// abortError explains why call stopped early: Close or the caller's ctx.
func (s *HTTPStore) abortError(ctx context.Context, method, where string, last error) error {
	if s.closeCtx.Err() != nil {
		return fmt.Errorf("%s %s: %w", method, where, ErrClosed)
	}
	if last != nil && !errors.Is(last, ctx.Err()) {
		return fmt.Errorf("%s %s: %w (last error: %v)", method, where, ctx.Err(), last)
	}
	return fmt.Errorf("%s %s: %w", method, where, ctx.Err())
}

// attempt sends the request once, bounded by the per-attempt timeout.
func (s *HTTPStore) attempt(ctx context.Context, method string, u *url.URL, where string, body []byte, h http.Header) (*httpResult, error) {
	actx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	for k, vs := range s.cfg.header {
		req.Header[k] = vs
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	timedOut := func(err error) error {
		if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("attempt timed out after %v: %w", s.cfg.timeout, err)
		}
		return err
	}
	resp, err := s.cfg.client.Do(req)
	if err != nil {
		return nil, timedOut(stripURLError(err))
	}
	defer resp.Body.Close()

	res := &httpResult{method: method, where: where, status: resp.StatusCode, header: resp.Header}
	isState := method == http.MethodGet && resp.StatusCode == http.StatusOK
	limit := int64(errorBodyLimit)
	if isState {
		limit = MaxStateSize + 1
	}
	res.body, err = io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil && isState {
		return nil, timedOut(fmt.Errorf("read body: %w", stripURLError(err)))
	}
	// Elsewhere a body read error only shortens the excerpt: the status
	// and headers, which decide the outcome, have arrived.
	if isState && len(res.body) > MaxStateSize {
		res.body, res.tooLarge = nil, true
	}
	return res, nil
}

func (s *HTTPStore) statusError(res *httpResult) *HTTPStatusError {
	return &HTTPStatusError{
		Method:     res.method,
		URL:        res.where,
		StatusCode: res.status,
		Excerpt:    s.excerpt(res.body),
	}
}

// excerpt returns the start of an error body as one printable line, with
// configured secrets replaced (before cutting, so no secret is half-shown).
func (s *HTTPStore) excerpt(b []byte) string {
	t := strings.ToValidUTF8(string(b), "\uFFFD")
	for _, secret := range s.secrets {
		t = strings.ReplaceAll(t, secret, "[redacted]")
	}
	t = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, t)
	t = strings.TrimSpace(t)
	if len(t) > excerptLen {
		cut := excerptLen
		for cut > 0 && !utf8RuneStart(t[cut]) {
			cut--
		}
		t = t[:cut] + "…"
	}
	return t
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// schedule is the schedule of one call's waits: InitialBackoff doubled per
// failed attempt, capped at MaxBackoff, each drawn from [d/2, d]. A
// Retry-After answer replaces its wait but the schedule moves on.
func (s *HTTPStore) schedule() backoff.Backoff {
	return backoff.Backoff{Min: s.cfg.retry.InitialBackoff, Max: s.cfg.retry.MaxBackoff, Jitter: 0.5}
}

// retryableStatus: the request may succeed if sent again.
func retryableStatus(code int) bool {
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests:
		return true
	case code == http.StatusNotImplemented, code == http.StatusHTTPVersionNotSupported:
		return false
	default:
		return code >= 500 && code <= 599
	}
}

// retryableTransport: connection errors and timeouts are retried, a TLS
// certificate the client rejects is not.
func retryableTransport(err error) bool {
	var cve *tls.CertificateVerificationError
	return !errors.As(err, &cve)
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// stripURLError drops *url.Error's wrapper, whose message repeats the URL
// with its query.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL shows scheme, host and path only.
func redactURL(u *url.URL) string {
	if u == nil {
		return "<bad URL>"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}
