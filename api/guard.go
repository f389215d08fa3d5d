package api

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
)

// Error codes of the request guards (Ferry; upstream has none of these
// checks).
const (
	codeHostNotAllowed   = "host_not_allowed"
	codeOriginNotAllowed = "origin_not_allowed"
	codeUnsupportedMedia = "unsupported_media_type"
)

// guard refuses the requests a web page could make the operator's browser
// send to the API:
//
//   - DNS rebinding: while the API listens on a loopback address, the Host
//     header must name a loopback IP, "localhost" or the host of [http]
//     address (any port); a page on another name that resolves to
//     127.0.0.1 sends its own name and is refused (403 host_not_allowed).
//   - Cross-origin requests: a request with an Origin header that
//     [http.cors] allowed_origins does not allow (any origin when CORS is
//     off) and that is not the API's own origin is refused when it could
//     change something (any method but GET, HEAD and OPTIONS), and, with no
//     api_key configured, whatever its method (403 origin_not_allowed).
//     Browsers send Origin with every cross-origin request and every POST,
//     PUT and DELETE; curl and other programs send none, and pass.
//   - Request bodies must be JSON (Content-Type application/json, or a
//     media type ending in "+json"): a page can send text/plain and form
//     bodies without a preflight, never JSON (415 unsupported_media_type).
type guard struct {
	corsOn    bool
	anyOrigin bool
	origins   map[string]bool
	keyed     bool   // [http] api_key is set
	ownHost   string // the host of [http] address, lower-case, without a trailing dot
	// loopback: the API listens on loopback only, so the Host check
	// applies. Set by New from the configured address and by Start from
	// the bound one.
	loopback atomic.Bool
}

func newGuard(address string, c *cors, keyed bool) *guard {
	host, _, _ := net.SplitHostPort(address)
	g := &guard{keyed: keyed, ownHost: normalHost(host)}
	if c != nil {
		g.corsOn, g.anyOrigin, g.origins = true, c.anyOrigin, c.origins
	}
	g.loopback.Store(isLoopbackName(g.ownHost))
	return g
}

// boundTo records the address the server actually listens on.
func (g *guard) boundTo(addr net.Addr) {
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip != nil {
		g.loopback.Store(ip.IsLoopback())
	}
}

func (g *guard) wrap(s *Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.loopback.Load() && !g.hostAllowed(r.Host) {
			s.writeError(w, r, &APIError{Status: http.StatusForbidden, Code: codeHostNotAllowed,
				Reason: "the Host header names neither a loopback address nor localhost: the API listens on loopback only " +
					"and refuses other host names (DNS rebinding); use http://127.0.0.1:PORT or http://localhost:PORT"})
			return
		}
		if origins := r.Header.Values("Origin"); len(origins) > 0 {
			if len(origins) != 1 || !g.originAllowed(origins[0], r) {
				if !g.keyed || changesState(r.Method) {
					s.writeError(w, r, &APIError{Status: http.StatusForbidden, Code: codeOriginNotAllowed,
						Reason: "requests from web pages of this origin are refused: list the origin in [http.cors] allowed_origins " +
							"(with enabled = true) to allow it"})
					return
				}
			}
		}
		if hasBody(r) && !isJSON(r.Header.Get("Content-Type")) {
			s.writeError(w, r, &APIError{Status: http.StatusUnsupportedMediaType, Code: codeUnsupportedMedia,
				Reason: "request body: expected Content-Type: application/json, got " + quoteOrNone(r.Header.Get("Content-Type")) +
					" (with curl: -H 'Content-Type: application/json')"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// changesState reports whether a method may change something: anything
// but GET, HEAD and OPTIONS.
func changesState(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// originAllowed: listed in allowed_origins (or "*") with CORS on, or the
// API's own origin (a page the API itself served, were there one).
func (g *guard) originAllowed(origin string, r *http.Request) bool {
	if g.corsOn && (g.anyOrigin || g.origins[origin]) {
		return true
	}
	return g.sameOrigin(origin, r)
}

// sameOrigin: origin is http(s)://<the request's Host>, and that host is
// one the API knows as its own (an IP address, localhost or the
// configured host), so that a page on a rebound name does not count.
func (g *guard) sameOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if !strings.EqualFold(u.Host, r.Host) {
		return false
	}
	h := hostOf(r.Host)
	return net.ParseIP(h) != nil || h == "localhost" || (h != "" && h == g.ownHost)
}

// hostAllowed: the Host header names a loopback IP, localhost or the
// configured host, with any port.
func (g *guard) hostAllowed(hostHeader string) bool {
	h := hostOf(hostHeader)
	return isLoopbackName(h) || (h != "" && h == g.ownHost)
}

// hostOf is the host of a Host header value, without port and brackets,
// lower-case, without a trailing dot.
func hostOf(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return normalHost(h)
}

func normalHost(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// isLoopbackName: a loopback IP address or "localhost".
func isLoopbackName(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// hasBody reports whether a request carries a body (the server gives
// bodiless requests http.NoBody).
func hasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// isJSON accepts application/json and application/<x>+json, with any
// parameters (charset).
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

func quoteOrNone(s string) string {
	if s == "" {
		return "none"
	}
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return strconv.Quote(s)
}
