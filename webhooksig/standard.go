package webhooksig

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks' headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts a Standard Webhooks secret.
const SecretPrefix = "whsec_"

// DefaultTolerance is the tolerance the Standard Webhooks spec and
// Stripe's libraries use: five minutes either way.
const DefaultTolerance = 5 * time.Minute

// ParseSecret decodes a Standard Webhooks secret, "whsec_" + base64 of
// the key (the prefix is optional, as the reference libraries accept
// it). The error does not repeat the secret.
func ParseSecret(s string) ([]byte, error) {
	b64 := strings.TrimPrefix(strings.TrimSpace(s), SecretPrefix)
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("a Standard Webhooks secret is %q followed by base64; this one is not base64", SecretPrefix)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("a Standard Webhooks secret is %q followed by base64; this one is empty", SecretPrefix)
	}
	return key, nil
}

// NewSecret makes a random Standard Webhooks secret of 32 bytes, in its
// "whsec_<base64>" form.
func NewSecret() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("random secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// SignStandard returns the webhook-signature value for one key:
// "v1," + base64(HMAC-SHA256(key, id + "." + unix seconds + "." + body)).
// key is the decoded secret (ParseSecret).
func SignStandard(key []byte, id string, ts time.Time, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(standardMAC(key, id, strconv.FormatInt(ts.Unix(), 10), body))
}

// SetStandardHeaders sets webhook-id, webhook-timestamp and
// webhook-signature on h, signing with every key (space-separated
// signatures, so a receiver that knows any one of them verifies; the
// first key is the one to give new receivers).
func SetStandardHeaders(h http.Header, keys [][]byte, id string, ts time.Time, body []byte) {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = SignStandard(k, id, ts, body)
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
}

func standardMAC(key []byte, id, ts string, body []byte) []byte {
	return mac(SHA256, key, []byte(id), []byte{'.'}, []byte(ts), []byte{'.'}, body)
}

// VerifyStandard checks a Standard Webhooks request: its headers h and
// its exact body, with each key (decoded secrets), against now. It
// returns the webhook-id, the delivery id to deduplicate by. Signatures
// of other versions than v1 in the list are skipped; one v1 that matches
// any key is enough.
func VerifyStandard(keys [][]byte, h http.Header, body []byte, tolerance time.Duration, now time.Time) (id string, err error) {
	if len(keys) == 0 {
		return "", ErrNoSecret
	}
	id, ts, sig := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	for _, v := range []struct{ name, value string }{{HeaderID, id}, {HeaderTimestamp, ts}, {HeaderSignature, sig}} {
		if v.value == "" {
			return "", fmt.Errorf("%w: no %s", ErrMissing, v.name)
		}
	}
	if err := checkTimestamp(ts, tolerance, now); err != nil {
		return "", err
	}
	var v1 [][]byte
	for _, entry := range strings.Fields(sig) {
		version, b64, ok := strings.Cut(entry, ",")
		if !ok {
			return "", fmt.Errorf("%w: %s entry %s is not version,signature", ErrMalformed, HeaderSignature, quote(entry))
		}
		if version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return "", fmt.Errorf("%w: %s entry %s is not base64", ErrMalformed, HeaderSignature, quote(entry))
		}
		v1 = append(v1, got)
	}
	if len(v1) == 0 {
		return "", fmt.Errorf("%w: %s has no v1 signature", ErrMalformed, HeaderSignature)
	}
	for _, k := range keys {
		want := standardMAC(k, id, ts, body)
		for _, got := range v1 {
			if hmac.Equal(got, want) {
				return id, nil
			}
		}
	}
	return "", ErrMismatch
}

// checkTimestamp checks unix seconds ts against now ± tolerance.
func checkTimestamp(ts string, tolerance time.Duration, now time.Time) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts[0] == '+' || ts[0] == '-' {
		return fmt.Errorf("%w: timestamp %s is not unix seconds", ErrMalformed, quote(ts))
	}
	tol := int64(tolerance / time.Second)
	if n := now.Unix(); sec < n-tol || sec > n+tol {
		return fmt.Errorf("%w: timestamp %d is more than %s from now (%d)", ErrStale, sec, tolerance, n)
	}
	return nil
}
