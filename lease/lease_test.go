package lease

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

func dial(t testing.TB, addr string) *iggy.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+addr, iggy.WithReconnect(20*time.Millisecond, 100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fast are timings that keep the tests short; the defaults are 10× these.
var fast = []Option{WithRenewInterval(50 * time.Millisecond), WithHoldTimeout(200 * time.Millisecond), WithTakeoverDelay(300 * time.Millisecond)}

func newLease(t testing.TB, c *iggy.Client, name string, opts ...Option) *Lease {
	t.Helper()
	l, err := New(c, name, append(append([]Option{}, fast...), opts...)...)
	require.NoError(t, err)
	return l
}

// holdLog is the shared record of who holds a lease: begin fails the
// test if another holder has not ended, or if epochs do not increase in
// the order of the holds.
type holdLog struct {
	mu      sync.Mutex
	holder  string // "" = nobody
	last    uint64
	events  []string
	overlap []string
}

func (h *holdLog) begin(who string, epoch uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, fmt.Sprintf("begin %s epoch %d", who, epoch))
	if h.holder != "" {
		h.overlap = append(h.overlap, fmt.Sprintf("%s began at epoch %d while %s held", who, epoch, h.holder))
	}
	if epoch <= h.last {
		h.overlap = append(h.overlap, fmt.Sprintf("%s began at epoch %d, not above the last epoch %d", who, epoch, h.last))
	}
	h.holder, h.last = who, epoch
}

func (h *holdLog) end(who string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, "end "+who)
	if h.holder == who {
		h.holder = ""
	}
}

func (h *holdLog) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, h.overlap, "events:\n%s", strings.Join(h.events, "\n"))
}

// TestExclusiveAmongContenders: four contenders, each on its own
// connection, take the lease in turn, hold it for a while and then
// release it, lose it by closing their connection (a crash: the server
// drops the membership) or keep it until told to stop. The shared log
// sees one holder at a time, with increasing epochs.
func TestExclusiveAmongContenders(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log holdLog
	const contenders, holds = 4, 16
	var mu sync.Mutex
	count, released, crashed := 0, 0, 0
	var wg sync.WaitGroup
	for i := range contenders {
		wg.Go(func() {
			for gen := 0; ; gen++ {
				who := fmt.Sprintf("c%d.%d", i, gen)
				c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
				if !assertNoError(t, err) {
					return
				}
				l, err := New(c, "src", fast...)
				if !assertNoError(t, err) {
					_ = c.Close()
					return
				}
				for {
					mu.Lock()
					done := count >= holds
					mu.Unlock()
					if ctx.Err() != nil {
						t.Errorf("%s: %v", who, ctx.Err())
						done = true
					}
					if done {
						_ = l.Release(ctx)
						_ = c.Close()
						return
					}
					actx, acancel := context.WithTimeout(ctx, 500*time.Millisecond)
					epoch, lost, err := l.Acquire(actx)
					acancel()
					if errors.Is(err, context.DeadlineExceeded) {
						continue // look at the count again
					}
					if !assertNoError(t, err) {
						_ = c.Close() // a member that is not claiming would keep the lease from the others
						return
					}
					log.begin(who, epoch)
					select {
					case <-time.After(time.Duration(20+rand.IntN(80)) * time.Millisecond):
					case <-lost:
					}
					log.end(who)
					mu.Lock()
					count++
					crash := count%3 == 0
					if crash {
						crashed++
					} else {
						released++
					}
					mu.Unlock()
					if crash {
						_ = c.Close() // the membership goes with the connection
						break
					}
					assertNoError(t, l.Release(ctx))
				}
			}
		})
	}
	wg.Wait()
	log.check(t)
	require.GreaterOrEqual(t, count, holds)
	require.NotZero(t, released)
	require.NotZero(t, crashed)
	t.Logf("%d holds (%d released, %d crashed); last epoch %d", count, released, crashed, log.last)
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("unexpected error: %v", err)
		return false
	}
	return true
}

// TestReleaseHandsOver: a released lease goes to the waiting contender
// without the takeover delay (the release directly follows the claim),
// at the next epoch but one (the release took an offset).
func TestReleaseHandsOver(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newLease(t, dial(t, b.Addr()), "src")
	ea, lostA, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, a.waited, "the first holder waits: an empty lease topic tells nothing")
	require.Equal(t, uint64(1), ea)
	_, _, err = a.Acquire(ctx)
	require.ErrorIs(t, err, ErrHeld)

	bl := newLease(t, dial(t, b.Addr()), "src")
	type result struct {
		epoch uint64
		err   error
	}
	got := make(chan result, 1)
	go func() {
		e, _, err := bl.Acquire(ctx)
		got <- result{e, err}
	}()
	// b is a member, not the holder, until a releases.
	require.Eventually(t, func() bool {
		g, err := a.c.GetConsumerGroup(ctx, a.stream, a.topicID, a.groupID)
		return err == nil && len(g.Members) == 2
	}, time.Minute, 10*time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("b acquired while a held: %+v", r)
	default:
	}
	released := time.Now()
	require.NoError(t, a.Release(ctx))
	select {
	case <-lostA:
	default:
		t.Fatal("lost is open after Release")
	}
	r := <-got
	require.NoError(t, r.err)
	t.Logf("handed over %s after Release began (renew interval 50ms)", time.Since(released).Round(time.Millisecond))
	require.Equal(t, ea+2, r.epoch)
	require.False(t, bl.waited, "a released lease is claimed without the takeover delay")
	require.NoError(t, bl.Release(ctx))
}

// TestLeasesShareAClient: one client holds two leases at once (one
// topic and group each); a contender for one of them is not given it,
// and waiting for it ends with its context.
func TestLeasesShareAClient(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := dial(t, b.Addr())
	la, lb := newLease(t, c, "a"), newLease(t, c, "b")
	ea, lostA, err := la.Acquire(ctx)
	require.NoError(t, err)
	eb, lostB, err := lb.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), ea)
	require.Equal(t, uint64(1), eb, "each name has its own log of claims")

	other := newLease(t, dial(t, b.Addr()), "a")
	wctx, wcancel := context.WithTimeout(ctx, 1500*time.Millisecond) // several takeover delays
	_, _, err = other.Acquire(wctx)
	wcancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, other.Release(ctx))
	for _, lost := range []<-chan struct{}{lostA, lostB} {
		select {
		case <-lost:
			t.Fatal("a lease was lost while held")
		default:
		}
	}
	require.NoError(t, la.Release(ctx))
	require.NoError(t, lb.Release(ctx))
}

// proxy forwards TCP connections to target until cut is called, which
// closes the connections open so far (new ones are forwarded again).
type proxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close(); p.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestLostOnConnectionDrop: the holder's connection is cut (the client
// reconnects at once, in a new session). Its lost closes, with a reason,
// and the other contender takes over only after the holder's end, after
// the takeover delay (the lease was not released).
func TestLostOnConnectionDrop(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	px := startProxy(t, b.Addr())
	a := newLease(t, dial(t, px.addr()), "src")
	ea, lostA, err := a.Acquire(ctx)
	require.NoError(t, err)
	var log holdLog
	log.begin("a", ea)

	// The hold timeout (200ms) bounds a's lost; b's longer takeover delay
	// leaves a margin for a loaded machine.
	bl := newLease(t, dial(t, b.Addr()), "src", WithTakeoverDelay(time.Second))
	got := make(chan error, 1)
	var eb uint64
	go func() {
		var err error
		eb, _, err = bl.Acquire(ctx)
		if err == nil {
			log.begin("b", eb)
		}
		got <- err
	}()
	require.Eventually(t, func() bool {
		g, err := bl.c.GetConsumerGroup(ctx, bl.stream, bl.topicID, bl.groupID)
		return err == nil && len(g.Members) == 2
	}, time.Minute, 10*time.Millisecond)
	px.cut()
	<-lostA
	log.end("a")
	require.ErrorIs(t, a.LostReason(), ErrLost)
	require.NoError(t, <-got)
	log.check(t)
	require.Greater(t, eb, ea)
	require.True(t, bl.waited, "a lease lost without a release is taken over after the takeover delay")
	t.Logf("a lost: %v", a.LostReason())
	// a can contend again on its reconnected client.
	require.NoError(t, bl.Release(ctx))
	ea2, _, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.Greater(t, ea2, eb)
	require.NoError(t, a.Release(ctx))
}

// TestNewRejectsBadOptions: a bad name or timings are refused, naming them.
func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	c := &iggy.Client{}
	_, err := New(c, "")
	require.ErrorContains(t, err, "lease name")
	_, err = New(c, strings.Repeat("n", 300))
	require.ErrorContains(t, err, "lease name")
	_, err = New(c, "src", WithHoldTimeout(time.Second), WithTakeoverDelay(time.Second))
	require.ErrorContains(t, err, "takeover delay")
	_, err = New(nil, "src")
	require.ErrorContains(t, err, "no client")
	l, err := New(c, "src")
	require.NoError(t, err)
	require.Equal(t, "src", l.Name())
}

const holderAddrEnv = "FERRY_LEASE_HOLDER_ADDR" // set for the child process only

// TestHelperLeaseHolder is not a test: TestTakeoverAfterKill runs the test
// binary again with only this function, as a process that acquires lease
// "src" on the broker at $FERRY_LEASE_HOLDER_ADDR with the default
// timings, prints "held <epoch>" and holds it until killed.
func TestHelperLeaseHolder(t *testing.T) {
	addr := os.Getenv(holderAddrEnv)
	if addr == "" {
		t.Skip("helper process for TestTakeoverAfterKill")
	}
	ctx := context.Background()
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+addr)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	l, err := New(c, "src")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	epoch, lost, err := l.Acquire(ctx)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Println("held", epoch)
	parent := os.Getppid()
	for {
		select {
		case <-lost:
			fmt.Println("lost", l.LostReason())
			os.Exit(3)
		case <-time.After(200 * time.Millisecond):
			if os.Getppid() != parent {
				os.Exit(2) // orphaned: the test is gone
			}
		}
	}
}

// TestTakeoverAfterKill: the holder is a process of its own, killed with
// SIGKILL; a contender waiting in Acquire (default timings) takes over,
// at a higher epoch, after the takeover delay. The time from the kill to
// the takeover is logged (not asserted).
func TestTakeoverAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLeaseHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), holderAddrEnv+"="+b.Addr())
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "the child printed nothing")
	line := sc.Text()
	es, ok := strings.CutPrefix(line, "held ")
	require.True(t, ok, "child: %s", line)
	childEpoch, err := strconv.ParseUint(es, 10, 64)
	require.NoError(t, err)

	l, err := New(dial(t, b.Addr()), "src") // default timings
	require.NoError(t, err)
	type result struct {
		epoch uint64
		at    time.Time
		err   error
	}
	got := make(chan result, 1)
	go func() {
		e, _, err := l.Acquire(ctx)
		got <- result{e, time.Now(), err}
	}()
	require.Eventually(t, func() bool {
		g, err := l.c.GetConsumerGroup(ctx, l.stream, l.topicID, l.groupID)
		return err == nil && len(g.Members) == 2
	}, time.Minute, 10*time.Millisecond)
	select {
	case r := <-got:
		t.Fatalf("acquired while the child held: %+v", r)
	default:
	}
	killed := time.Now()
	require.NoError(t, cmd.Process.Kill())
	r := <-got
	require.NoError(t, r.err)
	require.Greater(t, r.epoch, childEpoch)
	require.True(t, l.waited)
	t.Logf("child held epoch %d; taken over at epoch %d, %s after the kill", childEpoch, r.epoch, r.at.Sub(killed).Round(time.Millisecond))
	require.NoError(t, l.Release(ctx))
}
