package webhook

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ferryhq/ferry/webhooksig"
)

// The state decoder takes whatever the state file holds: no panic, and
// what it accepts encodes back to an equal window.
func FuzzState(f *testing.F) {
	w := newWindow(time.Hour, 100)
	now := time.Unix(1700000000, 0)
	w.add(MessageID("/a", "1"), now)
	w.add(MessageID("/a", "2"), now)
	f.Add(w.encode())
	f.Add([]byte("FWH1"))
	f.Add([]byte("FWH1\x00\x00\x00\x01"))
	f.Add([]byte("FWH1\xff\xff\xff\xff"))
	f.Add([]byte(`{"json":"state"}`))
	f.Fuzz(func(t *testing.T, state []byte) {
		w := newWindow(100*365*24*time.Hour, 1_000_000)
		if err := w.decode(state, now); err != nil {
			return
		}
		again := newWindow(100*365*24*time.Hour, 1_000_000)
		if err := again.decode(w.encode(), now); err != nil {
			t.Fatalf("a decoded window does not decode after encoding: %v", err)
		}
		if again.len() != w.len() {
			t.Fatalf("%d entries, %d after a round trip", w.len(), again.len())
		}
	})
}

// Requests with any method, path, headers and body: no panic, and only a
// correctly signed JSON delivery is queued.
func FuzzRequest(f *testing.F) {
	values := map[string]any{"address": "127.0.0.1:0", "forward_headers": []any{"X-Fwd"}, "endpoints": []any{
		endpointTable("path", "/sw", "verify", "standard-webhooks", "secret", testSecret),
		endpointTable("path", "/form", "verify", "none", "format", "form"),
		endpointTable("path", "/stripe", "verify", "stripe", "secret", "whsec_x"),
	}}
	s, err := build(f, values, nil)
	if err != nil {
		f.Fatal(err)
	}
	key := testKey(f)
	now := time.Now()
	f.Add("POST", "/sw", "msg_1", "", webhooksig.SignStandard(key, "msg_1", now, []byte(`{}`)), "application/json", `{}`)
	f.Add("POST", "/form", "", "", "", "application/x-www-form-urlencoded", "a=1&a=2&b=%zz")
	f.Add("POST", "/stripe", "", "", webhooksig.SignStripe([]byte("whsec_x"), now, []byte(`{"id":1}`)), "", `{"id":1}`)
	f.Add("GET", "/sw", "", "", "", "", "")
	f.Add("POST", "/nope", "\x00", "+1", "v1,,,", "multipart/form-data; boundary=x", "\xff\xfe")
	f.Fuzz(func(t *testing.T, method, path, id, ts, sig, ctype, body string) {
		req, err := http.NewRequestWithContext(context.Background(), method, "http://x/", bytes.NewReader([]byte(body)))
		if err != nil {
			return
		}
		req.URL.Path = path
		req.Header.Set("webhook-id", id)
		if ts == "" {
			ts = "1700000000"
		}
		req.Header.Set("webhook-timestamp", ts)
		req.Header.Set("webhook-signature", sig)
		req.Header.Set("Stripe-Signature", sig)
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("X-Fwd", id)
		ctx, cancel := context.WithTimeout(req.Context(), time.Millisecond)
		defer cancel()
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req.WithContext(ctx)) // nothing acknowledges: a queued delivery times out
		// A request cut short by its context writes nothing (the recorder
		// then shows 200); any answer must not be a 2xx.
		if rec.Body.Len() > 0 && rec.Code/100 == 2 {
			t.Fatalf("%s %s answered %d without being stored", method, path, rec.Code)
		}
		s.mu.Lock()
		s.queue, s.inflight = nil, map[[16]byte]*delivery{}
		s.mu.Unlock()
	})
}
