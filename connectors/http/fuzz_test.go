package httpsink

import (
	"strings"
	"testing"
	"time"
)

// FuzzVerify feeds arbitrary header values and bodies to Verify: it must
// not panic, and must accept only what Sign produced for that body and
// timestamp (around which Verify allows spaces).
func FuzzVerify(f *testing.F) {
	secret := []byte("fuzz-secret")
	now := time.Unix(1_700_000_000, 0)
	f.Add("1700000000", Sign(secret, "1700000000", []byte("body")), []byte("body"))
	f.Add("1700000000", "sha256=00", []byte(""))
	f.Add("-1", "", []byte{0xff})
	f.Add("99999999999999999999", "sha256=", []byte("x"))
	f.Fuzz(func(t *testing.T, ts, sig string, body []byte) {
		err := Verify(secret, ts, sig, body, time.Minute, now)
		if err == nil && strings.TrimSpace(sig) != Sign(secret, ts, body) {
			t.Fatalf("accepted a signature Sign did not make: ts %q sig %q", ts, sig)
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
