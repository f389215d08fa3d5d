package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/webhooksig"
	"github.com/stretchr/testify/require"
)

// A delivery is answered 200 only after Ack; before, the request waits.
func TestAnswersOnlyAfterAck(t *testing.T) {
	t.Parallel()
	s := open(t, standardValues(), standardEnv)
	status := make(chan int, 1)
	go func() {
		st, _ := do(t, signedRequest(t, addrURL(s, "/sw"), "msg_1", []byte(`{"a":1}`), time.Now()))
		status <- st
	}()
	b, err := s.Poll(context.Background())
	require.NoError(t, err)
	require.Len(t, b.Messages, 1)
	m := b.Messages[0]
	require.Equal(t, `{"a":1}`, string(m.Payload))
	require.Equal(t, MessageID("/sw", "msg_1"), m.ID)
	require.Equal(t, connector.SchemaJSON, b.Schema)
	v, ok := m.Header("webhook_delivery_id")
	require.True(t, ok)
	require.Equal(t, "msg_1", v.String())
	select {
	case st := <-status:
		t.Fatalf("answered %d before the batch was acknowledged", st)
	case <-time.After(200 * time.Millisecond):
	}
	s.Nack(context.Background(), b, context.DeadlineExceeded)
	select {
	case st := <-status:
		t.Fatalf("answered %d after a Nack (the runtime sends the batch again)", st)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, s.Ack(context.Background(), b))
	require.Equal(t, http.StatusOK, <-status)

	// The same delivery again: 200, nothing new to poll.
	st, _ := do(t, signedRequest(t, addrURL(s, "/sw"), "msg_1", []byte(`{"a":1}`), time.Now()))
	require.Equal(t, http.StatusOK, st)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = s.Poll(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a duplicate was queued")
	// And its state remembers it: a source opened from it answers the
	// duplicate without a message.
	s2, err := build(t, standardValues("address", "127.0.0.1:0"), standardEnv)
	require.NoError(t, err)
	require.NoError(t, s2.Open(context.Background(), b.State))
	defer s2.Close(context.Background())
	st, _ = do(t, signedRequest(t, addrURL(s2, "/sw"), "msg_1", []byte(`{"a":1}`), time.Now()))
	require.Equal(t, http.StatusOK, st)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	_, err = s2.Poll(ctx2)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a duplicate after a restart was queued")
}

// A retry of a delivery still waiting joins it: one message, both
// answered once it is stored.
func TestRetryWhileWaitingJoins(t *testing.T) {
	t.Parallel()
	s := open(t, standardValues(), standardEnv)
	var wg sync.WaitGroup
	statuses := make([]int, 3)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = do(t, signedRequest(t, addrURL(s, "/sw"), "msg_same", []byte(`{}`), time.Now()))
		}()
	}
	got := ackAll(t, s)
	wg.Wait()
	require.Equal(t, []int{200, 200, 200}, statuses)
	require.Len(t, got, 1)
}

func TestStatuses(t *testing.T) {
	t.Parallel()
	s := open(t, standardValues("max_body_size", "1KiB", "wait_timeout", "300ms", "retry_after", "2s"), standardEnv)
	now := time.Now()
	cases := []struct {
		name  string
		req   func() *http.Request
		want  int
		retry string
	}{
		{"unknown path", func() *http.Request { return signedRequest(t, addrURL(s, "/nope"), "a", []byte(`{}`), now) }, 404, ""},
		{"wrong method", func() *http.Request {
			r := signedRequest(t, addrURL(s, "/sw"), "a", []byte(`{}`), now)
			r.Method = http.MethodPut
			return r
		}, 405, ""},
		{"over the limit by Content-Length", func() *http.Request {
			return signedRequest(t, addrURL(s, "/sw"), "a", []byte(`"`+strings.Repeat("x", 2000)+`"`), now)
		}, 413, ""},
		{"over the limit, chunked", func() *http.Request {
			r := signedRequest(t, addrURL(s, "/sw"), "a", nil, now)
			r.Body = readCloser{strings.NewReader(`"` + strings.Repeat("x", 2000) + `"`)}
			r.ContentLength = -1
			return r
		}, 413, ""},
		{"empty body", func() *http.Request { return signedRequest(t, addrURL(s, "/sw"), "a", nil, now) }, 400, ""},
		{"not JSON", func() *http.Request { return signedRequest(t, addrURL(s, "/sw"), "a", []byte(`{nope`), now) }, 400, ""},
		{"bad signature", func() *http.Request {
			r := signedRequest(t, addrURL(s, "/sw"), "a", []byte(`{}`), now)
			r.Header.Set("webhook-signature", "v1,"+strings.Repeat("A", 43)+"=")
			return r
		}, 401, ""},
		{"altered body", func() *http.Request {
			r := signedRequest(t, addrURL(s, "/sw"), "a", []byte(`{}`), now)
			r.Body, r.ContentLength = readCloser{strings.NewReader(`{"x":1}`)}, 7
			return r
		}, 401, ""},
		{"stale signature", func() *http.Request {
			return signedRequest(t, addrURL(s, "/sw"), "a", []byte(`{}`), now.Add(-10*time.Minute))
		}, 401, ""},
		{"no signature", func() *http.Request {
			r := signedRequest(t, addrURL(s, "/sw"), "a", []byte(`{}`), now)
			r.Header.Del("webhook-signature")
			return r
		}, 401, ""},
		{"not stored in time", func() *http.Request { return signedRequest(t, addrURL(s, "/sw"), "slow", []byte(`{}`), now) }, 503, "2"},
	}
	for i, c := range cases {
		st, retry := do(t, c.req())
		require.Equal(t, c.want, st, "case %d: %s", i, c.name)
		require.Equal(t, c.retry, retry, "case %d: %s", i, c.name)
	}
	// The delivery that timed out is still queued: once stored, its retry
	// is a duplicate.
	got := ackAll(t, s)
	m := <-got
	require.Equal(t, MessageID("/sw", "slow"), m.ID)
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.inflight) == 0
	}, time.Minute, 10*time.Millisecond)
	st, _ := do(t, signedRequest(t, addrURL(s, "/sw"), "slow", []byte(`{}`), now))
	require.Equal(t, 200, st)
	require.Len(t, got, 0)
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

// With max_pending requests waiting, the next answers 429 with
// Retry-After at once.
func TestBackPressure(t *testing.T) {
	t.Parallel()
	s := open(t, standardValues("max_pending", int64(3), "wait_timeout", "1m"), standardEnv)
	results := make(chan int, 3)
	for i := range 3 {
		go func() {
			st, _ := do(t, signedRequest(t, addrURL(s, "/sw"), "w"+itoa(i), []byte(`{}`), time.Now()))
			results <- st
		}()
	}
	require.Eventually(t, func() bool { return len(s.slots) == 3 }, time.Minute, 5*time.Millisecond)
	st, retry := do(t, signedRequest(t, addrURL(s, "/sw"), "over", []byte(`{}`), time.Now()))
	require.Equal(t, http.StatusTooManyRequests, st)
	require.Equal(t, "1", retry)
	ackAll(t, s)
	for range 3 {
		require.Equal(t, 200, <-results)
	}
}

// Close answers the waiting requests 503: their providers retry.
func TestCloseAnswersWaitingRequests(t *testing.T) {
	t.Parallel()
	s := open(t, standardValues("wait_timeout", "1m"), standardEnv)
	status := make(chan int, 1)
	go func() {
		st, _ := do(t, signedRequest(t, addrURL(s, "/sw"), "x", []byte(`{}`), time.Now()))
		status <- st
	}()
	_, err := s.Poll(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.Close(context.Background()))
	require.Equal(t, http.StatusServiceUnavailable, <-status)
}

// Each scheme verifies its provider's requests and takes its delivery id.
func TestSchemes(t *testing.T) {
	t.Parallel()
	gh, stripe, hm := []byte("gh-secret"), []byte("whsec_stripe"), []byte("hm")
	env := map[string]string{"GH": "gh-secret", "GH_OLD": "gh-old", "STRIPE": string(stripe), "HM": "hm", "TOKEN": "tok", "BASIC": "u:p"}
	s := open(t, map[string]any{
		"forward_headers": []any{"X-GitHub-Event"},
		"endpoints": []any{
			endpointTable("path", "/gh", "verify", "github", "secret_env", []any{"GH_OLD", "GH"}),
			endpointTable("path", "/stripe", "verify", "stripe", "secret", "${STRIPE}"),
			endpointTable("path", "/hmac", "verify", "hmac", "secret", "${HM}", "header", "X-Sig", "algorithm", "sha512", "encoding", "base64", "prefix", "v=", "id_header", "X-Id"),
			endpointTable("path", "/bearer", "verify", "bearer", "secret", "${TOKEN}", "format", "raw"),
			endpointTable("path", "/basic", "verify", "basic", "secret_env", []any{"BASIC"}, "format", "form", "topic", "forms"),
			endpointTable("path", "/open", "verify", "none"),
		},
	}, env)
	got := ackAll(t, s)
	post := func(path string, body string, h map[string]string) int {
		req, err := http.NewRequest(http.MethodPost, addrURL(s, path), strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		st, _ := do(t, req)
		return st
	}
	body := `{"id":"evt_9","n":1}`
	require.Equal(t, 200, post("/gh", body, map[string]string{"X-Hub-Signature-256": webhooksig.GitHub.Sign(gh, []byte(body)), "X-GitHub-Delivery": "d-1", "X-GitHub-Event": "push"}))
	m := <-got
	require.Equal(t, MessageID("/gh", "d-1"), m.ID)
	ev, _ := m.Header("X-GitHub-Event")
	require.Equal(t, "push", ev.String())
	require.Equal(t, 401, post("/gh", body, map[string]string{"X-Hub-Signature-256": webhooksig.GitHub.Sign([]byte("x"), []byte(body))}))

	require.Equal(t, 200, post("/stripe", body, map[string]string{"Stripe-Signature": webhooksig.SignStripe(stripe, time.Now(), []byte(body))}))
	require.Equal(t, MessageID("/stripe", "evt_9"), (<-got).ID)
	require.Equal(t, 401, post("/stripe", body, map[string]string{"Stripe-Signature": webhooksig.SignStripe(stripe, time.Now().Add(-time.Hour), []byte(body))}))

	h := webhooksig.HMAC{Algorithm: "sha512", Encoding: "base64", Prefix: "v="}
	require.Equal(t, 200, post("/hmac", body, map[string]string{"X-Sig": h.Sign(hm, []byte(body)), "X-Id": "h-1"}))
	require.Equal(t, MessageID("/hmac", "h-1"), (<-got).ID)
	require.Equal(t, 200, post("/hmac", body, map[string]string{"X-Sig": h.Sign(hm, []byte(body)), "X-Id": "h-1"}), "duplicate")

	require.Equal(t, 200, post("/bearer", "raw bytes", map[string]string{"Authorization": "Bearer tok"}))
	require.Equal(t, "raw bytes", string((<-got).Payload))
	require.Equal(t, 401, post("/bearer", "x", map[string]string{"Authorization": "Bearer nope"}))

	req, _ := http.NewRequest(http.MethodPost, addrURL(s, "/basic"), strings.NewReader("a=1&b=2&b=3"))
	req.SetBasicAuth("u", "p")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	st, _ := do(t, req)
	require.Equal(t, 200, st)
	m = <-got
	require.Equal(t, "forms", m.Route)
	var form map[string]any
	require.NoError(t, json.Unmarshal(m.Payload, &form))
	require.Equal(t, map[string]any{"a": "1", "b": []any{"2", "3"}}, form)
	require.Equal(t, 415, post("/basic", "a=1", map[string]string{"Authorization": "Basic dTpw", "Content-Type": "text/plain"}))
	require.Equal(t, 401, post("/basic", "a=1", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}))

	require.Equal(t, 200, post("/open", `[1]`, nil))
	require.Equal(t, `[1]`, string((<-got).Payload))
	require.Equal(t, 200, post("/open", `[1]`, nil))
	require.Equal(t, `[1]`, string((<-got).Payload), "no delivery id: not deduplicated")
}

// A Standard Webhooks request replayed within the tolerance is a
// duplicate (200, nothing sent); after it, it is refused as stale.
func TestReplay(t *testing.T) {
	t.Parallel()
	s := open(t, standardValues(), standardEnv)
	got := ackAll(t, s)
	at := time.Now()
	body := []byte(`{"v":1}`)
	captured := signedRequest(t, addrURL(s, "/sw"), "msg_replay", body, at)
	st, _ := do(t, captured)
	require.Equal(t, 200, st)
	<-got
	replay := signedRequest(t, addrURL(s, "/sw"), "msg_replay", body, at)
	st, _ = do(t, replay)
	require.Equal(t, 200, st)
	require.Len(t, got, 0, "a replay was stored")
	s.now = func() time.Time { return at.Add(6 * time.Minute) }
	st, _ = do(t, signedRequest(t, addrURL(s, "/sw"), "msg_replay", body, at))
	require.Equal(t, 401, st)
	require.Len(t, got, 0)
}

// The 401 is logged with the reason, never the secret.
func TestRefusalLogHasNoSecret(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	values := map[string]any{"address": "127.0.0.1:0", "endpoints": []any{endpointTable("path", "/gh", "verify", "github", "secret", "super-secret-value")}}
	s, err := newSource(connector.Config{Key: "k", Plugin: connector.PluginConfig{Values: values}, Logger: newLogger(&buf)}, func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	require.NoError(t, s.Open(context.Background(), nil))
	defer s.Close(context.Background())
	body := []byte(`{}`)
	good := webhooksig.GitHub.Sign([]byte("super-secret-value"), body)
	req, _ := http.NewRequest(http.MethodPost, addrURL(s, "/gh"), bytes.NewReader(body))
	req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
	st, _ := do(t, req)
	require.Equal(t, 401, st)
	log := buf.String()
	require.Contains(t, log, "verification failed")
	require.Contains(t, log, "/gh")
	require.NotContains(t, log, "super-secret-value")
	require.NotContains(t, log, good[7:])
}
