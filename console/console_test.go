package console

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clocked is a console whose time the test moves.
func clocked() (*Console, *time.Time) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	c := New(false)
	c.now = func() time.Time { return now }
	return c, &now
}

func withCookie(v string) *http.Request {
	r := httptest.NewRequest("GET", "http://127.0.0.1:8081/sinks", nil)
	r.AddCookie(&http.Cookie{Name: CookieFor(r.Host), Value: v})
	return r
}

func TestALinkWorksOnceAndExpires(t *testing.T) {
	c, now := clocked()
	l := c.NewLink()
	cookie, key, ok := c.login(l.Token)
	require.True(t, ok)
	require.True(t, c.Session(withCookie(cookie)))
	r := withCookie(cookie)
	require.False(t, c.Authorized(r), "the cookie without the page key")
	r.Header.Set(KeyHeader, l.Token)
	require.False(t, c.Authorized(r), "another key")
	r.Header.Set(KeyHeader, key)
	require.True(t, c.Authorized(r))
	_, _, ok = c.login(l.Token)
	require.False(t, ok, "used")

	late := c.NewLink()
	*now = now.Add(LinkLifetime)
	_, _, ok = c.login(late.Token)
	require.False(t, ok, "expired")
	_, _, ok = c.login("")
	require.False(t, ok, "empty")
	require.False(t, c.Session(withCookie("")))
	require.False(t, c.Session(withCookie(l.Token)), "a token is not a session")
}

func TestSessionsEnd(t *testing.T) {
	c, now := clocked()
	cookie, _, _ := c.login(c.NewLink().Token)
	*now = now.Add(IdleTimeout - time.Second)
	require.True(t, c.Session(withCookie(cookie)), "used within the idle timeout")
	*now = now.Add(IdleTimeout)
	require.False(t, c.Session(withCookie(cookie)), "idle too long")

	cookie, _, _ = c.login(c.NewLink().Token)
	for i := 0; i < int(MaxAge/IdleTimeout)+1; i++ {
		*now = now.Add(IdleTimeout - time.Minute)
		c.Session(withCookie(cookie))
	}
	require.False(t, c.Session(withCookie(cookie)), "older than MaxAge")

	cookie, _, _ = c.login(c.NewLink().Token)
	r := httptest.NewRequest("POST", "http://127.0.0.1:8081/ui/logout", nil)
	r.AddCookie(&http.Cookie{Name: CookieFor(r.Host), Value: cookie})
	c.logout(r)
	require.False(t, c.Session(withCookie(cookie)), "logged out")
}

func TestBounded(t *testing.T) {
	c, now := clocked()
	first := c.NewLink()
	for i := 0; i < maxLinks; i++ {
		*now = now.Add(time.Millisecond)
		c.NewLink()
	}
	_, _, ok := c.login(first.Token)
	require.False(t, ok, "the oldest link went first")
	for i := 0; i < maxSessions+5; i++ {
		_, _, ok := c.login(c.NewLink().Token)
		require.True(t, ok)
		*now = now.Add(time.Millisecond)
	}
	require.Equal(t, maxSessions, c.Sessions())
}

func TestPagesNeedASession(t *testing.T) {
	c := New(true)
	h := c.Handler()
	get := func(path string, cookie string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://127.0.0.1:8081"+path, nil)
		if cookie != "" {
			r.AddCookie(&http.Cookie{Name: CookieFor(r.Host), Value: cookie})
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	require.Equal(t, http.StatusUnauthorized, get("/ui/", "").Code)
	require.Equal(t, http.StatusOK, get("/ui/assets/console.js", "").Code)
	w := get(LoginPath+"?token="+c.NewLink().Token, "")
	require.Equal(t, http.StatusSeeOther, w.Code)
	require.Regexp(t, `^/ui/#key=[A-Za-z0-9_-]{43}$`, w.Header().Get("Location"))
	set := w.Result().Cookies()
	require.Len(t, set, 1)
	require.True(t, set[0].HttpOnly && set[0].Secure && set[0].SameSite == http.SameSiteStrictMode)
	require.Equal(t, "ferry_console_8081", set[0].Name)
	page := get("/ui/", set[0].Value)
	require.Equal(t, http.StatusOK, page.Code)
	require.Contains(t, page.Body.String(), `<script src="/ui/assets/console.js"`)
	require.Contains(t, page.Header().Get("Content-Security-Policy"), "script-src 'self'")
	require.Equal(t, http.StatusUnauthorized, get(LoginPath+"?token=nope", "").Code)
}

func TestCookieFor(t *testing.T) {
	for host, want := range map[string]string{"127.0.0.1:8081": "ferry_console_8081", "[::1]:9": "ferry_console_9",
		"localhost": "ferry_console", "[::1]": "ferry_console", "h:x1": "ferry_console"} {
		require.Equal(t, want, CookieFor(host), host)
	}
}
