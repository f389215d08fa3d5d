package httpsink

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// signaturePrefix starts every signature header value.
const signaturePrefix = "sha256="

// Errors of Verify.
var (
	// ErrBadSignature: the signature is missing, malformed or does not match
	// the body and timestamp (wrong secret or altered request).
	ErrBadSignature = errors.New("signature does not match")
	// ErrStaleTimestamp: the timestamp is missing, malformed or further
	// than the tolerance from now (a replayed or delayed request).
	ErrStaleTimestamp = errors.New("timestamp outside the tolerance")
)

// Sign returns the signature header value for body sent at timestamp (unix
// seconds, as written in the timestamp header):
// "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body)).
func Sign(secret []byte, timestamp string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret []byte, timestamp string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(timestamp))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a signed request: timestamp and signature are the values
// of the timestamp and signature headers, body the exact body received. It
// returns ErrStaleTimestamp when the timestamp is further than tolerance
// from now (either way), and ErrBadSignature when the signature does not
// match; the comparison is in constant time.
func Verify(secret []byte, timestamp, signature string, body []byte, tolerance time.Duration, now time.Time) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || timestamp == "" || timestamp[0] == '+' {
		return fmt.Errorf("timestamp %q is not unix seconds: %w", truncate(timestamp, 32), ErrStaleTimestamp)
	}
	tol := int64(tolerance / time.Second)
	if nowS := now.Unix(); ts < nowS-tol || ts > nowS+tol {
		return fmt.Errorf("timestamp %d is more than %s from now (%d): %w", ts, tolerance, nowS, ErrStaleTimestamp)
	}
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(signature), signaturePrefix)
	if !ok {
		return fmt.Errorf("signature does not start with %q: %w", signaturePrefix, ErrBadSignature)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("signature is not %d hex bytes: %w", sha256.Size, ErrBadSignature)
	}
	if !hmac.Equal(got, mac(secret, timestamp, body)) {
		return ErrBadSignature
	}
	return nil
}

// VerifyRequest reads r's body (at most maxBody bytes) and verifies it
// with the default header names (X-Ferry-Timestamp, X-Ferry-Signature)
// against the current time. It returns the body when the request is
// authentic. Receivers that configured other header names call Verify.
func VerifyRequest(r *http.Request, secret []byte, tolerance time.Duration, maxBody int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if int64(len(body)) > maxBody {
		return nil, fmt.Errorf("body is over %d bytes", maxBody)
	}
	err = Verify(secret, r.Header.Get(DefaultTimestampHeader), r.Header.Get(DefaultSignatureHeader), body, tolerance, time.Now())
	if err != nil {
		return nil, err
	}
	return body, nil
}

// truncate cuts s to at most n bytes for error messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
