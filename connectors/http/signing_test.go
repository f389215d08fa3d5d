package httpsink

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// signing = "standard-webhooks": every attempt carries webhook-id (the
// request id, the same on a retry), webhook-timestamp and one v1
// signature per secret, which a receiver written from the spec alone
// (not package webhooksig) verifies with either secret; no Ferry
// signature header is sent.
func TestStandardWebhooksSigning(t *testing.T) {
	t.Parallel()
	secrets := []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_" + base64.StdEncoding.EncodeToString([]byte("the next secret, thirty-two byte"))}
	verify := func(secret string, r *http.Request, body []byte) bool {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		require.NoError(t, err)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(r.Header.Get("webhook-id") + "." + r.Header.Get("webhook-timestamp") + "." + string(body)))
		want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
		for _, sig := range strings.Split(r.Header.Get("webhook-signature"), " ") {
			if hmac.Equal([]byte(sig), []byte(want)) {
				return true
			}
		}
		return false
	}
	var mu sync.Mutex
	var ids []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		for _, s := range secrets {
			if !verify(s, r, body) {
				http.Error(w, "bad signature", http.StatusUnauthorized)
				return
			}
		}
		if r.Header.Get("X-Ferry-Signature") != "" {
			http.Error(w, "two schemes", http.StatusBadRequest)
			return
		}
		ids = append(ids, r.Header.Get("webhook-id"))
		if len(ids) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // the first attempt fails: a retry follows
		}
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{"CUR": secrets[0], "NEXT": secrets[1]}
	s, err := newSink(connector.Config{Key: "h", Plugin: connector.PluginConfig{Values: map[string]any{
		"url": srv.URL + "/hooks", "signing": "standard-webhooks", "signing_secret": "${CUR}", "signing_secret_env": []any{"NEXT"}}}},
		func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	s.sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	require.NoError(t, s.Consume(context.Background(), batchOf(connector.SchemaJSON, `{"n":1}`)))
	require.Len(t, ids, 2)
	require.Equal(t, ids[0], ids[1], "the retry carries the same webhook-id")
	require.NotEmpty(t, ids[0])
}

func TestSigningConfigErrors(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for i, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"url": "http://x", "signing": "standard-webhooks"}, "needs signing_secret"},
		{map[string]any{"url": "http://x", "signing": "standard-webhooks", "signing_secret": "not-base64-hunter2!"}, "not base64"},
		{map[string]any{"url": "http://x", "signing_secret_env": []any{"UNSET"}}, "UNSET is not set"},
		{map[string]any{"url": "http://x", "signing": "pgp"}, "signing"},
	} {
		_, err := newSink(connector.Config{Key: "h", Plugin: connector.PluginConfig{Values: c.values}}, none)
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), c.want, "case %d", i)
		require.NotContains(t, err.Error(), "hunter2", "case %d", i)
	}
}
