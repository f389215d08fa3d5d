package webhooksig

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"unicode/utf8"
)

// Errors of the Verify functions; each returned error wraps one of them.
var (
	// ErrMissing: a header the scheme needs is absent or empty.
	ErrMissing = errors.New("signature header missing")
	// ErrMalformed: a header is there but is not in the scheme's format.
	ErrMalformed = errors.New("signature header malformed")
	// ErrMismatch: the signature is well-formed but no secret produces it
	// (a wrong secret, or an altered body, id or timestamp).
	ErrMismatch = errors.New("signature does not match")
	// ErrStale: the signed timestamp is further than the tolerance from
	// now (a replayed or delayed request).
	ErrStale = errors.New("timestamp outside the tolerance")
	// ErrNoSecret: Verify was given no secret; a configuration error.
	ErrNoSecret = errors.New("no secret to verify with")
)

// Algorithms and encodings of HMAC.
const (
	SHA1   = "sha1"
	SHA256 = "sha256"
	SHA512 = "sha512"
	Hex    = "hex"
	Base64 = "base64"
)

// HMAC is a signature that is an HMAC of the request body alone, as many
// providers send it: Prefix + Encoding(HMAC-Algorithm(secret, body)).
// The zero value is not valid; see GitHub for an example.
type HMAC struct {
	// Algorithm is SHA1, SHA256 or SHA512.
	Algorithm string
	// Encoding is Hex (lowercase when signing; either case verifies) or
	// Base64 (standard, padded).
	Encoding string
	// Prefix is stripped before decoding, such as "sha256="; it must be
	// there when set.
	Prefix string
}

// GitHub is GitHub's X-Hub-Signature-256 value: "sha256=" + hex HMAC-SHA256.
var GitHub = HMAC{Algorithm: SHA256, Encoding: Hex, Prefix: "sha256="}

// GitHubHeader is the header GitHub sends the signature in.
const GitHubHeader = "X-Hub-Signature-256"

// Check reports a configuration error: an unknown algorithm or encoding.
func (h HMAC) Check() error {
	if newHash(h.Algorithm) == nil {
		return fmt.Errorf("algorithm %q: want sha1, sha256 or sha512", h.Algorithm)
	}
	if h.Encoding != Hex && h.Encoding != Base64 {
		return fmt.Errorf("encoding %q: want hex or base64", h.Encoding)
	}
	return nil
}

// Sign returns the header value for body.
func (h HMAC) Sign(secret, body []byte) string {
	sum := mac(h.Algorithm, secret, body)
	if h.Encoding == Base64 {
		return h.Prefix + base64.StdEncoding.EncodeToString(sum)
	}
	return h.Prefix + hex.EncodeToString(sum)
}

// Verify checks value, the signature header's value, against body with
// each secret in turn.
func (h HMAC) Verify(secrets [][]byte, value string, body []byte) error {
	if err := h.Check(); err != nil {
		return err
	}
	if len(secrets) == 0 {
		return ErrNoSecret
	}
	value = strings.TrimSpace(value)
	if value == "" {
		return ErrMissing
	}
	enc, ok := strings.CutPrefix(value, h.Prefix)
	if !ok {
		return fmt.Errorf("%w: %s does not start with %q", ErrMalformed, quote(value), h.Prefix)
	}
	got, err := decode(h.Encoding, enc)
	if err != nil || len(got) != newHash(h.Algorithm)().Size() {
		return fmt.Errorf("%w: %s is not a %s HMAC in %s", ErrMalformed, quote(value), h.Algorithm, h.Encoding)
	}
	for _, s := range secrets {
		if hmac.Equal(got, mac(h.Algorithm, s, body)) {
			return nil
		}
	}
	return ErrMismatch
}

func decode(encoding, s string) ([]byte, error) {
	if encoding == Base64 {
		return base64.StdEncoding.DecodeString(s)
	}
	return hex.DecodeString(s)
}

func newHash(algorithm string) func() hash.Hash {
	switch algorithm {
	case SHA1:
		return sha1.New
	case SHA256:
		return sha256.New
	case SHA512:
		return sha512.New
	}
	return nil
}

// mac is the HMAC of the parts, concatenated.
func mac(algorithm string, secret []byte, parts ...[]byte) []byte {
	m := hmac.New(newHash(algorithm), secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// quote is a received value for an error message: quoted, at most 40
// bytes (a header is attacker-controlled; it never holds our secret).
func quote(s string) string {
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}
