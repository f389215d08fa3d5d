package state

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/stretchr/testify/require"
)

// requireOneIdempotencyKey checks that every request of the given method
// carried the same, non-empty Idempotency-Key, and returns it.
func requireOneIdempotencyKey(t *testing.T, reqs []srvRequest, method string) string {
	t.Helper()
	key, n := "", 0
	for _, r := range reqs {
		if r.Method != method {
			continue
		}
		n++
		require.NotEmpty(t, r.IdempotencyKey, "request %d", n)
		if key == "" {
			key = r.IdempotencyKey
		}
		require.Equal(t, key, r.IdempotencyKey, "request %d carried another Idempotency-Key", n)
	}
	require.NotZero(t, n, "no %s requests", method)
	return key
}

func TestHTTPRetries5xxWithOneIdempotencyKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newStateServer(t)
	srv.before = func(w http.ResponseWriter, r *http.Request, n int) bool {
		if r.Method == http.MethodPut && n <= 3 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	s := newTestHTTPStore(t, srv, WithHeader("Authorization", srv.auth),
		WithRetry(Retry{MaxAttempts: 5, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 25 * time.Millisecond}))
	waits := &sleepLog{}
	s.sleep = func(ctx context.Context, d time.Duration) error {
		_ = waits.sleep(ctx, d)
		return backoff.Sleep(ctx, d) // the real timer path
	}

	v, err := s.Save(ctx, "src", []byte("batch-1"), "")
	require.NoError(t, err)
	reqs, applied := srv.snapshot()
	require.Len(t, reqs, 4, "3 failures and 1 success")
	first := requireOneIdempotencyKey(t, reqs, http.MethodPut)
	require.Equal(t, 1, applied)
	for i, r := range reqs {
		require.Equal(t, "*", r.IfNone, "attempt %d", i+1)
		require.Equal(t, "batch-1", r.Body, "attempt %d", i+1)
	}
	// Backoff: 10ms, 20ms, then capped at 25ms, each drawn from [d/2, d].
	got := waits.get()
	require.Len(t, got, 3)
	for i, ceil := range []time.Duration{10, 20, 25} {
		ceil *= time.Millisecond
		require.GreaterOrEqual(t, got[i], ceil/2, "wait %d", i)
		require.LessOrEqual(t, got[i], ceil, "wait %d", i)
	}

	// The next Save is a new operation with a new key.
	_, err = s.Save(ctx, "src", []byte("batch-2"), v)
	require.NoError(t, err)
	reqs, applied = srv.snapshot()
	require.Equal(t, 2, applied)
	require.NotEqual(t, first, reqs[len(reqs)-1].IdempotencyKey)
}

func TestHTTPLostAnswerIsRetriedOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		lose func(t *testing.T, w http.ResponseWriter, r *http.Request)
	}{
		{"dropped connection", func(t *testing.T, w http.ResponseWriter, _ *http.Request) { dropConnection(t, w) }},
		{"timeout", func(_ *testing.T, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := newStateServer(t)
			// The first write is applied but its answer never arrives.
			srv.afterApply = func(w http.ResponseWriter, r *http.Request, n int) bool {
				if n == 1 {
					tc.lose(t, w, r)
					return true
				}
				return false
			}
			s := newTestHTTPStore(t, srv, WithHeader("Authorization", srv.auth), WithTimeout(300*time.Millisecond))

			v, err := s.Save(ctx, "src", []byte("once"), "")
			require.NoError(t, err, "case %d", i)
			reqs, applied := srv.snapshot()
			require.GreaterOrEqual(t, len(reqs), 2, "case %d: the lost answer was not retried", i)
			requireOneIdempotencyKey(t, reqs, http.MethodPut)
			require.Equal(t, 1, applied, "case %d: the write must happen once", i)

			st, err := s.Load(ctx, "src")
			require.NoError(t, err)
			require.Equal(t, State{Data: []byte("once"), Version: v}, st, "case %d", i)
		})
	}
}

func TestHTTPRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newStateServer(t)
	date := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	srv.before = func(w http.ResponseWriter, r *http.Request, n int) bool {
		switch n {
		case 1:
			w.Header().Set("Retry-After", "7")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case 2:
			w.Header().Set("Retry-After", date) // an hour away: capped
			http.Error(w, "maintenance", http.StatusServiceUnavailable)
		case 3:
			w.Header().Set("Retry-After", "not a number") // ignored: backoff
			http.Error(w, "slow down", http.StatusTooManyRequests)
		default:
			return false
		}
		return true
	}
	s := newTestHTTPStore(t, srv, WithHeader("Authorization", srv.auth),
		WithRetry(Retry{InitialBackoff: 40 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, MaxRetryAfter: 20 * time.Second}))
	waits := &sleepLog{}
	s.sleep = waits.sleep

	_, err := s.Save(ctx, "src", []byte("x"), "")
	require.NoError(t, err)
	reqs, applied := srv.snapshot()
	require.Len(t, reqs, 4)
	require.Equal(t, 1, applied)
	requireOneIdempotencyKey(t, reqs, http.MethodPut)
	got := waits.get()
	require.Len(t, got, 3)
	require.Equal(t, 7*time.Second, got[0], "Retry-After: 7")
	require.Equal(t, 20*time.Second, got[1], "an HTTP date an hour away, capped at MaxRetryAfter")
	require.GreaterOrEqual(t, got[2], 20*time.Millisecond, "invalid Retry-After falls back to backoff")
	require.LessOrEqual(t, got[2], 40*time.Millisecond)
}

func TestHTTPConflictIsNotRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newStateServer(t)
	s := newTestHTTPStore(t, srv, WithHeader("Authorization", srv.auth))
	v1, err := s.Save(ctx, "src", []byte("1"), "")
	require.NoError(t, err)
	_, err = s.Save(ctx, "src", []byte("2"), v1)
	require.NoError(t, err)

	_, err = s.Save(ctx, "src", []byte("stale"), v1)
	require.ErrorIs(t, err, ErrConflict)
	reqs, applied := srv.snapshot()
	require.Len(t, reqs, 3, "412 must not be retried")
	require.Equal(t, string(v1), reqs[2].IfMatch)
	require.Empty(t, reqs[2].IfNone)
	require.Equal(t, 2, applied)
}

func TestHTTPClientErrorNamesStatusNotSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const secret = "Bearer sup3r-s3cret-t0ken"
	srv := newStateServer(t)
	srv.auth = secret
	srv.before = func(w http.ResponseWriter, r *http.Request, _ int) bool {
		// A careless service echoing the request's credentials.
		token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		http.Error(w, "bad request from "+r.Header.Get("Authorization")+"\n\x00token "+token, http.StatusBadRequest)
		return true
	}
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	u.User = url.UserPassword("ferry", "urlpass-123")
	s, err := NewHTTP(u.String()+"/state/{key}?token=query-secret-456", WithHeader("Authorization", secret))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	_, err = s.Save(ctx, "src", []byte("x"), "")
	require.Error(t, err)
	var se *HTTPStatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusBadRequest, se.StatusCode)
	msg := err.Error()
	require.Contains(t, msg, "400 Bad Request")
	require.Contains(t, msg, `bad request from [redacted]  token [redacted]"`)
	require.Contains(t, msg, "/state/src")
	for _, secret := range []string{"sup3r-s3cret", "urlpass-123", "query-secret-456"} {
		require.NotContains(t, msg, secret)
	}
	reqs, _ := srv.snapshot()
	require.Len(t, reqs, 1, "400 must not be retried")
	require.Equal(t, "token=query-secret-456", reqs[0].Query)
}

func TestHTTPTransportErrorHasNoSecrets(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	base := dead.URL
	dead.Close() // connection refused from now on

	s, err := NewHTTP(base+"/state/{key}?token=query-secret-456",
		WithHeader("Authorization", "Bearer sup3r-s3cret"), WithRetry(Retry{MaxAttempts: 3}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	waits := &sleepLog{}
	s.sleep = waits.sleep

	_, err = s.Load(context.Background(), "src")
	require.Error(t, err)
	require.Contains(t, err.Error(), "giving up after 3 attempts")
	require.Len(t, waits.get(), 2)
	require.NotContains(t, err.Error(), "sup3r-s3cret")
	require.NotContains(t, err.Error(), "query-secret-456")
}

func TestHTTPGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	srv := newStateServer(t)
	srv.before = func(w http.ResponseWriter, _ *http.Request, _ int) bool {
		http.Error(w, "down", http.StatusBadGateway)
		return true
	}
	s := newTestHTTPStore(t, srv, WithHeader("Authorization", srv.auth), WithRetry(Retry{MaxAttempts: 3}))
	_, err := s.Save(context.Background(), "src", []byte("x"), "")
	var se *HTTPStatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusBadGateway, se.StatusCode)
	require.Contains(t, err.Error(), "giving up after 3 attempts")
	reqs, applied := srv.snapshot()
	require.Len(t, reqs, 3)
	require.Zero(t, applied)
	requireOneIdempotencyKey(t, reqs, http.MethodPut)
}

func TestHTTPHeadersSent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newStateServer(t)
	s := newTestHTTPStore(t, srv, WithHeader("Authorization", srv.auth), WithHeader("X-Tenant", "team-a"))
	v, err := s.Save(ctx, "src", []byte("x"), "")
	require.NoError(t, err)
	_, err = s.Load(ctx, "src")
	require.NoError(t, err)
	_, err = s.Save(ctx, "src", []byte("y"), v)
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, "src"))

	reqs, _ := srv.snapshot()
	require.Len(t, reqs, 4)
	for i, r := range reqs {
		require.Equal(t, srv.auth, r.Authorization, "request %d", i)
		require.Equal(t, "team-a", r.Header.Get("X-Tenant"), "request %d", i)
		require.Equal(t, "/v1/state/src", r.Path, "request %d", i)
	}
	require.Equal(t, []string{"PUT", "GET", "PUT", "DELETE"}, []string{reqs[0].Method, reqs[1].Method, reqs[2].Method, reqs[3].Method})
	require.Equal(t, "application/octet-stream", reqs[0].ContentType)
	require.Equal(t, "*", reqs[0].IfNone)
	require.Empty(t, reqs[0].IfMatch)
	require.Equal(t, string(v), reqs[2].IfMatch)
	require.Empty(t, reqs[2].IfNone)
	require.Empty(t, reqs[1].IdempotencyKey, "GET needs no Idempotency-Key")
	require.NotEmpty(t, reqs[3].IdempotencyKey)
	require.NotEqual(t, reqs[0].IdempotencyKey, reqs[2].IdempotencyKey)
}

func TestHTTPMissingETag(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK) // success, but no ETag
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s, err := NewHTTP(srv.URL)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })

	_, err = s.Save(context.Background(), "src", []byte("x"), "")
	require.ErrorIs(t, err, ErrNoETag)
	require.Contains(t, err.Error(), "may have happened")
	_, err = s.Load(context.Background(), "src")
	require.ErrorIs(t, err, ErrNoETag)
}

func TestHTTPURLTemplates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tmpl, key           string
		wantPath, wantQuery string
	}{
		{"/base", "src", "/base/src", ""},
		{"/base/", "src", "/base/src", ""},
		{"/v1/{key}/state?ns=ferry", "my source", "/v1/my source/state", "ns=ferry"},
		{"/state?ns=ferry&key={key}", "a&b=c+d", "/state", "ns=ferry&key=a%26b%3Dc%2Bd"},
		{"/raw/{key}", "a%41b", "/raw/a%41b", ""},
	}
	for i, tc := range tests {
		var gotPath, gotQuery string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gotPath, gotQuery = r.URL.Path, r.URL.RawQuery
			w.Header().Set("ETag", `"1"`)
		}))
		s, err := NewHTTP(srv.URL+tc.tmpl, WithRetry(Retry{MaxAttempts: 1}))
		require.NoError(t, err, "case %d", i)
		_, err = s.Load(context.Background(), tc.key)
		require.NoError(t, err, "case %d", i)
		require.Equal(t, tc.wantPath, gotPath, "case %d: %s", i, tc.tmpl)
		require.Equal(t, tc.wantQuery, gotQuery, "case %d: %s", i, tc.tmpl)
		if tc.wantQuery != "" && strings.Contains(tc.tmpl, "key={key}") {
			q, err := url.ParseQuery(gotQuery)
			require.NoError(t, err)
			require.Equal(t, tc.key, q.Get("key"), "case %d", i)
		}
		require.NoError(t, s.Close())
		srv.Close()
	}
}

func TestNewHTTPRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url  string
		opts []HTTPOption
		want string
	}{
		{"ftp://host/state", nil, `scheme "ftp"`},
		{"http:///state", nil, "no host"},
		{"http://host/{key}/{key}", nil, `"{key}" 2 times`},
		{"http://host/state?ns=a", nil, `needs "{key}"`},
		{"http://host/{key}#frag", nil, "fragment"},
		{"http://host", []HTTPOption{WithHeader("If-Match", "x")}, "set by the state store"},
		{"http://host", []HTTPOption{WithHeader("idempotency-key", "x")}, "set by the state store"},
		{"http://host", []HTTPOption{WithHeader("Bad Name", "x")}, "not a valid HTTP token"},
		{"http://host", []HTTPOption{WithHeader("Authorization", "Bearer abc\r\nX-Evil: 1")}, "control character"},
		{"http://host", []HTTPOption{WithTimeout(0)}, "must be positive"},
		{"http://host", []HTTPOption{WithRetry(Retry{MaxAttempts: -1})}, "negative"},
		{"http://host", []HTTPOption{WithHTTPClient(nil)}, "nil HTTP client"},
	}
	for i, tc := range tests {
		_, err := NewHTTP(tc.url, tc.opts...)
		require.Error(t, err, "case %d: %s", i, tc.url)
		require.Contains(t, err.Error(), tc.want, "case %d: %s", i, tc.url)
		require.NotContains(t, err.Error(), "Bearer abc", "case %d: a header value leaked", i)
	}
}

func TestHTTPCloseAbortsCallInFlight(t *testing.T) {
	t.Parallel()
	srv := newStateServer(t)
	arrived := make(chan struct{})
	srv.before = func(_ http.ResponseWriter, r *http.Request, _ int) bool {
		close(arrived)
		<-r.Context().Done() // hold the request until the client gives up
		return true
	}
	s, err := NewHTTP(srv.URL, WithHeader("Authorization", srv.auth))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := s.Save(context.Background(), "src", []byte("x"), "")
		done <- err
	}()
	<-arrived
	require.NoError(t, s.Close())
	err = <-done
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, s.Close())
}

func TestHTTPSaveRejectsWildcardVersion(t *testing.T) {
	t.Parallel()
	srv := newStateServer(t)
	s := newTestHTTPStore(t, srv, WithHeader("Authorization", srv.auth))
	_, err := s.Save(context.Background(), "src", []byte("x"), "*")
	require.ErrorContains(t, err, "not an entity tag")
	reqs, _ := srv.snapshot()
	require.Empty(t, reqs)
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 120 ", 120 * time.Second, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"99999999999", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"soon", 0, false},
	}
	for i, tc := range tests {
		got, ok := parseRetryAfter(tc.in, now)
		require.Equal(t, tc.ok, ok, "case %d: %q", i, tc.in)
		require.Equal(t, tc.want, got, "case %d: %q", i, tc.in)
	}
}

func TestBackoffIsCappedAndJittered(t *testing.T) {
	t.Parallel()
	s, err := NewHTTP("http://host", WithRetry(Retry{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	ceilings := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for range 20 {
		b := s.schedule()
		for attempt := 1; attempt <= 60; attempt++ {
			ceil := ceilings[min(attempt, len(ceilings))-1] * time.Millisecond
			d := b.Next()
			require.GreaterOrEqual(t, d, ceil/2, "attempt %d", attempt)
			require.LessOrEqual(t, d, ceil, "attempt %d", attempt)
		}
	}
}

func TestRetryableStatus(t *testing.T) {
	t.Parallel()
	for _, code := range []int{408, 429, 500, 502, 503, 504, 599} {
		require.True(t, retryableStatus(code), "%d", code)
	}
	for _, code := range []int{200, 400, 401, 403, 404, 409, 412, 422, 501, 505} {
		require.False(t, retryableStatus(code), "%d", code)
	}
}

func TestHTTPErrorExcerptIsShortAndOneLine(t *testing.T) {
	t.Parallel()
	s, err := NewHTTP("http://host", WithHeader("Authorization", "Bearer abcdefgh"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	body := strings.Repeat("é", 150) + "abcdefgh" + strings.Repeat("x\n", 500)
	got := s.excerpt([]byte(body))
	require.True(t, strings.HasSuffix(got, "…"), got)
	require.LessOrEqual(t, len(got), excerptLen+len("…"))
	require.NotContains(t, got, "abcdefgh")
	require.NotContains(t, got, "\n")
	require.True(t, utf8.ValidString(got))
	require.Equal(t, "short", s.excerpt([]byte("  short\r\n")))
}
