package httpsink

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// signaturePrefix starts every signature header value.
const signaturePrefix = "sha256="

// Errors of Verify.
var (
	// ErrBadSignature: the signature is missing, malformed or does not match
	// the request (wrong secret, or an altered body, path, method, timestamp
	// or request id), or the request id is missing.
	ErrBadSignature = errors.New("signature does not match")
	// ErrStaleTimestamp: the timestamp is missing, malformed or further
	// than the tolerance from now (a replayed or delayed request).
	ErrStaleTimestamp = errors.New("timestamp outside the tolerance")
)

// Signed is what a signature covers.
type Signed struct {
	// Timestamp is the timestamp header's value: unix seconds when the
	// attempt was made.
	Timestamp string
	// RequestID is the request id header's value: the same for every
	// attempt of one request (see the package doc).
	RequestID string
	// Method is the request's method, such as "POST".
	Method string
	// Path is the request's path as sent, escaped, without the query: the
	// URL's escaped path, "/" when it is empty (r.URL.EscapedPath() on the
	// receiving side).
	Path string
	// Body is the exact request body.
	Body []byte
}

// Sign returns the signature header value of a request:
//
//	"sha256=" + hex(HMAC-SHA256(secret, Timestamp + "\n" + RequestID + "\n" + Method + "\n" + Path + "\n" + Body))
func Sign(secret []byte, s Signed) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, s))
}

func mac(secret []byte, s Signed) []byte {
	h := hmac.New(sha256.New, secret)
	for _, part := range []string{s.Timestamp, s.RequestID, s.Method, s.Path} {
		h.Write([]byte(part))
		h.Write([]byte{'\n'})
	}
	h.Write(s.Body)
	return h.Sum(nil)
}

// Verify checks a signed request: signature is the signature header's
// value and s what the receiver got. It returns ErrStaleTimestamp when the
// timestamp is further than tolerance from now (either way), and
// ErrBadSignature when the request id is empty or the signature does not
// match; the comparison is in constant time. A verified request can still
// be a replay within the tolerance: the receiver rejects request ids it
// has seen (see the package doc).
func Verify(secret []byte, s Signed, signature string, tolerance time.Duration, now time.Time) error {
	ts, err := strconv.ParseInt(s.Timestamp, 10, 64)
	if err != nil || s.Timestamp == "" || s.Timestamp[0] == '+' {
		return fmt.Errorf("timestamp %q is not unix seconds: %w", truncate(s.Timestamp, 32), ErrStaleTimestamp)
	}
	tol := int64(tolerance / time.Second)
	if nowS := now.Unix(); ts < nowS-tol || ts > nowS+tol {
		return fmt.Errorf("timestamp %d is more than %s from now (%d): %w", ts, tolerance, nowS, ErrStaleTimestamp)
	}
	if s.RequestID == "" {
		return fmt.Errorf("no request id: %w", ErrBadSignature)
	}
	hexSig, ok := strings.CutPrefix(strings.TrimSpace(signature), signaturePrefix)
	if !ok {
		return fmt.Errorf("signature does not start with %q: %w", signaturePrefix, ErrBadSignature)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size || hexSig != strings.ToLower(hexSig) {
		return fmt.Errorf("signature is not %d bytes in lowercase hex: %w", sha256.Size, ErrBadSignature)
	}
	if !hmac.Equal(got, mac(secret, s)) {
		return ErrBadSignature
	}
	return nil
}

// VerifyRequest reads r's body (at most maxBody bytes) and verifies the
// request with the default header names (X-Ferry-Timestamp,
// X-Ferry-Request-Id, X-Ferry-Signature), its method and r.URL's escaped
// path, against the current time. It returns the body and the request id
// when the request is authentic; the caller rejects a request id it has
// seen within the tolerance. Receivers that configured other header
// names, or whose proxy rewrites the path, call Verify.
func VerifyRequest(r *http.Request, secret []byte, tolerance time.Duration, maxBody int64) (body []byte, requestID string, err error) {
	body, err = io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, "", fmt.Errorf("read body: %w", err)
	}
	if int64(len(body)) > maxBody {
		return nil, "", fmt.Errorf("body is over %d bytes", maxBody)
	}
	s := Signed{Timestamp: r.Header.Get(DefaultTimestampHeader), RequestID: r.Header.Get(DefaultRequestIDHeader),
		Method: r.Method, Path: signedPath(r.URL.EscapedPath()), Body: body}
	if err := Verify(secret, s, r.Header.Get(DefaultSignatureHeader), tolerance, time.Now()); err != nil {
		return nil, "", err
	}
	return body, s.RequestID, nil
}

// signedPath is the path a signature covers: "/" for an empty one, as
// HTTP sends it.
func signedPath(escaped string) string {
	if escaped == "" {
		return "/"
	}
	return escaped
}

// requestID names one request of a sink's batch: 32 hex digits of
// SHA-256 over the connector key, the stream, topic and partition and the
// first message's id, with the offsets of the request's first and last
// message and their count. It is the same for every attempt of the
// request, within one Consume or when the runtime delivers the batch
// again, and differs between requests and between sinks.
func requestID(key string, b *connector.SinkBatch, msgs []int) string {
	h := sha256.New()
	h.Write([]byte("ferry-http-request\x00"))
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write([]byte(b.Stream))
	h.Write([]byte{0})
	h.Write([]byte(b.Topic))
	h.Write([]byte{0})
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(b.Partition))
	h.Write(n[:])
	first, last := &b.Messages[msgs[0]], &b.Messages[msgs[len(msgs)-1]]
	h.Write(first.ID[:])
	for _, v := range []uint64{first.Offset, last.Offset, uint64(len(msgs))} {
		binary.BigEndian.PutUint64(n[:], v)
		h.Write(n[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// truncate cuts s to at most n bytes for error messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
