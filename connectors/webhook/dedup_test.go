package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/webhooksig"
	"github.com/stretchr/testify/require"
)

// testClock is a source's clock that the test moves (safe to read from
// the handlers' goroutines).
type testClock struct{ ns atomic.Int64 }

func (c *testClock) now() time.Time   { return time.Unix(0, c.ns.Load()) }
func (c *testClock) set(t time.Time)  { c.ns.Store(t.UnixNano()) }
func newClock(t time.Time) *testClock { c := &testClock{}; c.set(t); return c }

// openClocked opens a source whose clock is c, from state.
func openClocked(t *testing.T, values map[string]any, env map[string]string, c *testClock, state []byte) *Source {
	t.Helper()
	values["address"] = "127.0.0.1:0"
	s, err := build(t, values, env)
	require.NoError(t, err)
	s.now = c.now // before Open: no handler runs yet
	require.NoError(t, s.Open(context.Background(), state))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// ghValues is a source with one GitHub endpoint /gh (a delivery id in
// X-GitHub-Delivery and no timestamp, so moving the clock by hours keeps
// its signatures valid) and the given settings.
func ghValues(extra ...any) map[string]any {
	v := map[string]any{"endpoints": []any{endpointTable("path", "/gh", "verify", "github", "secret_env", []any{"GH"})}}
	for i := 0; i < len(extra); i += 2 {
		v[extra[i].(string)] = extra[i+1]
	}
	return v
}

var ghEnv = map[string]string{"GH": "gh-secret"}

// deliverGitHub posts a signed GitHub delivery with id and returns the
// status and the answer's "status" ("stored" or "duplicate").
func deliverGitHub(t *testing.T, s *Source, id string) (int, string) {
	t.Helper()
	body := `{"delivery":"` + id + `"}`
	req, err := http.NewRequest(http.MethodPost, addrURL(s, "/gh"), bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("X-Hub-Signature-256", hmacHex("gh-secret", body))
	req.Header.Set("X-GitHub-Delivery", id)
	return postAnswer(t, req)
}

func postAnswer(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var a map[string]string
	require.NoError(t, json.Unmarshal(b, &a), "answer %q", b)
	if res.StatusCode/100 == 2 {
		return res.StatusCode, a["status"]
	}
	return res.StatusCode, a["error"]
}

// stored says a delivery was answered "stored" and is the one message in
// got (a message is in got before its request is answered: ackAll
// forwards a batch before acknowledging it).
func requireStored(t *testing.T, got <-chan connector.Message, id string, st int, answer string) {
	t.Helper()
	require.Equal(t, http.StatusOK, st, id)
	require.Equal(t, "stored", answer, "%s should be new", id)
	require.Len(t, got, 1, id)
	require.Equal(t, MessageID("/gh", id), (<-got).ID)
}

func requireDuplicate(t *testing.T, got <-chan connector.Message, id string, st int, answer string) {
	t.Helper()
	require.Equal(t, http.StatusOK, st, id)
	require.Equal(t, "duplicate", answer, "%s should be remembered", id)
	require.Len(t, got, 0, "%s was stored twice", id)
}

// dedup_window: a delivery id is remembered for the window and forgotten
// after it, with no other delivery in between to expire it; a replay
// after the window is a new message (with the same message id, derived
// from the delivery id), remembered from then.
func TestDedupWindowForgets(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	c := newClock(t0)
	s := openClocked(t, ghValues("dedup_window", "1h"), ghEnv, c, nil)
	got := ackAll(t, s)

	st, a := deliverGitHub(t, s, "d-1")
	requireStored(t, got, "d-1", st, a)
	c.set(t0.Add(30 * time.Minute))
	st, a = deliverGitHub(t, s, "d-1")
	requireDuplicate(t, got, "d-1", st, a)
	c.set(t0.Add(time.Hour - time.Second))
	st, a = deliverGitHub(t, s, "d-1")
	requireDuplicate(t, got, "d-1", st, a)

	c.set(t0.Add(time.Hour + time.Second))
	st, a = deliverGitHub(t, s, "d-1")
	requireStored(t, got, "d-1", st, a)
	// Remembered again, from now.
	c.set(t0.Add(2 * time.Hour))
	st, a = deliverGitHub(t, s, "d-1")
	requireDuplicate(t, got, "d-1", st, a)
}

// The window in the source's state expires too: a source opened from a
// batch's state after the window takes the replay as new, one opened
// within it does not.
func TestDedupWindowForgetsAcrossRestarts(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	c := newClock(t0)
	s := openClocked(t, ghValues("dedup_window", "1h"), ghEnv, c, nil)
	done := make(chan int, 1)
	go func() { st, _ := deliverGitHub(t, s, "d-1"); done <- st }()
	b, err := s.Poll(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.Ack(context.Background(), b))
	require.Equal(t, http.StatusOK, <-done)
	state := b.State

	within := openClocked(t, ghValues("dedup_window", "1h"), ghEnv, newClock(t0.Add(59*time.Minute)), state)
	gotWithin := ackAll(t, within)
	st, a := deliverGitHub(t, within, "d-1")
	requireDuplicate(t, gotWithin, "d-1", st, a)

	after := openClocked(t, ghValues("dedup_window", "1h"), ghEnv, newClock(t0.Add(61*time.Minute)), state)
	gotAfter := ackAll(t, after)
	st, a = deliverGitHub(t, after, "d-1")
	requireStored(t, gotAfter, "d-1", st, a)
}

// dedup_max_entries: past it the oldest ids are forgotten first; a replay
// of a forgotten one is a new message (and forgets the next oldest), one
// of a remembered one is not stored again. The state holds at most the
// maximum.
func TestDedupMaxEntriesEvicts(t *testing.T) {
	t.Parallel()
	c := newClock(time.Unix(1_800_000_000, 0))
	s := openClocked(t, ghValues("dedup_max_entries", 3), ghEnv, c, nil)
	got := ackAll(t, s)
	for i := 1; i <= 4; i++ {
		id := "d-" + strconv.Itoa(i)
		st, a := deliverGitHub(t, s, id)
		requireStored(t, got, id, st, a)
	}
	// d-2, d-3 and d-4 are remembered; d-1 is not.
	for _, id := range []string{"d-4", "d-3", "d-2"} {
		st, a := deliverGitHub(t, s, id)
		requireDuplicate(t, got, id, st, a)
	}
	st, a := deliverGitHub(t, s, "d-1")
	requireStored(t, got, "d-1", st, a)
	// Now d-3, d-4, d-1: d-2 went.
	st, a = deliverGitHub(t, s, "d-1")
	requireDuplicate(t, got, "d-1", st, a)
	st, a = deliverGitHub(t, s, "d-2")
	requireStored(t, got, "d-2", st, a)

	s.mu.Lock()
	state := s.win.encode()
	s.mu.Unlock()
	require.Len(t, state, len(stateMagic)+4+3*entrySize, "the state holds dedup_max_entries ids")
	// A source restored from it remembers exactly those three.
	s2 := openClocked(t, ghValues("dedup_max_entries", 3), ghEnv, c, state)
	got2 := ackAll(t, s2)
	for _, id := range []string{"d-4", "d-1", "d-2"} {
		st, a := deliverGitHub(t, s2, id)
		requireDuplicate(t, got2, id, st, a)
	}
	st, a = deliverGitHub(t, s2, "d-3")
	requireStored(t, got2, "d-3", st, a)
}

// A non-default tolerance: a Standard Webhooks endpoint with 30s and a
// Stripe one with 10m accept timestamps up to that far from now, either
// way, and refuse (401) beyond it; an endpoint with the default (5m)
// refuses what the 10m one accepts.
func TestNonDefaultTolerance(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	stripeSecret := []byte("whsec_stripe_test")
	env := map[string]string{"SW_SECRET": testSecret, "STRIPE": string(stripeSecret)}
	s := openClocked(t, map[string]any{"endpoints": []any{
		endpointTable("path", "/sw30", "verify", "standard-webhooks", "secret_env", []any{"SW_SECRET"}, "tolerance", "30s"),
		endpointTable("path", "/sw", "verify", "standard-webhooks", "secret_env", []any{"SW_SECRET"}),
		endpointTable("path", "/stripe10m", "verify", "stripe", "secret_env", []any{"STRIPE"}, "tolerance", "10m"),
	}}, env, newClock(now), nil)
	got := ackAll(t, s)
	n := 0
	standard := func(path string, signedAt time.Time) int {
		n++
		st, _ := do(t, signedRequest(t, addrURL(s, path), "msg_tol_"+strconv.Itoa(n), []byte(`{}`), signedAt))
		return st
	}
	stripe := func(signedAt time.Time) int {
		n++
		body := []byte(`{"id":"evt_tol_` + strconv.Itoa(n) + `"}`)
		req, err := http.NewRequest(http.MethodPost, addrURL(s, "/stripe10m"), bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set(webhooksig.StripeHeader, webhooksig.SignStripe(stripeSecret, signedAt, body))
		st, _ := do(t, req)
		return st
	}
	for _, c := range []struct {
		name string
		st   int
		want int
	}{
		{"30s: 30s old", standard("/sw30", now.Add(-30*time.Second)), 200},
		{"30s: 30s ahead", standard("/sw30", now.Add(30*time.Second)), 200},
		{"30s: 31s old", standard("/sw30", now.Add(-31*time.Second)), 401},
		{"30s: 31s ahead", standard("/sw30", now.Add(31*time.Second)), 401},
		{"30s: 2m old (the default would take it)", standard("/sw30", now.Add(-2*time.Minute)), 401},
		{"default: 2m old", standard("/sw", now.Add(-2*time.Minute)), 200},
		{"default: 6m old", standard("/sw", now.Add(-6*time.Minute)), 401},
		{"10m: 6m old", stripe(now.Add(-6 * time.Minute)), 200},
		{"10m: 10m old", stripe(now.Add(-10 * time.Minute)), 200},
		{"10m: 10m ahead", stripe(now.Add(10 * time.Minute)), 200},
		{"10m: 10m1s old", stripe(now.Add(-10*time.Minute - time.Second)), 401},
		{"10m: 11m ahead", stripe(now.Add(11 * time.Minute)), 401},
	} {
		require.Equal(t, c.want, c.st, c.name)
	}
	require.Len(t, got, 6, "the six accepted deliveries were stored")
}
