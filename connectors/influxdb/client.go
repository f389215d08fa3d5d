package influxdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
)

// client is what the sink and the source share: the server's address,
// the token, and the retry schedule of upstream's resilience keys.
type client struct {
	base       string // url without a trailing slash
	token      string
	http       *http.Client
	attempts   int // max_retries: attempts in all, at least 1
	retryDelay time.Duration
	retryMax   time.Duration
	openTries  int // max_open_retries, at least 1
	openMax    time.Duration
	log        *slog.Logger
}

func newClient(set *connector.Settings, log *slog.Logger) *client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &client{
		base: strings.TrimRight(set.String("url"), "/"), token: set.String("token"),
		http:     &http.Client{Timeout: set.Duration("timeout")},
		attempts: max(1, set.Int("max_retries")), retryDelay: set.Duration("retry_delay"),
		retryMax: set.Duration("retry_max_delay"), openTries: max(1, set.Int("max_open_retries")),
		openMax: set.Duration("open_retry_max_delay"), log: log,
	}
}

// statusError is an answer other than success, with the server's reason.
type statusError struct {
	status int
	reason string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("InfluxDB answered %d: %s", e.status, e.reason)
}

// transient reports whether the status says the server is down or busy.
func transient(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// do sends one request and returns the body of a 2xx answer. A network
// failure or a 429/5xx is Unavailable; another status is a *statusError.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header) ([]byte, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var r io.Reader
	if body != nil {
		r = strings.NewReader(string(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, fmt.Errorf("influxdb: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Token "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, connector.Unavailable(fmt.Errorf("InfluxDB at %s: %w", c.base, c.scrub(err)))
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, connector.Unavailable(fmt.Errorf("InfluxDB at %s: reading the answer: %w", c.base, c.scrub(err)))
	}
	if resp.StatusCode/100 == 2 {
		return out, nil
	}
	reason := resp.Header.Get("X-Influxdb-Error")
	if reason == "" {
		reason = strings.TrimSpace(string(out))
		if len(reason) > 1000 {
			reason = reason[:1000] + "..."
		}
	}
	se := &statusError{status: resp.StatusCode, reason: reason}
	if transient(resp.StatusCode) {
		return nil, connector.Unavailable(fmt.Errorf("InfluxDB at %s: %w", c.base, se))
	}
	return nil, se
}

// retry runs fn until it succeeds, fails with something other than
// Unavailable, or has used the client's attempts, waiting retry_delay
// doubling to retry_max_delay between attempts.
func (c *client) retry(ctx context.Context, what string, fn func() error) error {
	b := backoff.Backoff{Min: c.retryDelay, Max: c.retryMax, Jitter: 0.2}
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || !connector.IsUnavailable(err) || attempt >= c.attempts || ctx.Err() != nil {
			return err
		}
		c.log.Warn(what+" failed; retrying", "error", err, "attempt", attempt, "of", c.attempts)
		if backoff.Sleep(ctx, b.Next()) != nil {
			return err
		}
	}
}

// health checks GET /health with the token, max_open_retries times at
// most, as upstream's open does.
func (c *client) health(ctx context.Context) error {
	b := backoff.Backoff{Min: max(c.retryDelay, time.Millisecond), Max: c.openMax, Jitter: 0.2}
	for attempt := 1; ; attempt++ {
		_, err := c.do(ctx, http.MethodGet, "/health", nil, nil, nil)
		if err == nil {
			return nil
		}
		if attempt >= c.openTries || ctx.Err() != nil {
			return fmt.Errorf("influxdb: health check of %s: %w", c.base, err)
		}
		c.log.Warn("InfluxDB health check failed; retrying", "error", err, "attempt", attempt, "of", c.openTries)
		if backoff.Sleep(ctx, b.Next()) != nil {
			return fmt.Errorf("influxdb: health check of %s: %w", c.base, err)
		}
	}
}

// scrub removes the token from an error's text.
func (c *client) scrub(err error) error {
	if c.token == "" || !strings.Contains(err.Error(), c.token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), c.token, "****"))
}

// breaker is upstream's circuit breaker: after threshold consecutive
// failed calls it is open for coolDown, and calls fail at once.
type breaker struct {
	mu        sync.Mutex
	threshold int
	coolDown  time.Duration
	failures  int
	openUntil time.Time
}

func (b *breaker) open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil.IsZero() {
		return false
	}
	if time.Now().Before(b.openUntil) {
		return true
	}
	b.openUntil, b.failures = time.Time{}, 0
	return false
}

func (b *breaker) record(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.failures = 0
		return
	}
	b.failures++
	if b.threshold > 0 && b.failures >= b.threshold {
		b.openUntil = time.Now().Add(b.coolDown)
	}
}

// resilienceFields are upstream's retry, open and breaker keys, shared by
// the sink and the source; timeout's default differs.
func resilienceFields(timeout time.Duration) []connector.Field {
	return []connector.Field{
		connector.NewDurationField("timeout").WithDefault(timeout).WithDoc("per request"),
		connector.NewIntField("max_retries").Between(0, 1<<31).WithDefault(3).
			WithDoc("attempts of a request in all, the first included (network errors, 429, 5xx); 0 is 1"),
		connector.NewDurationField("retry_delay").WithDefault(time.Second).WithDoc("first wait between attempts, doubling"),
		connector.NewDurationField("retry_max_delay").WithDefault(5 * time.Second).WithDoc("longest wait between attempts"),
		connector.NewIntField("max_open_retries").Between(0, 1<<31).WithDefault(10).
			WithDoc("attempts of the health check (GET /health) when opening; 0 is 1"),
		connector.NewDurationField("open_retry_max_delay").WithDefault(60 * time.Second).WithDoc("longest wait between health checks"),
		connector.NewIntField("circuit_breaker_threshold").Between(0, 1<<31).WithDefault(5).
			WithDoc("consecutive failed calls that open the circuit breaker; 0 never opens it"),
		connector.NewDurationField("circuit_breaker_cool_down").WithDefault(30 * time.Second).
			WithDoc("how long the open breaker fails calls without trying the server"),
	}
}

func checkURL(v any) error {
	s, _ := v.(string)
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return errors.New("expected an http:// or https:// URL with a host (no user or query)")
	}
	return nil
}

func checkVersion(v any) error {
	if v == "v3" {
		return errors.New("v3 (InfluxDB 3 /api/v3) is not built in Ferry yet; v2 writes to InfluxDB 2.x and 1.8+")
	}
	return nil
}
