package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"time"
)

const (
	// CookieName begins the session cookie's name, which ends with the
	// API's port (CookieFor): browsers keep cookies per host, not per
	// port, so runtimes on one host must not overwrite each other's.
	CookieName = "ferry_console"
	// KeyHeader carries a session's page key on every API request the
	// console makes (see Authorized).
	KeyHeader = "X-Ferry-Console"
	// LinkLifetime is how long a login link can be used (once).
	LinkLifetime = 5 * time.Minute
	// IdleTimeout ends a session that made no request for this long.
	IdleTimeout = 8 * time.Hour
	// MaxAge ends every session this long after its login.
	MaxAge = 7 * 24 * time.Hour

	// maxLinks and maxSessions bound what a caller can make the runtime
	// keep; beyond them the oldest goes first.
	maxLinks    = 32
	maxSessions = 64
)

// Console keeps the login links and sessions of the web console and
// serves its pages. Its zero value is not usable: call New. It is safe
// for concurrent use.
type Console struct {
	secure bool             // the API serves HTTPS: the cookie is Secure
	now    func() time.Time // time.Now, or a test's clock

	mu       sync.Mutex
	links    map[digest]time.Time // a link's token (hashed) → when it expires
	sessions map[digest]*session  // a session's cookie value (hashed)
}

// digest is the SHA-256 of a token or cookie value: only digests are
// kept, so the maps hold nothing a memory dump could replay, and a lookup
// does not compare the secret itself byte by byte.
type digest [sha256.Size]byte

type session struct {
	created, seen time.Time
	key           digest // the page key's, which Authorized wants in KeyHeader
}

// New makes a console. secure says the API serves HTTPS, so the session
// cookie is sent only over it.
func New(secure bool) *Console {
	return &Console{secure: secure, now: time.Now, links: map[digest]time.Time{}, sessions: map[digest]*session{}}
}

// Link is a one-time login link's token and when it stops working.
type Link struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// LoginPath is the path a login link opens, with ?token=.
const LoginPath = "/ui/login"

// NewLink makes a login token that GET /ui/login?token= accepts once,
// within LinkLifetime. Only a caller that holds the API's credential may
// ask for one (the API routes POST /ui/login-links so).
func (c *Console) NewLink() Link {
	tok := randomToken()
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	for len(c.links) >= maxLinks {
		c.dropOldestLinkLocked()
	}
	exp := now.Add(LinkLifetime)
	c.links[hash(tok)] = exp
	return Link{Token: tok, ExpiresAt: exp}
}

// login spends a link's token and opens a session: its cookie value, and
// its page key, which the console page keeps in its origin's storage; ok
// is false for a token that is unknown, used or expired.
func (c *Console) login(token string) (cookie, key string, ok bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	h := hash(token)
	if _, ok := c.links[h]; !ok || token == "" {
		return "", "", false
	}
	delete(c.links, h)
	for len(c.sessions) >= maxSessions {
		c.dropOldestSessionLocked()
	}
	cookie, key = randomToken(), randomToken()
	c.sessions[hash(cookie)] = &session{created: now, seen: now, key: hash(key)}
	return cookie, key, true
}

// Session reports whether r carries the cookie of a live session, and
// marks the session used: enough to be served the console's page, which
// holds nothing of the runtime's.
func (c *Console) Session(r *http.Request) bool {
	_, ok := c.session(r)
	return ok
}

// Authorized reports whether r comes from a logged-in console page: the
// cookie of a live session and, in KeyHeader, that session's page key.
// The cookie alone is not enough because a browser sends a host's
// cookies to every port of it, so a page of another server on the same
// host (another user's, say) would receive it; the page key is kept in
// the console origin's own storage, which no other origin reads. The API
// calls it for a request without its key, and also checks that a
// request which changes state comes from the console's own origin.
func (c *Console) Authorized(r *http.Request) bool {
	s, ok := c.session(r)
	return ok && subtle.ConstantTimeCompare(hashBytes(r.Header.Get(KeyHeader)), s.key[:]) == 1
}

func (c *Console) session(r *http.Request) (session, bool) {
	ck, err := r.Cookie(CookieFor(r.Host))
	if err != nil || ck.Value == "" {
		return session{}, false
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[hash(ck.Value)]
	if !ok || !s.live(now) {
		delete(c.sessions, hash(ck.Value))
		return session{}, false
	}
	s.seen = now
	return *s, true
}

// CookieFor is the session cookie's name for an API reached at host
// (a Host header): CookieName, "_" and the port's digits.
func CookieFor(host string) string {
	port := ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		port = host[i+1:]
	}
	for _, r := range port {
		if r < '0' || r > '9' {
			port = ""
			break
		}
	}
	if port == "" {
		return CookieName
	}
	return CookieName + "_" + port
}

// logout ends the session r carries, if any.
func (c *Console) logout(r *http.Request) {
	if ck, err := r.Cookie(CookieFor(r.Host)); err == nil {
		c.mu.Lock()
		delete(c.sessions, hash(ck.Value))
		c.mu.Unlock()
	}
}

// Sessions is how many sessions are live, for tests and /stats readers.
func (c *Console) Sessions() int {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	return len(c.sessions)
}

func (s *session) live(now time.Time) bool {
	return now.Sub(s.seen) < IdleTimeout && now.Sub(s.created) < MaxAge
}

func (c *Console) expireLocked(now time.Time) {
	for h, exp := range c.links {
		if !now.Before(exp) {
			delete(c.links, h)
		}
	}
	for h, s := range c.sessions {
		if !s.live(now) {
			delete(c.sessions, h)
		}
	}
}

func (c *Console) dropOldestLinkLocked() {
	var oldest digest
	var first time.Time
	for h, exp := range c.links {
		if first.IsZero() || exp.Before(first) {
			oldest, first = h, exp
		}
	}
	delete(c.links, oldest)
}

func (c *Console) dropOldestSessionLocked() {
	var oldest digest
	var first time.Time
	for h, s := range c.sessions {
		if first.IsZero() || s.seen.Before(first) {
			oldest, first = h, s.seen
		}
	}
	delete(c.sessions, oldest)
}

// cookie is the session cookie of the API at host for value; an empty
// value and maxAge -1 clear it.
func (c *Console) cookie(host, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: CookieFor(host), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hash(s string) digest { return sha256.Sum256([]byte(s)) }

func hashBytes(s string) []byte { h := hash(s); return h[:] }
