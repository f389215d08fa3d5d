package httpsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// received is one request the test server saw.
type received struct {
	method string
	header http.Header
	body   []byte
}

// server is an httptest server that records requests and answers with
// reply (200 when nil).
type server struct {
	*httptest.Server
	mu    sync.Mutex
	got   []received
	reply func(n int, r *http.Request, body []byte) (status int, header map[string]string)
}

func newServer(t *testing.T, reply func(n int, r *http.Request, body []byte) (int, map[string]string)) *server {
	t.Helper()
	s := &server{reply: reply}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.got)
		s.got = append(s.got, received{r.Method, r.Header.Clone(), body})
		s.mu.Unlock()
		status := http.StatusOK
		if s.reply != nil {
			var h map[string]string
			status, h = s.reply(n, r, body)
			for k, v := range h {
				w.Header().Set(k, v)
			}
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, "answer %d", status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.got...)
}

// sleeps records the waits a sink asked for instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (r *sleeps) sleep(ctx context.Context, d time.Duration) error {
	r.mu.Lock()
	r.d = append(r.d, d)
	r.mu.Unlock()
	return ctx.Err()
}

func (r *sleeps) all() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.d...)
}

var fixedNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// newTestSink builds a sink on plugin values with an injected sleep,
// clock and environment.
func newTestSink(t *testing.T, values map[string]any, env map[string]string) (*Sink, *sleeps) {
	t.Helper()
	s, err := newSink(connector.Config{Key: "h", Plugin: connector.PluginConfig{Values: values, Source: "h.toml"}},
		func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	rec := &sleeps{}
	s.sleep, s.now = rec.sleep, func() time.Time { return fixedNow }
	require.NoError(t, s.Open(context.Background()))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, rec
}

func batchOf(schema connector.Schema, payloads ...string) *connector.SinkBatch {
	b := &connector.SinkBatch{Stream: "orders", Topic: "created", Partition: 2, Schema: schema}
	for i, p := range payloads {
		b.Messages = append(b.Messages, connector.Message{ID: [16]byte{15: byte(i + 1)}, Payload: []byte(p),
			Offset: uint64(10 + i), Timestamp: time.UnixMicro(1700000000000000 + int64(i)), Checksum: 99,
			OriginTimestamp: time.UnixMicro(1600000000000000)})
	}
	return b
}

func TestBatchModes(t *testing.T) {
	t.Parallel()
	env0 := `{"metadata":{"iggy_id":"00000000-0000-0000-0000-000000000001","iggy_offset":10,"iggy_timestamp":1700000000000000,"iggy_stream":"orders","iggy_topic":"created","iggy_partition_id":2},"payload":{"a":1}}`
	env1 := `{"metadata":{"iggy_id":"00000000-0000-0000-0000-000000000002","iggy_offset":11,"iggy_timestamp":1700000000000001,"iggy_stream":"orders","iggy_topic":"created","iggy_partition_id":2},"payload":[2]}`
	cases := []struct {
		name        string
		values      map[string]any
		schema      connector.Schema
		payloads    []string
		wantBodies  []string
		contentType string
	}{
		{"individual with metadata", map[string]any{}, connector.SchemaJSON, []string{"{\"a\": 1}", "[ 2 ]"},
			[]string{env0, env1}, "application/json"},
		{"individual without metadata", map[string]any{"include_metadata": false}, connector.SchemaJSON,
			[]string{"{\"a\":\n 1}", "[2]"}, []string{`{"a":1}`, `[2]`}, "application/json"},
		{"ndjson", map[string]any{"batch_mode": "ndjson"}, connector.SchemaJSON, []string{"{\"a\": 1}", "[ 2 ]"},
			[]string{env0 + "\n" + env1 + "\n"}, "application/x-ndjson"},
		{"json_array", map[string]any{"batch_mode": "json_array"}, connector.SchemaJSON, []string{"{\"a\": 1}", "[ 2 ]"},
			[]string{"[" + env0 + "," + env1 + "]"}, "application/json"},
		{"raw", map[string]any{"batch_mode": "raw"}, connector.SchemaRaw, []string{"\x00\x01bin", "plain text"},
			[]string{"\x00\x01bin", "plain text"}, "application/octet-stream"},
		{"text payloads become JSON strings", map[string]any{"batch_mode": "ndjson", "include_metadata": false},
			connector.SchemaText, []string{"hello \"world\"", "two"}, []string{"\"hello \\\"world\\\"\"\n\"two\"\n"}, "application/x-ndjson"},
		{"binary payloads are base64", map[string]any{"batch_mode": "json_array", "include_metadata": false},
			connector.SchemaRaw, []string{"\xff\x00"}, []string{`[{"data":"/wA=","iggy_payload_encoding":"base64"}]`}, "application/json"},
		{"checksum and origin timestamp", map[string]any{"include_checksum": true, "include_origin_timestamp": true},
			connector.SchemaJSON, []string{"1"},
			[]string{`{"metadata":{"iggy_id":"00000000-0000-0000-0000-000000000001","iggy_offset":10,"iggy_timestamp":1700000000000000,"iggy_stream":"orders","iggy_topic":"created","iggy_partition_id":2,"iggy_checksum":99,"iggy_origin_timestamp":1600000000000000},"payload":1}`},
			"application/json"},
		{"PUT with a content type of our own", map[string]any{"method": "put", "batch_mode": "raw",
			"headers": map[string]any{"Content-Type": "application/x-protobuf", "X-Tenant": "t1"}},
			connector.SchemaRaw, []string{"pb"}, []string{"pb"}, "application/x-protobuf"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, nil)
			tc.values["url"] = srv.URL + "/ingest"
			s, _ := newTestSink(t, tc.values, nil)
			require.NoError(t, s.Consume(context.Background(), batchOf(tc.schema, tc.payloads...)), "case %d", i)
			got := srv.requests()
			require.Len(t, got, len(tc.wantBodies), "case %d: requests", i)
			for j, r := range got {
				require.Equal(t, tc.wantBodies[j], string(r.body), "case %d: body %d", i, j)
				require.Equal(t, tc.contentType, r.header.Get("Content-Type"), "case %d", i)
			}
			if tc.values["method"] != nil {
				require.Equal(t, http.MethodPut, got[0].method)
				require.Equal(t, "t1", got[0].header.Get("X-Tenant"))
			} else {
				require.Equal(t, http.MethodPost, got[0].method)
			}
		})
	}
}

func TestRetriesHonourRetryAfter(t *testing.T) {
	t.Parallel()
	date := fixedNow.Add(20 * time.Second).Format(http.TimeFormat)
	srv := newServer(t, func(n int, _ *http.Request, _ []byte) (int, map[string]string) {
		switch n {
		case 0:
			return http.StatusServiceUnavailable, map[string]string{"Retry-After": "7"}
		case 1:
			return http.StatusTooManyRequests, map[string]string{"Retry-After": date}
		case 2:
			return http.StatusBadGateway, nil
		case 3:
			return http.StatusTooManyRequests, map[string]string{"Retry-After": "3600"}
		}
		return http.StatusAccepted, nil
	})
	s, rec := newTestSink(t, map[string]any{"url": srv.URL, "max_retries": int64(4), "retry_delay": "1s",
		"max_retry_delay": "30s"}, nil)
	require.NoError(t, s.Consume(context.Background(), batchOf(connector.SchemaJSON, `{"x":1}`)))
	require.Len(t, srv.requests(), 5, "four failures, then success")
	// Retry-After 7 s; an HTTP date 20 s ahead; the computed backoff (1 s
	// doubled twice = 4 s); Retry-After 3600 s capped at max_retry_delay.
	require.Equal(t, []time.Duration{7 * time.Second, 20 * time.Second, 4 * time.Second, 30 * time.Second}, rec.all())
	for _, r := range srv.requests() {
		require.JSONEq(t, `{"x":1}`, extractPayload(t, r.body), "the same body each attempt")
	}
}

func extractPayload(t *testing.T, body []byte) string {
	t.Helper()
	i := bytes.Index(body, []byte(`"payload":`))
	require.GreaterOrEqual(t, i, 0, "body %s", body)
	return string(body[i+len(`"payload":`) : len(body)-1])
}

func TestRetriesRunOutThenTheRuntimeDecides(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(int, *http.Request, []byte) (int, map[string]string) { return 503, nil })
	s, rec := newTestSink(t, map[string]any{"url": srv.URL, "max_retries": int64(2), "retry_delay": "100ms",
		"retry_backoff_multiplier": 3.0, "batch_mode": "ndjson"}, nil)
	err := s.Consume(context.Background(), batchOf(connector.SchemaJSON, "1", "2"))
	require.Error(t, err)
	require.False(t, connector.IsPermanent(err), "a 5xx is left to the runtime's retries")
	require.ErrorContains(t, err, "503")
	require.ErrorContains(t, err, "after 2 retries")
	require.Len(t, srv.requests(), 3)
	require.Equal(t, []time.Duration{100 * time.Millisecond, 300 * time.Millisecond}, rec.all())
}

func TestTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // never answers in time
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	s, rec := newTestSink(t, map[string]any{"url": srv.URL, "timeout": "50ms", "max_retries": int64(1)}, nil)
	err := s.Consume(context.Background(), batchOf(connector.SchemaJSON, "1"))
	var per connector.MessageErrors
	require.ErrorAs(t, err, &per)
	require.Contains(t, per, 0)
	require.False(t, connector.IsPermanent(err))
	require.ErrorContains(t, per[0], "Client.Timeout")
	require.Len(t, rec.all(), 1, "the timeout was retried once")
}

func TestClientErrorsArePermanentAndNamed(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(_ int, _ *http.Request, body []byte) (int, map[string]string) {
		if bytes.Contains(body, []byte("bad")) {
			return http.StatusUnprocessableEntity, nil
		}
		return http.StatusOK, nil
	})
	s, rec := newTestSink(t, map[string]any{"url": srv.URL}, nil)
	err := s.Consume(context.Background(), batchOf(connector.SchemaJSON, `"ok"`, `"bad"`, `"ok2"`, `"bad2"`, `not json`))
	require.True(t, connector.IsPermanent(err), "every failure is permanent: %v", err)
	var per connector.MessageErrors
	require.ErrorAs(t, err, &per)
	require.Len(t, per, 3)
	require.ErrorContains(t, per[1], "422")
	require.ErrorContains(t, per[3], "422")
	require.ErrorContains(t, per[4], "not valid JSON")
	require.Empty(t, rec.all(), "a 4xx is not retried")
	require.Len(t, srv.requests(), 4, "the invalid message is never sent")

	// A batch request that gets a 4xx: the whole batch's error, permanent.
	nd, _ := newTestSink(t, map[string]any{"url": srv.URL, "batch_mode": "ndjson"}, nil)
	err = nd.Consume(context.Background(), batchOf(connector.SchemaJSON, `"ok"`, `"bad"`))
	require.True(t, connector.IsPermanent(err))
	require.False(t, errors.As(err, &per), "not per message: the runtime isolates the poison one")
}

func TestMixedFailuresAndDeadEndpoint(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(_ int, _ *http.Request, body []byte) (int, map[string]string) {
		switch {
		case bytes.Contains(body, []byte("reject")):
			return http.StatusBadRequest, nil
		case bytes.Contains(body, []byte("down")):
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	s, _ := newTestSink(t, map[string]any{"url": srv.URL, "max_retries": int64(0)}, nil)
	err := s.Consume(context.Background(), batchOf(connector.SchemaJSON, `"reject"`, `"fine"`, `"down"`))
	require.False(t, connector.IsPermanent(err), "a transient failure keeps the batch retriable")
	var per connector.MessageErrors
	require.ErrorAs(t, err, &per)
	require.Equal(t, []int{0, 2}, keys(per))

	// Three transient failures in a row: the rest is not attempted.
	err = s.Consume(context.Background(), batchOf(connector.SchemaJSON, `"down1"`, `"down2"`, `"down3"`, `"fine"`, `"fine"`))
	require.ErrorAs(t, err, &per)
	require.Equal(t, []int{0, 1, 2, 3, 4}, keys(per))
	require.ErrorContains(t, per[4], "3 requests in a row failed")
	require.Len(t, srv.requests(), 3+3, "two batches: 3 requests, then 3 before giving up")
}

func keys(m connector.MessageErrors) []int {
	var out []int
	for i := 0; len(out) < len(m); i++ {
		if _, ok := m[i]; ok {
			out = append(out, i)
		}
	}
	return out
}

func TestMaxPayloadSplitsBatches(t *testing.T) {
	t.Parallel()
	srv := newServer(t, nil)
	s, _ := newTestSink(t, map[string]any{"url": srv.URL, "batch_mode": "json_array", "include_metadata": false,
		"max_payload_size_bytes": int64(13)}, nil)
	err := s.Consume(context.Background(), batchOf(connector.SchemaJSON, `"aaa"`, `"bbb"`, `"ccc"`, `"this one is too long"`))
	var per connector.MessageErrors
	require.ErrorAs(t, err, &per)
	require.True(t, connector.IsPermanent(err))
	require.Equal(t, []int{3}, keys(per))
	var bodies []string
	for _, r := range srv.requests() {
		bodies = append(bodies, string(r.body))
	}
	require.Equal(t, []string{`["aaa","bbb"]`, `["ccc"]`}, bodies)
}

func TestSecretsFromTheEnvironmentAreNeverLogged(t *testing.T) {
	t.Parallel()
	const token, secret = "tok-3f9a-very-secret", "hmac-key-7d1e"
	srv := newServer(t, func(int, *http.Request, []byte) (int, map[string]string) { return 500, nil })
	var logs bytes.Buffer
	s, err := newSink(connector.Config{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Plugin: connector.PluginConfig{Values: map[string]any{
			"url": srv.URL + "/hook?key=${TOKEN}", "verbose_logging": true, "max_retries": int64(1), "retry_delay": "1ms",
			"headers":        map[string]any{"Authorization": "Bearer ${TOKEN}", "X-Literal": "cost $5 and $${HOME}"},
			"signing_secret": "${SECRET}",
		}}}, func(k string) (string, bool) {
		v, ok := map[string]string{"TOKEN": token, "SECRET": secret}[k]
		return v, ok
	})
	require.NoError(t, err)
	err = s.Consume(context.Background(), batchOf(connector.SchemaJSON, "1"))
	require.Error(t, err)
	got := srv.requests()
	require.Len(t, got, 2)
	require.Equal(t, "Bearer "+token, got[0].header.Get("Authorization"))
	require.Equal(t, "cost $5 and ${HOME}", got[0].header.Get("X-Literal"))
	require.NotContains(t, logs.String(), token)
	require.NotContains(t, logs.String(), secret)
	require.NotContains(t, err.Error(), token, "errors name the URL without its query")
	require.Contains(t, logs.String(), "/hook")

	_, err = newSink(connector.Config{Plugin: connector.PluginConfig{Source: "h.toml", Values: map[string]any{
		"url": srv.URL, "headers": map[string]any{"Authorization": "Bearer ${MISSING_TOKEN}"}}}},
		func(string) (string, bool) { return "", false })
	require.ErrorContains(t, err, "h.toml: plugin_config.headers.Authorization: MISSING_TOKEN: environment variable is not set")
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{}, "plugin_config.url: required key is missing; expected a string"},
		{map[string]any{"url": "ftp://x"}, "plugin_config.url: expected an http:// or https:// URL with a host"},
		{map[string]any{"url": "http://x", "batch_mode": "csv"}, `plugin_config.batch_mode: expected one of "individual", "ndjson", "json_array", "raw", got "csv"`},
		{map[string]any{"url": "http://x", "method": "FETCH"}, `plugin_config.method: expected one of "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", got "FETCH"; did you mean "PATCH"?`},
		{map[string]any{"url": "http://x", "success_status_codes": []any{int64(2000)}}, "plugin_config.success_status_codes[0]: expected an integer from 100 to 599, got 2000"},
		{map[string]any{"url": "http://x", "headers": map[string]any{"Bad Name": "v"}}, `plugin_config.headers: "Bad Name" is not a valid header name`},
		{map[string]any{"url": "http://x", "headers": map[string]any{"X": "${1BAD}"}}, "plugin_config.headers.X: ${1BAD} is not a valid variable name"},
		{map[string]any{"url": "http://x", "headers": map[string]any{"X": "${OPEN"}}, "no closing }"},
		{map[string]any{"url": "http://x", "timeout": "soon"}, `plugin_config.timeout: expected a duration such as "5s", "250ms" or "1h 30m", got "soon"`},
		{map[string]any{"url": "http://x", "retries": int64(1)}, `plugin_config.retries: unknown key; did you mean "max_retries"?`},
		{map[string]any{"url": "http://x", "signing_secret": "${EMPTY}"}, "plugin_config.signing_secret: the value is empty after expansion"},
	} {
		_, err := newSink(connector.Config{Plugin: connector.PluginConfig{Values: tc.values}},
			func(k string) (string, bool) { return "", k == "EMPTY" })
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
}

func TestHealthCheck(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(n int, r *http.Request, _ []byte) (int, map[string]string) {
		if n == 0 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusMethodNotAllowed, nil // reachable: good enough
	})
	s, err := newSink(connector.Config{Plugin: connector.PluginConfig{Values: map[string]any{
		"url": srv.URL, "health_check_enabled": true}}}, func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	require.ErrorContains(t, s.Open(context.Background()), "answered 503")
	require.NoError(t, s.Open(context.Background()))
	require.Equal(t, http.MethodHead, srv.requests()[0].method)
	require.NoError(t, s.Close(context.Background()))
	require.NoError(t, s.Close(context.Background()), "Close is idempotent")
}

func TestSignedRequestsVerify(t *testing.T) {
	t.Parallel()
	secret := []byte("shared-secret")
	// The receiver as the package doc describes it: verify, then act once
	// per request id, answering a duplicate with success. The first
	// attempt's answer is "lost" (503 after acting), so the sink retries.
	var mu sync.Mutex
	var acted []string
	seen := map[string]bool{}
	attempts := map[string]int{}
	var captured *http.Request
	var capturedBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		body, id, err := VerifyRequest(r, secret, 5*time.Minute, 1<<20)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		attempts[id]++
		if captured == nil {
			captured, capturedBody = r.Clone(context.Background()), raw
		}
		if seen[id] {
			w.WriteHeader(http.StatusOK) // a duplicate: success, not acted on again
			return
		}
		seen[id] = true
		acted = append(acted, string(body))
		if attempts[id] == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // acted, but the answer is "lost"
		}
	}))
	t.Cleanup(srv.Close)
	s, err := newSink(connector.Config{Key: "h", Plugin: connector.PluginConfig{Values: map[string]any{
		"url": srv.URL + "/in%20box/hooks", "batch_mode": "ndjson", "include_metadata": false, "signing_secret": "${SECRET}"}}},
		func(string) (string, bool) { return string(secret), true })
	require.NoError(t, err)
	s.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	require.NoError(t, s.Consume(context.Background(), batchOf(connector.SchemaJSON, `{"n":1}`, `{"n":2}`)))
	require.Equal(t, []string{"{\"n\":1}\n{\"n\":2}\n"}, acted, "acted on once, though sent twice")
	require.Len(t, attempts, 1, "both attempts carried the same request id")
	for _, n := range attempts {
		require.Equal(t, 2, n)
	}

	// A captured request replayed within the tolerance verifies, and the
	// receiver's request-id check is what stops it.
	replay := func(method, path string) int {
		req, err := http.NewRequest(method, srv.URL+path, bytes.NewReader(capturedBody))
		require.NoError(t, err)
		req.Header = captured.Header.Clone()
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, replay("POST", "/in%20box/hooks"))
	require.Len(t, acted, 1, "the replay was not acted on")
	// Sent to another path or with another method, the signature fails.
	require.Equal(t, http.StatusUnauthorized, replay("POST", "/other"))
	require.Equal(t, http.StatusUnauthorized, replay("PUT", "/in%20box/hooks"))

	// The same sink with a wrong secret: every request is refused with 401,
	// a permanent failure.
	s.set.secret = []byte("wrong")
	err = s.Consume(context.Background(), batchOf(connector.SchemaJSON, `{"n":3}`))
	require.True(t, connector.IsPermanent(err))
	require.ErrorContains(t, err, "401")
}

// TestRequestIDs: one id per request, the same for every attempt and for
// a redelivered batch, different between requests, batches and sinks.
func TestRequestIDs(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(n int, _ *http.Request, _ []byte) (int, map[string]string) {
		if n == 0 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusOK, nil
	})
	s, _ := newTestSink(t, map[string]any{"url": srv.URL, "request_id_header": "X-Id"}, nil)
	b := batchOf(connector.SchemaJSON, `{"a":1}`, `{"a":2}`)
	require.NoError(t, s.Consume(context.Background(), b))
	require.NoError(t, s.Consume(context.Background(), b), "the runtime delivers the batch again")
	got := srv.requests()
	require.Len(t, got, 5)
	ids := make([]string, len(got))
	for i, r := range got {
		ids[i] = r.header.Get("X-Id")
		require.Regexp(t, `^[0-9a-f]{32}$`, ids[i])
		require.Empty(t, r.header.Get(DefaultRequestIDHeader))
	}
	require.Equal(t, ids[0], ids[1], "a retry keeps its id")
	require.NotEqual(t, ids[1], ids[2], "another message, another request")
	require.Equal(t, []string{ids[1], ids[2]}, []string{ids[3], ids[4]}, "a redelivered batch keeps its ids")

	other, _ := newTestSink(t, map[string]any{"url": srv.URL, "request_id_header": "X-Id"}, nil)
	other.key = "other"
	require.NoError(t, other.Consume(context.Background(), batchOf(connector.SchemaJSON, `{"a":1}`)))
	require.NotEqual(t, ids[1], srv.requests()[5].header.Get("X-Id"), "another sink, another id")

	nd, _ := newTestSink(t, map[string]any{"url": srv.URL, "batch_mode": "ndjson"}, nil)
	require.NoError(t, nd.Consume(context.Background(), b))
	require.NoError(t, nd.Consume(context.Background(), batchOf(connector.SchemaJSON, `{"a":1}`)))
	got = srv.requests()
	require.NotEqual(t, got[6].header.Get(DefaultRequestIDHeader), got[7].header.Get(DefaultRequestIDHeader),
		"a batch and its first message alone are different requests")

	_, err := newSink(connector.Config{Plugin: connector.PluginConfig{Values: map[string]any{"url": srv.URL,
		"request_id_header": "x-ferry-signature"}}}, nil)
	require.ErrorContains(t, err, "must differ")
}

func TestVerify(t *testing.T) {
	t.Parallel()
	secret := []byte("k")
	now := time.Unix(1_700_000_000, 0)
	good := Signed{Timestamp: "1700000000", RequestID: "0123456789abcdef0123456789abcdef", Method: "POST", Path: "/hooks/a.b", Body: []byte(`{"a":1}`)}
	sig := Sign(secret, good)
	require.True(t, strings.HasPrefix(sig, "sha256="))
	require.Len(t, sig, len("sha256=")+64)
	tol := 5 * time.Minute
	require.NoError(t, Verify(secret, good, sig, tol, now))
	require.NoError(t, Verify(secret, good, sig, tol, now.Add(tol)), "at the edge of the tolerance")
	with := func(f func(*Signed)) Signed { s := good; f(&s); return s }
	for i, tc := range []struct {
		s      Signed
		sig    string
		secret []byte
		now    time.Time
		want   error
	}{
		{good, sig, secret, now.Add(tol + time.Second), ErrStaleTimestamp},  // replayed later
		{good, sig, secret, now.Add(-tol - time.Second), ErrStaleTimestamp}, // from the future
		{with(func(s *Signed) { s.Body = []byte(`{"a":2}`) }), sig, secret, now, ErrBadSignature},
		{good, sig, []byte("other"), now, ErrBadSignature},
		{with(func(s *Signed) { s.Timestamp = "1700000001" }), sig, secret, now, ErrBadSignature},
		{with(func(s *Signed) { s.RequestID = "0123456789abcdef0123456789abcdee" }), sig, secret, now, ErrBadSignature},
		{with(func(s *Signed) { s.RequestID = "" }), sig, secret, now, ErrBadSignature},
		{with(func(s *Signed) { s.Method = "PUT" }), sig, secret, now, ErrBadSignature},
		{with(func(s *Signed) { s.Path = "/hooks/a" }), sig, secret, now, ErrBadSignature},
		// The parts cannot be shifted into one another.
		{with(func(s *Signed) { s.Path, s.Body = "/hooks/a.b\n{", []byte(`"a":1}`) }), sig, secret, now, ErrBadSignature},
		{good, strings.ToUpper(sig), secret, now, ErrBadSignature},                                            // not the format
		{good, "sha256=" + strings.ToUpper(strings.TrimPrefix(sig, "sha256=")), secret, now, ErrBadSignature}, // lowercase hex only
		{good, "sha256=abc", secret, now, ErrBadSignature},
		{good, "", secret, now, ErrBadSignature},
		{with(func(s *Signed) { s.Timestamp = "" }), sig, secret, now, ErrStaleTimestamp},
		{with(func(s *Signed) { s.Timestamp = "+1700000000" }), sig, secret, now, ErrStaleTimestamp},
		{with(func(s *Signed) { s.Timestamp = "-9223372036854775808" }), sig, secret, now, ErrStaleTimestamp},
		{with(func(s *Signed) { s.Timestamp = "9223372036854775807" }), sig, secret, now, ErrStaleTimestamp},
		{with(func(s *Signed) { s.Timestamp = "soon" }), sig, secret, now, ErrStaleTimestamp},
	} {
		require.ErrorIs(t, Verify(tc.secret, tc.s, tc.sig, tol, tc.now), tc.want, "case %d", i)
	}
}

// TestNumericSecretsFromTheEnvironment is the reviewer's reproduction: a
// signing_secret that looks like a number or a bool, passed by variable,
// is the secret as typed.
func TestNumericSecretsFromTheEnvironment(t *testing.T) {
	t.Parallel()
	srv := newServer(t, nil)
	for i, v := range []string{"123456", "0042", "true", "1e3", "s3cr3t"} {
		c, err := config.ParseConnector("h.toml", []byte("type = \"sink\"\nkey = \"h\"\npath = \"http\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n[plugin_config]\nurl = \""+srv.URL+"/x\"\n"),
			config.WithEnv(config.MapEnv(map[string]string{"IGGY_CONNECTORS_SINK_H_PLUGIN_CONFIG_SIGNING_SECRET": v})))
		require.NoError(t, err, "case %d", i)
		sink, err := New(connector.Config{Key: "h", Plugin: connector.PluginConfig{Values: c.PluginConfig, Source: "h.toml"}})
		require.NoError(t, err, "case %d %q", i, v)
		require.Equal(t, []byte(v), sink.(*Sink).set.secret, "case %d", i)
		require.NoError(t, sink.Consume(context.Background(), batchOf(connector.SchemaJSON, `{"a":1}`)))
		r := srv.requests()[i]
		s := Signed{Timestamp: r.header.Get(DefaultTimestampHeader), RequestID: r.header.Get(DefaultRequestIDHeader),
			Method: r.method, Path: "/x", Body: r.body}
		require.NoError(t, Verify([]byte(v), s, r.header.Get(DefaultSignatureHeader), time.Minute, time.Now()), "case %d", i)
	}
}

func TestRetryAfterParsing(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, false}, {"12", 12 * time.Second, true}, {" 0 ", 0, true}, {"-1", 0, false}, {"1.5", 0, false},
		{fixedNow.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{fixedNow.Add(-time.Hour).Format(http.TimeFormat), 0, true}, {"tomorrow", 0, false},
	} {
		d, ok := retryAfter(tc.in, fixedNow)
		require.Equal(t, tc.ok, ok, "case %d: %q", i, tc.in)
		require.Equal(t, tc.want, d, "case %d: %q", i, tc.in)
	}
}
