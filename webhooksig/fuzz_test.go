package webhooksig_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/ferryhq/ferry/webhooksig"
)

// The header parsers take anything a client sends: no panic, and what
// verifies with the key is exactly what signing produces.
func FuzzVerify(f *testing.F) {
	key := []byte("fuzz-key")
	now := time.Unix(1700000000, 0)
	f.Add("msg_1", "1700000000", webhooksig.SignStandard(key, "msg_1", now, []byte("{}")), webhooksig.SignStripe(key, now, []byte("{}")), "{}")
	f.Add("", "", "v1,", "t=,v1=", "")
	f.Add("x", "+1700000000", "v1,AAAA v1a,xx v2", "t=1,t=2,v1=00,v0=zz,", "body")
	f.Add("\x00", "99999999999999999999", ",,, v1,====", "====", "\xff")
	f.Fuzz(func(t *testing.T, id, ts, sig, stripe, body string) {
		h := http.Header{}
		h.Set(webhooksig.HeaderID, id)
		h.Set(webhooksig.HeaderTimestamp, ts)
		h.Set(webhooksig.HeaderSignature, sig)
		got, err := webhooksig.VerifyStandard([][]byte{key}, h, []byte(body), time.Minute, now)
		if err == nil && got != h.Get(webhooksig.HeaderID) {
			t.Fatalf("verified, but returned id %q, not the header's", got)
		}
		_ = webhooksig.VerifyStripe([][]byte{key}, stripe, []byte(body), time.Minute, now)
		_ = webhooksig.GitHub.Verify([][]byte{key}, sig, []byte(body))
		_ = webhooksig.HMAC{Algorithm: webhooksig.SHA1, Encoding: webhooksig.Base64}.Verify([][]byte{key}, sig, []byte(body))
		_, _ = webhooksig.ParseSecret(sig)
	})
}
