package broker

// The login limiter slows password and token guessing. Upstream has no
// such limit; this broker keeps the protocol's answers (a failed login is
// still Eviction(InvalidCredentials) or Eviction(InvalidToken), §3.2) and
// only makes them late.
//
// Every attempt is keyed by its remote address (IP, port dropped) and, for
// a password login, its username. The first loginFreeFailures failures of
// a key cost nothing; after that each attempt on the key is spaced
// loginBaseDelay after the one before, doubling per failure up to
// loginMaxDelay. An attempt waits for the later of its keys' next slots
// before its credentials are even checked, so a correct password during a
// backoff is late too, and works once the backoff has passed; a success
// clears its keys. Slots are reserved when an attempt arrives, counting
// attempts still in flight as failures, so parallel connections queue up
// instead of guessing together; one attempt never waits more than
// loginMaxWait. The wait holds only that connection's reader: other
// connections, logged in or not, are served meanwhile.
//
// Memory is bounded: the table holds at most loginTableSize keys and
// evicts the least recently used; a key without a failure for loginForget
// starts over.

import (
	"container/list"
	"net"
	"sync"
	"time"
)

const (
	loginFreeFailures = 3
	loginBaseDelay    = 100 * time.Millisecond
	loginMaxDelay     = 5 * time.Second
	loginMaxWait      = 10 * time.Second
	loginForget       = 15 * time.Minute
	loginTableSize    = 8192
	// loginWarnEvery bounds the failed-login warnings: at most one per
	// remote address per interval, with the count of failures it covers.
	loginWarnEvery = time.Minute
)

// loginLimiter is the table of keys; safe for concurrent use.
type loginLimiter struct {
	clock clock
	mu    sync.Mutex
	keys  map[string]*list.Element // of *loginKey
	lru   list.List                // least recently used first
}

// loginKey is the state of one address or username.
type loginKey struct {
	name     string
	failures int       // since the last success
	pending  int       // attempts reserved and not yet ended
	next     time.Time // earliest time the next attempt may be checked
	lastFail time.Time
	warn     logQuota // warnings about this key (addresses only)
}

func newLoginLimiter(c clock) *loginLimiter {
	return &loginLimiter{clock: c, keys: map[string]*list.Element{}}
}

// loginBackoff is the spacing after an attempt that makes n failures.
func loginBackoff(n int) time.Duration {
	if n <= loginFreeFailures {
		return 0
	}
	if shift := n - loginFreeFailures - 1; shift < 16 {
		return min(loginBaseDelay<<shift, loginMaxDelay)
	}
	return loginMaxDelay
}

// addrKey and userKey name the limiter's keys.
func addrKey(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		remote = host
	}
	return "addr " + remote
}

func userKey(username string) string { return "user " + username }

// loginAttempt is one attempt holding its reserved slot.
type loginAttempt struct {
	l    *loginLimiter
	keys []*loginKey // [0] is the address
	at   time.Time   // the reserved slot
}

// begin reserves a slot for an attempt on keys (the address first) and
// returns how long the caller must wait before checking it. The caller
// must end the attempt.
func (l *loginLimiter) begin(keys ...string) (*loginAttempt, time.Duration) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	a := &loginAttempt{l: l, at: now}
	for _, name := range keys {
		k := l.touch(name, now)
		a.keys = append(a.keys, k)
		if k.next.After(a.at) {
			a.at = k.next
		}
	}
	a.at = minTime(a.at, now.Add(loginMaxWait))
	for _, k := range a.keys {
		// Assume this attempt fails until it ends.
		k.pending++
		k.next = maxTime(k.next, a.at.Add(loginBackoff(k.failures+k.pending)))
	}
	return a, a.at.Sub(now)
}

// touch returns the key name, created or moved to the back of the LRU,
// forgotten failures dropped. Caller holds l.mu.
func (l *loginLimiter) touch(name string, now time.Time) *loginKey {
	if e, ok := l.keys[name]; ok {
		l.lru.MoveToBack(e)
		k := e.Value.(*loginKey)
		if k.pending == 0 && now.Sub(k.lastFail) > loginForget {
			k.failures, k.next = 0, time.Time{}
		}
		return k
	}
	if l.lru.Len() >= loginTableSize {
		oldest := l.lru.Front()
		delete(l.keys, oldest.Value.(*loginKey).name)
		l.lru.Remove(oldest)
	}
	k := &loginKey{name: name}
	l.keys[name] = l.lru.PushBack(k)
	return k
}

// loginOutcome is how an attempt ended.
type loginOutcome int

const (
	loginSucceeded loginOutcome = iota
	loginFailed
	loginAbandoned // never checked (the broker closed)
)

// end records the outcome. For a failure it reports whether to warn
// about the address now, and how many failures the warning covers.
func (a *loginAttempt) end(o loginOutcome) (count int, warn bool) {
	now := a.l.clock.Now()
	a.l.mu.Lock()
	defer a.l.mu.Unlock()
	for _, k := range a.keys {
		k.pending--
		switch o {
		case loginSucceeded:
			k.failures, k.next = 0, time.Time{}
		case loginFailed:
			k.failures++
			k.lastFail = now
		}
	}
	if o != loginFailed {
		return 0, false
	}
	return a.keys[0].warn.allow(now, loginWarnEvery)
}

// size is the number of keys held (for tests of the bound).
func (l *loginLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
