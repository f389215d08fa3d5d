package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
)

// APIKeyHeader is the header that carries [http] api_key (upstream's name).
const APIKeyHeader = "api-key"

// publicPaths are served without the API key, as upstream does.
var publicPaths = map[string]bool{"/": true, "/health": true}

// authenticate requires the API key on every path but the public ones
// when one is configured.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.APIKey))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if publicPaths[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := r.Header[http.CanonicalHeaderKey(APIKeyHeader)]
		if !ok || len(got) != 1 || !keyMatches(got[0], want) {
			reason := "missing " + APIKeyHeader + " header"
			if ok {
				reason = "invalid " + APIKeyHeader + " header"
			}
			s.writeError(w, r, &APIError{Status: http.StatusUnauthorized, Code: codeUnauthorized, Reason: reason})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// keyMatches compares a presented key with the configured key's SHA-256
// in constant time: hashing first makes the time independent of the
// lengths as well as the contents.
func keyMatches(got string, want [sha256.Size]byte) bool {
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(h[:], want[:]) == 1
}
