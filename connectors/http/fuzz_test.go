package httpsink

import (
	"strings"
	"testing"
	"time"
)

// FuzzVerify feeds arbitrary header values, methods, paths and bodies to
// Verify: it must not panic, and must accept only what Sign produced for
// that request (Verify allows spaces around the signature).
func FuzzVerify(f *testing.F) {
	secret := []byte("fuzz-secret")
	now := time.Unix(1_700_000_000, 0)
	good := Signed{Timestamp: "1700000000", RequestID: "id", Method: "POST", Path: "/x", Body: []byte("body")}
	f.Add(good.Timestamp, good.RequestID, good.Method, good.Path, Sign(secret, good), good.Body)
	f.Add("1700000000", "id", "POST", "/x\nid", "sha256=00", []byte(""))
	f.Add("-1", "", "", "", "", []byte{0xff})
	f.Add("99999999999999999999", "a", "GET", "/", "sha256=", []byte("x"))
	f.Fuzz(func(t *testing.T, ts, id, method, path, sig string, body []byte) {
		s := Signed{Timestamp: ts, RequestID: id, Method: method, Path: path, Body: body}
		err := Verify(secret, s, sig, time.Minute, now)
		if err == nil && strings.TrimSpace(sig) != Sign(secret, s) {
			t.Fatalf("accepted a signature Sign did not make: %+v sig %q", s, sig)
		}
	})
}

// FuzzRetryAfter: any header value gives a non-negative wait, or none.
func FuzzRetryAfter(f *testing.F) {
	f.Add("120")
	f.Add("Wed, 21 Oct 2015 07:28:00 GMT")
	f.Add("-5")
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := retryAfter(v, time.Unix(1_700_000_000, 0))
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("retryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}
