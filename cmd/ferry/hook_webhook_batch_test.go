package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/runtime"
)

// batchRequest is one request a receiver took: its webhook-id, its
// Content-Type and its body.
type batchRequest struct {
	id, contentType string
	body            []byte
}

// hookPayloads decodes an NDJSON body of http sink envelopes into their
// payloads (a hook's payloads are raw bytes: base64 in payload.data); it
// fails on a line that is not an envelope or a body that does not end in
// a newline.
func hookPayloads(t *testing.T, body []byte) []string {
	t.Helper()
	require.True(t, bytes.HasSuffix(body, []byte("\n")), "NDJSON: every line ends in \\n: %q", body)
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		var env struct {
			Metadata struct {
				Stream string `json:"iggy_stream"`
				Topic  string `json:"iggy_topic"`
			} `json:"metadata"`
			Payload struct {
				Data     []byte `json:"data"`
				Encoding string `json:"iggy_payload_encoding"`
			} `json:"payload"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &env), "line %q", line)
		require.Equal(t, "hooks", env.Metadata.Stream)
		require.Equal(t, "orders", env.Metadata.Topic)
		require.Equal(t, "base64", env.Payload.Encoding)
		out = append(out, string(env.Payload.Data))
	}
	return out
}

// `ferry hook create NAME TOPIC --webhook URL --per-batch` sends each
// batch as one NDJSON request, signed (Standard Webhooks), to a receiver
// that verifies it with its own implementation of the spec; a request the
// receiver refuses (503) is sent again with the same webhook-id and body.
func TestHookWebhookPerBatchSendsSignedNDJSON(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the per-batch hook's secret key!"))
	t.Setenv("FERRY_TEST_BATCH_HOOK_SECRET", secret)
	var mu sync.Mutex
	var taken, refused []batchRequest
	bad := 0
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if !standardWebhookVerify(secret, r, body) {
			bad++
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		req := batchRequest{id: r.Header.Get("webhook-id"), contentType: r.Header.Get("Content-Type"), body: body}
		if len(refused) == 0 {
			refused = append(refused, req)
			http.Error(w, "busy, try again", http.StatusServiceUnavailable)
			return
		}
		taken = append(taken, req)
	}))
	defer receiver.Close()

	live := startLiveRuntime(t, t.TempDir())
	hook, _ := hookCLI(t, live)
	_, err := hook("create", "placeholder", "orders", "true") // makes hooks/orders
	require.NoError(t, err)
	out, err := hook("create", "batches", "orders", "--webhook", receiver.URL+"/batch", "--per-batch", "--secret-env", "FERRY_TEST_BATCH_HOOK_SECRET")
	require.NoError(t, err, out)
	require.NotContains(t, out, secret)

	want := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`, `{"n":5}`}
	live.send(t, "hooks", "orders", want...)
	defer func() {
		if t.Failed() {
			got, _ := hook("get", "batches")
			mu.Lock()
			t.Logf("hook:\n%s\n%d taken, %d refused, %d bad", got, len(taken), len(refused), bad)
			mu.Unlock()
		}
	}()
	var payloads []string
	waitFor(t, "the five messages in NDJSON requests", func() bool {
		mu.Lock()
		defer mu.Unlock()
		payloads = payloads[:0]
		for _, r := range taken {
			payloads = append(payloads, hookPayloads(t, r.body)...)
		}
		return len(payloads) >= len(want)
	})
	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, bad, "every request verified")
	require.Equal(t, want, payloads, "in order, each once")
	require.Less(t, len(taken), len(want), "one request per batch, not per message")
	most := 0
	for _, r := range taken {
		require.Equal(t, "application/x-ndjson", r.contentType)
		require.NotEmpty(t, r.id)
		most = max(most, len(hookPayloads(t, r.body)))
	}
	require.GreaterOrEqual(t, most, 2, "a request carried several messages")
	// The refused request came again: same webhook-id (receivers dedupe
	// retries by it), same body.
	require.Len(t, refused, 1)
	require.Equal(t, refused[0].id, taken[0].id)
	require.Equal(t, refused[0].body, taken[0].body)
}

// A --webhook hook whose receiver answers 400 (a permanent refusal) sends
// that message to the hook's dead-letter topic at once, with the reason,
// and goes on with the next messages.
func TestHookWebhookPermanentRefusalDeadLetters(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the dead-letter hook's secret..."))
	t.Setenv("FERRY_TEST_DLQ_HOOK_SECRET", secret)
	var mu sync.Mutex
	var delivered []string
	poisonHits, bad := 0, 0
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
				Data []byte `json:"data"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			bad++
			http.Error(w, "bad body", http.StatusUnprocessableEntity)
			return
		}
		if strings.Contains(string(m.Payload.Data), "poison") {
			poisonHits++
			http.Error(w, "order 7 has no customer", http.StatusBadRequest)
			return
		}
		delivered = append(delivered, string(m.Payload.Data))
	}))
	defer receiver.Close()

	live := startLiveRuntime(t, t.TempDir())
	hook, _ := hookCLI(t, live)
	_, err := hook("create", "placeholder", "orders", "true") // makes hooks/orders
	require.NoError(t, err)
	out, err := hook("create", "strict", "orders", "--webhook", receiver.URL+"/in", "--secret-env", "FERRY_TEST_DLQ_HOOK_SECRET")
	require.NoError(t, err, out)
	require.Contains(t, out, "hooks/hook-strict_dead_letter")

	live.send(t, "hooks", "orders", `{"n":"good-1"}`, `{"n":"poison"}`, `{"n":"good-2"}`)
	defer func() {
		if t.Failed() {
			got, _ := hook("get", "strict")
			mu.Lock()
			t.Logf("hook:\n%s\ndelivered %q, poison hits %d, %d bad", got, delivered, poisonHits, bad)
			mu.Unlock()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := iggy.Dial(ctx, live.rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	var letters []iggy.Message
	waitFor(t, "the refused message in hooks/hook-strict_dead_letter", func() bool {
		r, err := cl.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("hooks"),
			Topic: iggy.NamedID("hook-strict_dead_letter"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
		if err != nil {
			return false // the topic is made with the first dead letter
		}
		letters = r.Messages
		return len(letters) > 0
	})
	waitFor(t, "the good messages delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) >= 2
	})
	require.Len(t, letters, 1, "only the refused message is dead-lettered")
	dl := letters[0]
	require.Equal(t, `{"n":"poison"}`, string(dl.Payload))
	str := func(key string) string {
		v, ok := header.Get(dl.Headers, key)
		require.True(t, ok, "dead letter header %s", key)
		return v.String()
	}
	reason := str(runtime.HeaderDLQError)
	require.Contains(t, reason, "answered 400 Bad Request", "the reason is the receiver's answer")
	require.Contains(t, reason, "order 7 has no customer")
	require.NotContains(t, reason, secret)
	require.Equal(t, "hooks", str(runtime.HeaderDLQStream))
	require.Equal(t, "orders", str(runtime.HeaderDLQTopic))
	off, ok := header.Get(dl.Headers, runtime.HeaderDLQOffset)
	require.True(t, ok)
	require.Equal(t, header.Uint64Value(1), off, "the poison message's offset on hooks/orders")

	mu.Lock()
	require.Equal(t, []string{`{"n":"good-1"}`, `{"n":"good-2"}`}, delivered, "the others delivered, in order")
	require.Equal(t, 1, poisonHits, "a permanent refusal is not retried")
	require.Zero(t, bad, "every request verified")
	mu.Unlock()

	var view map[string]any
	waitFor(t, "hook get counts the dead letter", func() bool {
		got, err := hook("get", "strict", "--json")
		if err != nil || json.Unmarshal([]byte(got), &view) != nil {
			return false
		}
		return view["messages_dead_lettered"] == float64(1)
	})
	require.Equal(t, "hooks/hook-strict_dead_letter", view["dead_letter"])
}
