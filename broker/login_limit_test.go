package broker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// fakeClock stands still until advanced, and records every wait asked of
// it. A wait fires at once, or, while hold is set, once hold is closed.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
	hold  chan struct{}
	asked chan time.Duration // each wait, if set
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, d)
	ch := make(chan time.Time, 1)
	hold, asked, now := f.hold, f.asked, f.now
	if asked != nil {
		asked <- d
	}
	if hold == nil {
		ch <- now
		return ch
	}
	go func() {
		<-hold
		ch <- now
	}()
	return ch
}

func (f *fakeClock) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// takeWaits returns the waits recorded since the last call.
func (f *fakeClock) takeWaits() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.waits
	f.waits = nil
	return w
}

// tryLogin logs in on a new connection and returns the eviction reason
// (0 for success).
func tryLogin(t *testing.T, b *Broker, user, pass string) wire.EvictionReason {
	t.Helper()
	c, err := rawclient.Dial(context.Background(), b.Addr())
	require.NoError(t, err)
	defer c.Close()
	rep, err := c.Login(user, pass)
	require.NoError(t, err)
	if rep.Eviction != nil {
		return rep.Eviction.Reason
	}
	require.Zero(t, rep.Status())
	require.NotZero(t, c.Session)
	return 0
}

// wantWait is the wait the limiter owes attempt k (1-based) of a run of
// failures on one key, on a clock that stands still: the backoffs of the
// failures before it, added up, at most loginMaxWait.
func wantWait(k int) time.Duration {
	var d time.Duration
	for n := 1; n < k; n++ {
		d += loginBackoff(n)
	}
	return min(d, loginMaxWait)
}

// Wrong passwords from one address are slowed: the first
// loginFreeFailures go through at once, each later attempt waits the
// growing backoff (read from the clock the limiter asks, not measured). A
// correct password during the backoff is late but works; once the backoff
// has passed it is not delayed, and it clears the failures.
func TestLoginBackoff(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, _ := startInternal(t, Config{clock: clk})
	const attempts = 12
	var waits []time.Duration
	for k := 1; k <= attempts; k++ {
		require.Equal(t, wire.EvictInvalidCredentials, tryLogin(t, b, "iggy", "wrong"), "attempt %d", k)
		got := clk.takeWaits()
		if want := wantWait(k); want == 0 {
			require.Empty(t, got, "attempt %d waited", k)
		} else {
			require.Equal(t, []time.Duration{want}, got, "attempt %d", k)
			waits = append(waits, got[0])
		}
	}
	require.Len(t, waits, attempts-loginFreeFailures-1)
	require.GreaterOrEqual(t, waits[len(waits)-1], 5*time.Second, "the backoff after %d failures", attempts-1)

	// During the backoff: late, but it works.
	require.Zero(t, tryLogin(t, b, "iggy", "iggy"))
	require.Equal(t, []time.Duration{wantWait(attempts + 1)}, clk.takeWaits())
	// That success cleared the failures: the next ones start over.
	for k := 1; k <= loginFreeFailures+1; k++ {
		require.Equal(t, wire.EvictInvalidCredentials, tryLogin(t, b, "iggy", "wrong"))
	}
	require.Empty(t, clk.takeWaits())

	// Once the backoff has passed, no delay.
	require.Equal(t, wire.EvictInvalidCredentials, tryLogin(t, b, "iggy", "wrong"))
	require.Len(t, clk.takeWaits(), 1)
	clk.advance(loginMaxWait + loginMaxDelay)
	require.Zero(t, tryLogin(t, b, "iggy", "iggy"))
	require.Empty(t, clk.takeWaits(), "a correct password after the backoff was delayed")
}

// The backoff is per username too: failures on one username from many
// addresses slow it down, and leave other usernames alone.
func TestLoginBackoffPerUsername(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	l := newLoginLimiter(clk)
	fail := func(addr, user string) time.Duration {
		a, wait := l.begin(addrKey(addr), userKey(user))
		a.end(loginFailed)
		return wait
	}
	for k := 1; k <= 8; k++ {
		require.Equal(t, wantWait(k), fail(fmt.Sprintf("10.0.0.%d:1234", k), "iggy"), "attempt %d", k)
	}
	require.Zero(t, fail("10.0.0.100:1234", "someone-else"))
}

// The table never holds more than loginTableSize keys; the least recently
// used go first.
func TestLoginLimiterIsBounded(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	l := newLoginLimiter(clk)
	for i := range loginTableSize + 500 {
		a, _ := l.begin(addrKey(fmt.Sprintf("10.%d.%d.%d:1", i>>16, (i>>8)&255, i&255)))
		a.end(loginFailed)
	}
	require.Equal(t, loginTableSize, l.size())
}

// A login waiting out its backoff holds only its own connection: a
// logged-in client and another client that has not logged in are served
// meanwhile.
func TestDelayedLoginDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	b, loggedIn := startInternal(t, Config{clock: clk})
	for range loginFreeFailures + 1 {
		require.Equal(t, wire.EvictInvalidCredentials, tryLogin(t, b, "iggy", "wrong"))
	}
	hold := make(chan struct{})
	asked := make(chan time.Duration, 1)
	clk.mu.Lock()
	clk.hold, clk.asked = hold, asked
	clk.mu.Unlock()

	delayed := make(chan wire.EvictionReason, 1)
	go func() {
		c, err := rawclient.Dial(context.Background(), b.Addr())
		if err != nil {
			delayed <- 0
			return
		}
		defer c.Close()
		rep, err := c.Login("iggy", "wrong")
		if err != nil || rep.Eviction == nil {
			delayed <- 0
			return
		}
		delayed <- rep.Eviction.Reason
	}()
	require.Positive(t, <-asked, "the login is not delayed")

	rep, err := loggedIn.Do(wire.CmdPing, nil)
	require.NoError(t, err)
	require.Zero(t, rep.Status())
	other, err := rawclient.Dial(context.Background(), b.Addr())
	require.NoError(t, err)
	defer other.Close()
	rep, err = other.Do(wire.CmdPing, nil)
	require.NoError(t, err)
	require.Zero(t, rep.Status())
	select {
	case r := <-delayed:
		t.Fatalf("the delayed login was answered (%v) before its backoff passed", r)
	default:
	}

	close(hold)
	require.Equal(t, wire.EvictInvalidCredentials, <-delayed)
}

// Failed logins are logged at warn level at most once per address per
// loginWarnEvery, with the number of failures the line stands for.
func TestFailedLoginWarningsAreRateLimited(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	logs := &recordLog{}
	b, _ := startInternal(t, Config{clock: clk, Logger: slog.New(logs)})
	for range 10 {
		require.Equal(t, wire.EvictInvalidCredentials, tryLogin(t, b, "iggy", "wrong"))
	}
	require.Equal(t, []int64{1}, logs.failures())
	clk.advance(loginWarnEvery)
	require.Equal(t, wire.EvictInvalidCredentials, tryLogin(t, b, "iggy", "wrong"))
	require.Equal(t, []int64{1, 10}, logs.failures())
}

// recordLog keeps the "failures" attribute of every "failed logins"
// warning.
type recordLog struct {
	mu   sync.Mutex
	seen []int64
}

func (r *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (r *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recordLog) WithGroup(string) slog.Handler            { return r }

func (r *recordLog) Handle(_ context.Context, rec slog.Record) error {
	if rec.Level != slog.LevelWarn || rec.Message != "failed logins" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "failures" {
			r.mu.Lock()
			r.seen = append(r.seen, a.Value.Int64())
			r.mu.Unlock()
		}
		return true
	})
	return nil
}

func (r *recordLog) failures() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int64(nil), r.seen...)
}

// A password login matches the stored argon2id hash exactly: a prefix,
// an extension or another case of the password does not match, nor does
// another username; an inactive user is refused like a wrong password.
func TestCheckPassword(t *testing.T) {
	t.Parallel()
	hash, err := hashPassword("secret-password")
	require.NoError(t, err)
	b := &Broker{verified: newVerifiedPasswords(), users: map[uint32]*user{
		0: {id: 0, name: "iggy", status: wire.UserActive, password: hash},
		1: {id: 1, name: "sleepy", status: wire.UserInactive, password: hash},
	}}
	for range 2 { // the second time from the verified cache
		id, reason := b.checkPassword("iggy", "secret-password")
		require.Equal(t, uint32(0), id)
		require.Zero(t, reason)
	}
	for _, p := range []string{"secret", "secret-password!", "Secret-password", ""} {
		_, reason := b.checkPassword("iggy", p)
		require.Equal(t, wire.EvictInvalidCredentials, reason, "%q", p)
	}
	for _, u := range []string{"iggy2", "sleepy", "ig"} {
		_, reason := b.checkPassword(u, "secret-password")
		require.Equal(t, wire.EvictInvalidCredentials, reason, "%q", u)
	}
}
