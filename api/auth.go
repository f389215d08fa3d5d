package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"

	"github.com/ferryhq/ferry/console"
)

// APIKeyHeader is the header that carries [http] api_key (upstream's
// name), or the local token.
const APIKeyHeader = "api-key"

// authenticate requires a credential on every request but the public
// ones: [http] api_key when one is configured, else the local token the
// server made in New (package internal/apitoken), which only the
// runtime's user can read. Unlike upstream's, the API never runs open:
// it can write files and run commands as the runtime's user, so anyone
// else on the machine must not reach it. A request without the key may
// instead carry a web console session (consoleSession), which only a
// holder of the key can open.
func (s *Server) authenticate(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(s.key))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.public(r) {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := r.Header[http.CanonicalHeaderKey(APIKeyHeader)]
		if !ok && r.URL.Path != LoginLinksPath && s.consoleSession(r) {
			next.ServeHTTP(w, r)
			return
		}
		if !ok || len(got) != 1 || !keyMatches(got[0], want) {
			reason := "missing " + APIKeyHeader + " header"
			if ok {
				reason = "invalid " + APIKeyHeader + " header"
			}
			if s.localToken {
				reason += ": this runtime has no [http] api_key, so it requires its local token, which only the user running it can read " +
					"(ferry commands of that user send it by themselves); set [http] api_key to share access with others"
			}
			s.writeError(w, r, &APIError{Status: http.StatusUnauthorized, Code: codeUnauthorized, Reason: reason})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// public reports whether a request is served without a credential: GET /
// and /health always (as upstream); the console's pages (package console,
// which checks its session itself) but not its login links; with no api_key and [http]
// public_reads (the default), also GET and HEAD of /stats and the metrics
// endpoint, which hold no secrets and which scrapers and dashboards read.
// With api_key set those need the key, as upstream.
func (s *Server) public(r *http.Request) bool {
	switch p := r.URL.Path; {
	case p == "/" || p == "/health":
		return true
	case console.IsPath(p):
		return p != LoginLinksPath
	case !s.localToken || !s.cfg.PublicReads || (r.Method != http.MethodGet && r.Method != http.MethodHead):
		return false
	case p == "/stats":
		return true
	default:
		return s.cfg.Metrics.Enabled && p == s.metricsEndpoint()
	}
}

// keyMatches compares a presented key with the configured key's SHA-256
// in constant time: hashing first makes the time independent of the
// lengths as well as the contents.
func keyMatches(got string, want [sha256.Size]byte) bool {
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(h[:], want[:]) == 1
}
