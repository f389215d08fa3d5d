package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/console"
)

// chromium finds Debian's Chromium (FERRY_CHROMIUM overrides); the test
// skips without it unless FERRY_REQUIRE_CHROMIUM=1, which the test
// command sets after installing it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("FERRY_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("FERRY_REQUIRE_CHROMIUM") != "" {
		t.Fatal("FERRY_REQUIRE_CHROMIUM is set but Chromium is not installed (apt-get install chromium)")
	}
	t.Skip("Chromium is not installed (apt-get install chromium, or FERRY_CHROMIUM=path)")
	return ""
}

// uiLink runs `ferry ui --json --no-open` against live and returns the link.
func uiLink(t *testing.T, live *liveRuntime) string {
	t.Helper()
	out, err := ferry(t, "", "ui", "--json", "--no-open", "--api", live.url, "--api-key", testAPIKey)
	require.NoError(t, err, out)
	var link struct {
		URL string `json:"url"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &link), out)
	require.True(t, strings.HasPrefix(link.URL, live.url+console.LoginPath+"?token="), link.URL)
	return link.URL
}

// TestConsoleLoginLinks: a link logs in once, its token leaves the
// address, the session (cookie and page key together) opens the API but
// cannot make links, and nothing opens it without a link.
func TestConsoleLoginLinks(t *testing.T) {
	t.Parallel()
	live := startLiveRuntime(t, t.TempDir())
	link := uiLink(t, live)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	get := func(u string) *http.Response {
		t.Helper()
		res, err := browser.Get(u)
		require.NoError(t, err)
		res.Body.Close()
		return res
	}

	require.Equal(t, http.StatusUnauthorized, get(live.url+"/ui/").StatusCode, "no session: the login page")
	require.Equal(t, http.StatusUnauthorized, get(live.url+"/sinks").StatusCode)
	res := get(link)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "/ui/", res.Request.URL.Path, "redirected off the link")
	require.Empty(t, res.Request.URL.RawQuery, "the token left the address")
	require.Equal(t, http.StatusUnauthorized, get(live.url+"/sinks").StatusCode, "the cookie alone does not open the API")
	key, ok := strings.CutPrefix(res.Request.URL.Fragment, "key=")
	require.True(t, ok, "the page key in the fragment: %q", res.Request.URL.Fragment)
	withKey := func(method, path, origin string) int {
		t.Helper()
		req, err := http.NewRequest(method, live.url+path, nil)
		require.NoError(t, err)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set(console.KeyHeader, key)
		res, err := browser.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusOK, withKey("GET", "/sinks", ""), "cookie and page key open the API")
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")

	u, _ := url.Parse(live.url)
	var cookie *http.Cookie
	for _, c := range jar.Cookies(u) {
		if c.Name == console.CookieFor(u.Host) {
			cookie = c
		}
	}
	require.NotNil(t, cookie)

	// The cookie is HttpOnly and SameSite=Strict.
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res4, err := noFollow.Get(uiLink(t, live))
	require.NoError(t, err)
	res4.Body.Close()
	require.Equal(t, http.StatusSeeOther, res4.StatusCode)
	set := res4.Header.Get("Set-Cookie")
	require.Contains(t, set, "HttpOnly")
	require.Contains(t, set, "SameSite=Strict")
	require.Equal(t, "no-referrer", res4.Header.Get("Referrer-Policy"))

	// A used link fails, in another browser too.
	other := &http.Client{Timeout: 10 * time.Second}
	res2, err := other.Get(link)
	require.NoError(t, err)
	res2.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res2.StatusCode, "a link works once")

	// A session cannot make login links, and a state change needs the
	// console's own origin.
	post := func(path, origin string) int {
		t.Helper()
		req, err := http.NewRequest("POST", live.url+path, strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.AddCookie(cookie)
		req.Header.Set(console.KeyHeader, key)
		res, err := other.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		return res.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, post("/ui/login-links", live.url))
	require.Equal(t, http.StatusUnauthorized, post("/sinks/nope/restart", ""), "no Origin: not the console")
	require.Equal(t, http.StatusForbidden, post("/sinks/nope/restart", "http://evil.example"))
	require.Equal(t, http.StatusNotFound, post("/sinks/nope/restart", live.url), "the console's own origin: through to the API")

	// Logging out ends the session.
	req, err := http.NewRequest("POST", live.url+"/ui/logout", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", live.url)
	res3, err := browser.Do(req)
	require.NoError(t, err)
	res3.Body.Close()
	require.Equal(t, http.StatusNoContent, res3.StatusCode)
	require.Equal(t, http.StatusUnauthorized, withKey("GET", "/sinks", ""), "logged out")
}

// TestConsoleInChromium drives the console in headless Chromium: log in
// with ferry ui's link, create a hook whose command refuses one payload,
// see its messages counted and the poison message in the dead-letter view
// with its reason, fix the hook by saving and activating a new
// configuration version, replay the dead letter, and see it processed and
// in the hook's run log; then the streams view. Screenshots go to
// FERRY_UI_SCREENSHOTS when set.
func TestConsoleInChromium(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	live := startLiveRuntime(t, t.TempDir())
	shots := os.Getenv("FERRY_UI_SCREENSHOTS")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1400, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first call starts the browser, which lives as long as that
	// call's context: this one, without a deadline (chromedp.Run).
	require.NoError(t, chromedp.Do(ctx), "start Chromium")
	// page is what the page shows, for failure messages.
	page := func() string {
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, _ := chromedp.Run(short, chromedp.Evaluate[string](`location.hash + "\n" + document.body.innerText`))
		return s
	}
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		step, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(step, steps...); err != nil {
			t.Fatalf("%s: %v; the page shows:\n%s", what, err, page())
		}
	}
	shot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		run("settle", chromedp.Sleep(300*time.Millisecond))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err, "screenshot "+name)
		require.NoError(t, os.MkdirAll(shots, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644))
	}
	// text waits until the element's text satisfies ok (the page
	// refreshes every 2 s).
	text := func(what, sel string, ok func(string) bool) string {
		t.Helper()
		var last string
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			// textContent of the first match, or null: no waiting on a
			// node that a refresh may replace.
			got, err := chromedp.Run(ctx, chromedp.Evaluate[*string](`(n => n ? n.textContent : null)(document.querySelector(`+jsString(sel)+`))`))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got == nil {
				continue
			}
			last = *got
			if ok(last) {
				return last
			}
		}
		t.Fatalf("%s: %q never came (last %q); the page shows:\n%s", what, sel, last, page())
		return ""
	}
	is := func(want string) func(string) bool {
		return func(s string) bool { return strings.TrimSpace(s) == want }
	}
	has := func(want string) func(string) bool { return func(s string) bool { return strings.Contains(s, want) } }
	goTo := func(hash string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash = `+jsString(hash)))
		require.NoError(t, err, "go to "+hash)
	}

	// Log in: the link lands on the console, without its token.
	run("log in", chromedp.Navigate(uiLink(t, live)), chromedp.WaitVisible(chromedp.CSS(`#nav`)))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.Equal(t, live.url+"/ui/#/connectors", loc, "the token and the page key left the address")
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`localStorage.getItem("ferry-console-key") || ""`))
	require.NoError(t, err)
	require.Len(t, stored, 43, "the page key kept in the origin's storage")

	// Create a hook that refuses the payload "poison".
	goTo("#/hooks")
	run("create the hook", chromedp.WaitVisible(chromedp.CSS(`input[name=name]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=name]`), "guard"),
		chromedp.SendKeys(chromedp.CSS(`input[name=topic]`), "orders"),
		chromedp.SendKeys(chromedp.CSS(`input[name=command]`), `test {payload} != poison`),
		chromedp.Click(chromedp.CSS(`form.inline button[type=submit]`)))
	text("the hook is listed", `tr[data-hook="guard"] td:nth-child(2)`, is("running"))

	live.send(t, "hooks", "orders", "apple", "banana", "poison", "cherry")
	text("three processed", `tr[data-hook="guard"] td[data-count="processed"]`, is("3"))
	text("one dead-lettered", `tr[data-hook="guard"] td[data-count="dead_lettered"]`, is("1"))
	shot("1-hooks")

	// The dead-letter view shows the poison message and why.
	run("open its dead letters", chromedp.Click(chromedp.CSS(`tr[data-hook="guard"] a[data-action="dead-letters"]`)))
	row := `section[data-topic="hooks/hook-guard_dead_letter"] tr[data-offset="0"]`
	text("the poison payload", row+` td:nth-child(6)`, is("poison"))
	text("its reason", row+` td:nth-child(4)`, has("exit"))
	text("where it came from", row+` td:nth-child(5)`, has("hooks/orders"))
	shot("2-dead-letters")

	// Fix the hook: a new configuration version whose command accepts it.
	goTo("#/configs/sink/hook-guard")
	run("edit version 0", chromedp.Click(chromedp.CSS(`tr[data-version="0"] button[data-action="edit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`textarea`)))
	cfg, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`textarea`)))
	require.NoError(t, err, "read the editor")
	require.Contains(t, cfg, `test {payload} != poison`)
	fixed := strings.Replace(cfg, `test {payload} != poison`, `echo fixed {payload}`, 1)
	run("save version 1", chromedp.SetValue(chromedp.CSS(`textarea`), fixed),
		chromedp.Click(chromedp.CSS(`button[data-action="save"]`)))
	text("version 1 stored", `tr[data-version="1"] td:nth-child(1)`, is("1"))
	run("activate it", chromedp.Click(chromedp.CSS(`tr[data-version="1"] button[data-action="activate"]`)))
	text("version 1 active", `tr[data-version="1"] td[data-state]`, has("active"))
	run("restart onto it", chromedp.WaitVisible(chromedp.CSS(`tr[data-version="1"] button[data-action="restart"]`)),
		chromedp.Click(chromedp.CSS(`tr[data-version="1"] button[data-action="restart"]`)))
	text("version 1 running", `tr[data-version="1"] td[data-state]`, has("running"))
	shot("3-configs")

	// Replay the dead letter; the fixed hook processes it.
	goTo("#/dead-letters/sink/hook-guard")
	run("replay it", chromedp.WaitVisible(chromedp.CSS(row+` button[data-action="replay"]`)),
		chromedp.Click(chromedp.CSS(row+` button[data-action="replay"]`)))
	text("the replay reported", `#flash`, has("replayed 1 message(s): 1 to hooks/orders"))
	goTo("#/hooks")
	text("four processed", `tr[data-hook="guard"] td[data-count="processed"]`, is("4"))
	run("show its runs", chromedp.Click(chromedp.CSS(`tr[data-hook="guard"] button[data-action="logs"]`)))
	text("the replayed run", `#runs tbody tr:first-child td:last-child`, has("fixed poison"))
	shot("4-hook-runs")

	// The broker's streams and topics, and the connectors.
	goTo("#/streams")
	text("the orders topic", `section[data-stream="hooks"] tr[data-topic="orders"] td:nth-child(3)`, is("5"))
	shot("5-streams")
	goTo("#/connectors")
	text("the hook's status", `tr[data-key="hook-guard"] td:nth-child(3)`, is("running"))
	shot("6-connectors")
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
