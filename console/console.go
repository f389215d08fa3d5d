package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

const (
	// CookieName is the session cookie's name.
	CookieName = "ferry_console"
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

// login spends a link's token and opens a session; ok is false for a
// token that is unknown, used or expired.
func (c *Console) login(token string) (cookie string, ok bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked(now)
	h := hash(token)
	if _, ok := c.links[h]; !ok || token == "" {
		return "", false
	}
	delete(c.links, h)
	for len(c.sessions) >= maxSessions {
		c.dropOldestSessionLocked()
	}
	cookie = randomToken()
	c.sessions[hash(cookie)] = &session{created: now, seen: now}
	return cookie, true
}

// Session reports whether r carries the cookie of a live session, and
// marks the session used. The API calls it for a request without its
// key; the caller also checks that a request which changes state comes
// from the console's own origin.
func (c *Console) Session(r *http.Request) bool {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return false
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[hash(ck.Value)]
	if !ok || !s.live(now) {
		delete(c.sessions, hash(ck.Value))
		return false
	}
	s.seen = now
	return true
}

// logout ends the session r carries, if any.
func (c *Console) logout(r *http.Request) {
	if ck, err := r.Cookie(CookieName); err == nil {
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

// cookie is the session cookie for value; an empty value and maxAge -1
// clear it.
func (c *Console) cookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteStrictMode}
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hash(s string) digest { return sha256.Sum256([]byte(s)) }
