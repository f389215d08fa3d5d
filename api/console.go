package api

import (
	"net/http"
	"net/url"

	"github.com/ferryhq/ferry/console"
)

// LoginLinksPath is where a holder of the API's credential asks for a
// one-time console login link (ferry ui does).
const LoginLinksPath = "/ui/login-links"

// loginLink is the answer of POST /ui/login-links: the link to open
// (the API's own address, as the caller reached it, with the token), the
// token alone, and when it stops working.
type loginLink struct {
	URL string `json:"url"`
	console.Link
}

// routeConsole serves the web console (package console) at /ui, and
// POST /ui/login-links, which needs the API's key: a console session
// cannot make links, so a stolen session never outlives itself.
func (s *Server) routeConsole(mux *http.ServeMux) {
	h := s.console.Handler()
	mux.Handle("/ui", h)
	mux.Handle("/ui/", h)
	mux.Handle("POST "+LoginLinksPath, s.handle(func(w http.ResponseWriter, r *http.Request) error {
		link := s.console.NewLink()
		scheme := "http"
		if s.tls != nil {
			scheme = "https"
		}
		u := url.URL{Scheme: scheme, Host: r.Host, Path: console.LoginPath, RawQuery: url.Values{"token": {link.Token}}.Encode()}
		s.log.Info("console login link made", "expires_at", link.ExpiresAt) // never the token
		writeJSON(w, http.StatusOK, loginLink{URL: u.String(), Link: link})
		return nil
	}))
}

// consoleSession reports whether a request without the key is made by a
// logged-in console page: it carries a live session's cookie and page key
// (console.Authorized) and, when it changes state, comes from the API's
// own origin. The cookie is
// SameSite=Strict, so other sites' pages do not send it; the origin check
// also holds where a browser does not honour SameSite.
func (s *Server) consoleSession(r *http.Request) bool {
	if !s.console.Authorized(r) {
		return false
	}
	if !changesState(r.Method) {
		return true
	}
	origins := r.Header.Values("Origin")
	return len(origins) == 1 && s.guard.sameOrigin(origins[0], r)
}
