package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// standardWebhookVerify checks a request the way the Standard Webhooks
// spec says a receiver does, written here from the spec (not with
// Ferry's signing code): HMAC-SHA256 with the base64 secret after
// "whsec_", over "id.timestamp.body", base64, as one of the
// space-separated "v1,<sig>" values; the timestamp within five minutes.
func standardWebhookVerify(secret string, r *http.Request, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(r.Header.Get("webhook-signature")) {
		if v, ok := strings.CutPrefix(sig, "v1,"); ok && hmac.Equal([]byte(v), []byte(want)) {
			return true
		}
	}
	return false
}

// A --webhook hook sends each message, signed, to a receiver that
// verifies it; --from now skips what the topic already held; a receiver
// that refuses a request has it retried.
func TestHookWebhookDeliversSignedRequests(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a hook secret of 32 bytes or so."))
	t.Setenv("FERRY_TEST_HOOK_SECRET", secret)
	var mu sync.Mutex
	var payloads []string
	bad, refusedOnce := 0, false
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if !standardWebhookVerify(secret, r, body) {
			bad++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var m struct {
			Payload struct {
				Data []byte `json:"data"` // a hook's payloads are raw bytes: base64
			} `json:"payload"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			bad++
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		if strings.Contains(string(m.Payload.Data), "second") && !refusedOnce {
			refusedOnce = true
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		payloads = append(payloads, string(m.Payload.Data))
	}))
	defer receiver.Close()

	dir := t.TempDir()
	live := startLiveRuntime(t, dir)
	hook, _ := hookCLI(t, live)
	_, err := hook("create", "placeholder", "orders", "true") // makes hooks/orders
	require.NoError(t, err)
	live.send(t, "hooks", "orders", `{"before":true}`)
	out, err := hook("create", "notify", "orders", "--webhook", receiver.URL+"/in", "--secret-env", "FERRY_TEST_HOOK_SECRET", "--from", "now")
	require.NoError(t, err, out)
	require.Contains(t, out, "sends each message on hooks/orders to "+receiver.URL+"/in")
	require.NotContains(t, out, secret)

	live.send(t, "hooks", "orders", `{"n":"first"}`, `{"n":"second"}`, `{"n":"third"}`)
	defer func() {
		if t.Failed() {
			got, _ := hook("get", "notify")
			mu.Lock()
			t.Logf("hook:\n%s\nreceived %q, %d bad", got, payloads, bad)
			mu.Unlock()
		}
	}()
	waitFor(t, "three signed deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(payloads) >= 3
	})
	mu.Lock()
	got3, bad3 := append([]string(nil), payloads...), bad
	mu.Unlock()
	require.Equal(t, []string{`{"n":"first"}`, `{"n":"second"}`, `{"n":"third"}`}, got3, "in order, each once, the refused one retried")
	require.Zero(t, bad3, "every request verified")

	got, err := hook("get", "notify", "--json")
	require.NoError(t, err)
	require.NotContains(t, got, secret, "the secret never reaches the API's answers")
	var view map[string]any
	require.NoError(t, json.Unmarshal([]byte(got), &view))
	require.Equal(t, receiver.URL+"/in", view["url"])
	require.Equal(t, "standard-webhooks", view["signing"])

	_, err = hook("logs", "notify")
	require.ErrorContains(t, err, "keeps no run log")
	_, err = hook("create", "both", "orders", "true", "--webhook", receiver.URL)
	require.ErrorContains(t, err, "not both")
	_, err = hook("create", "ftp", "orders", "--webhook", "ftp://example.com")
	require.ErrorContains(t, err, "want an http:// or https:// URL")
}
