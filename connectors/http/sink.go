package httpsink

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/ferryhq/ferry/webhooksig"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "http",
		Aliases: []string{"libiggy_connector_http_sink"},
		Summary: "delivers messages to an HTTP endpoint (per message, NDJSON, JSON array or raw), signed with HMAC-SHA256",
		Spec:    Spec,
		NewSink: New,
	})
}

// Sink is the http sink.
type Sink struct {
	key    string // the connector's key, part of every request id
	set    *settings
	log    *slog.Logger
	client *http.Client

	// sleep waits between retries; now stamps signatures. Tests replace them.
	sleep func(ctx context.Context, d time.Duration) error
	now   func() time.Time

	closeOnce sync.Once
}

// New builds an http sink from its configuration; ${NAME} references
// resolve against the process environment.
func New(cfg connector.Config) (connector.Sink, error) {
	return newSink(cfg, os.LookupEnv)
}

func newSink(cfg connector.Config, getenv func(string) (string, bool)) (*Sink, error) {
	parsed, err := Spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	set, err := settle(parsed, getenv)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = set.maxConns
	if set.insecureTLS {
		log.Warn("tls_danger_accept_invalid_certs is set: TLS certificates are NOT verified")
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for by name
	}
	if set.mode == ModeRaw && parsed.Has("include_metadata") && set.metadata {
		log.Warn("batch_mode = \"raw\" sends payloads as they are; include_metadata is ignored")
	}
	return &Sink{key: cfg.Key, set: set, log: log, now: time.Now, sleep: sleepCtx,
		client: &http.Client{Transport: tr, Timeout: set.timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

// sleepCtx is the sink's sleep outside tests.
func sleepCtx(ctx context.Context, d time.Duration) error { return backoff.Sleep(ctx, d) }

// Open sends the health check when health_check_enabled is set: a
// network failure or a 5xx answer fails Open (the runtime retries it).
func (s *Sink) Open(ctx context.Context) error {
	if !s.set.healthCheck {
		return nil
	}
	status, _, err := s.do(ctx, s.set.healthMethod, nil, "", healthCheckID())
	if err != nil {
		return fmt.Errorf("http sink: health check: %w", err)
	}
	if status >= 500 {
		return fmt.Errorf("http sink: health check: %s %s answered %d", s.set.healthMethod, s.set.safeURL, status)
	}
	return nil
}

// Consume sends the batch as the batch mode says; see the package doc for
// what its errors mean.
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	reqs, failed := s.build(b)
	consecutive := 0
	var last error
	for i, r := range reqs {
		if consecutive >= maxConsecutiveFailures || ctx.Err() != nil {
			// last is Unavailable, and so is cause: the endpoint is down.
			cause := fmt.Errorf("not sent: %d requests in a row failed, last: %w", consecutive, last)
			if ctx.Err() != nil {
				cause = fmt.Errorf("not sent: %w", ctx.Err())
			}
			for _, r := range reqs[i:] {
				for _, m := range r.msgs {
					failed[m] = cause
				}
			}
			break
		}
		err := s.send(ctx, r)
		if err == nil {
			consecutive = 0
			continue
		}
		last = err
		if connector.IsPermanent(err) {
			consecutive = 0
		} else {
			consecutive++
		}
		for _, m := range r.msgs {
			failed[m] = err
		}
	}
	return s.result(len(b.Messages), len(reqs), failed)
}

// result turns per-message failures into Consume's error.
func (s *Sink) result(n, nreqs int, failed map[int]error) error {
	if len(failed) == 0 {
		return nil
	}
	allPermanent := true
	for _, err := range failed {
		allPermanent = allPermanent && connector.IsPermanent(err)
	}
	batchMode := s.set.mode == ModeNDJSON || s.set.mode == ModeJSONArray
	if batchMode && nreqs == 1 && len(failed) == n {
		// One request carried every message: its error is the batch's, and
		// the runtime isolates a poison message by trying each alone.
		for _, err := range failed {
			if allPermanent || !connector.IsPermanent(err) {
				return err
			}
		}
	}
	errs := connector.MessageErrors(failed)
	if allPermanent {
		return connector.Permanent(errs)
	}
	return errs
}

// statusError is an answer outside success_status_codes.
type statusError struct {
	method, url string
	status      int
	body        string
}

func (e *statusError) Error() string {
	msg := fmt.Sprintf("%s %s answered %d %s", e.method, e.url, e.status, http.StatusText(e.status))
	if e.body != "" {
		msg += ": " + e.body
	}
	return msg
}

// transient reports whether a status is worth retrying.
func transient(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500
}

// send delivers one request, retrying transient failures with capped
// exponential backoff (Retry-After replaces the computed wait); every
// attempt carries the request's id. It returns nil, a Permanent error, or
// the last transient error marked Unavailable: the endpoint is down or
// overloaded, which says nothing about the messages.
func (s *Sink) send(ctx context.Context, r request) error {
	retry := backoff.Backoff{Min: min(s.set.retryDelay, s.set.maxRetryDelay), Max: s.set.maxRetryDelay, Factor: s.set.backoff}
	for attempt := uint32(0); ; attempt++ {
		status, ans, err := s.do(ctx, s.set.method, r.body, s.contentType(), r.id)
		if err == nil {
			if slices.Contains(s.set.success, status) {
				return nil
			}
			if !transient(status) {
				return connector.Permanent(s.statusErr(status, ans.body))
			}
			err = s.statusErr(status, ans.body)
		}
		if attempt >= s.set.maxRetries || ctx.Err() != nil {
			if attempt > 0 {
				err = fmt.Errorf("after %d retries: %w", attempt, err)
			}
			return connector.Unavailable(err)
		}
		wait := retry.Next()
		if ans.ok {
			wait = min(ans.d, s.set.maxRetryDelay)
		}
		s.log.Warn("http request failed; retrying", "url", s.set.safeURL, "attempt", attempt+1, "error", err, "in", wait)
		if serr := s.sleep(ctx, wait); serr != nil {
			return connector.Unavailable(fmt.Errorf("%w (retry abandoned: %v)", err, serr))
		}
	}
}

func (s *Sink) statusErr(status int, body string) error {
	return &statusError{method: s.set.method, url: s.set.safeURL, status: status, body: body}
}

// answer is what do keeps of a response besides its status.
type answer struct {
	d    time.Duration // Retry-After
	ok   bool          // Retry-After was present and valid
	body string        // start of the body, one line, for errors
}

// do makes one request attempt, with the request id and, with a
// signing_secret, the timestamp and signature headers. A transport
// failure (including a timeout) is returned as the error, with the URL
// made safe.
func (s *Sink) do(ctx context.Context, method string, body []byte, contentType, id string) (int, answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.set.url.String(), bytes.NewReader(body))
	if err != nil {
		return 0, answer{}, connector.Permanent(fmt.Errorf("build request to %s: %w", s.set.safeURL, err))
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", "ferry-http-sink")
	for k, v := range s.set.headers {
		req.Header[k] = v
	}
	req.Header.Set(s.set.requestIDHeader, id)
	switch {
	case s.set.signing == SigningStandard:
		// webhook-id is the request id: the same on every attempt, as the
		// spec asks, so receivers deduplicate retries by it.
		webhooksig.SetStandardHeaders(req.Header, s.set.standardKeys, id, s.now(), body)
	case s.set.secret != nil:
		ts := strconv.FormatInt(s.now().Unix(), 10)
		req.Header.Set(s.set.timestampHeader, ts)
		req.Header.Set(s.set.signatureHeader, Sign(s.set.secret, Signed{Timestamp: ts, RequestID: id,
			Method: method, Path: signedPath(s.set.url.EscapedPath()), Body: body}))
	}
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, answer{}, fmt.Errorf("%s %s: %w", method, s.set.safeURL, transportCause(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // keep the connection reusable
	if s.set.verbose {
		s.log.Debug("http request", "method", method, "url", s.set.safeURL, "bytes", len(body),
			"status", resp.StatusCode, "took", time.Since(start))
	}
	a := answer{body: oneLine(snippet)}
	a.d, a.ok = retryAfter(resp.Header.Get("Retry-After"), s.now())
	return resp.StatusCode, a, nil
}

// healthCheckID is a random request id for a health check, which
// carries no messages.
func healthCheckID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "health-" + hex.EncodeToString(b[:])
}

// transportCause strips the *url.Error wrapper, whose text has the full
// URL (with any secret in its query).
func transportCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

func oneLine(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(string(b), "?"))
	return strings.TrimSpace(s)
}

// ConsumesOutOfOrder marks the sink as a connector.UnorderedSink (it may
// read with ordering = "key" or "none", as --webhook hooks do): each request
// carries its own id, the same on every attempt.
func (s *Sink) ConsumesOutOfOrder() {}

// Close releases idle connections. It is idempotent.
func (s *Sink) Close(context.Context) error {
	s.closeOnce.Do(s.client.CloseIdleConnections)
	return nil
}

var _ connector.Sink = (*Sink)(nil)
