//go:build linux

package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

// Twenty thousand sockets that never log in and keep pinging must not
// lock a well-behaved client out. The sockets are held by two helper
// processes (this test binary again, running TestFloodHelper), as an
// attacker's would be; this process keeps its own descriptor limit
// (RLIMIT_NOFILE, 20000 here and often less), which a broker that holds
// every socket it accepts exhausts (accept4: too many open files, and no
// client could connect).
func TestUnauthenticatedFloodDoesNotLockOutLogin(t *testing.T) {
	t.Parallel()
	const flood, helpers = 20_000, 2
	b := brokertest.Start(t, brokertest.InMemory())

	var procs []*floodProc
	for range helpers {
		procs = append(procs, startFlood(t, b.Addr(), flood/helpers))
	}
	for _, p := range procs {
		require.Equal(t, fmt.Sprintf("open %d", flood/helpers), p.line(t),
			"a helper could not open its sockets (the broker holds too many?)")
	}
	// While they are all open, and ping again, a client logs in.
	for _, p := range procs {
		p.say(t, "ping")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr(), iggy.WithoutReconnect())
	require.NoError(t, err, "a client cannot log in while %d sockets that never log in are open", flood)
	defer c.Close()
	require.NoError(t, c.Ping(ctx))
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	require.LessOrEqual(t, int(st.ClientsCount), broker.DefaultMaxUnauthConns+1,
		"the broker holds more connections than its cap on those not logged in (+ this one)")
	for _, p := range procs {
		require.Equal(t, "pinged", p.line(t))
	}
}

// floodProc is a helper process holding a flood of sockets.
type floodProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

// startFlood starts a helper that opens n sockets to addr, pings on each
// and says "open n"; on "ping" it pings on each again and says "pinged";
// when its stdin closes (at the end of the test) it exits.
func startFlood(t *testing.T, addr string, n int) *floodProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFloodHelper$", "-test.v=false")
	cmd.Env = append(os.Environ(), "FERRY_FLOOD_ADDR="+addr, "FERRY_FLOOD_N="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &floodProc{cmd: cmd, in: in, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "flood: "); ok {
				p.lines <- line
			}
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("flood helper: %v", err)
		}
	})
	return p
}

// line returns the helper's next report (the wait is generous, not a
// measurement).
func (p *floodProc) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		require.True(t, ok, "the flood helper exited")
		return l
	case <-time.After(2 * time.Minute):
		t.Fatal("the flood helper is silent")
		return ""
	}
}

func (p *floodProc) say(t *testing.T, cmd string) {
	t.Helper()
	_, err := io.WriteString(p.in, cmd+"\n")
	require.NoError(t, err)
}

// TestFloodHelper is the body of a flood helper process (see
// startFlood); run by a test, it skips.
func TestFloodHelper(t *testing.T) {
	addr, n := os.Getenv("FERRY_FLOOD_ADDR"), os.Getenv("FERRY_FLOOD_N")
	if addr == "" {
		t.Skip("only run as a helper process of TestUnauthenticatedFloodDoesNotLockOutLogin")
	}
	count, err := strconv.Atoi(n)
	require.NoError(t, err)
	ping := pingFrame()
	socks := make([]net.Conn, count)
	defer func() {
		for _, nc := range socks {
			if nc != nil {
				nc.Close()
			}
		}
	}()
	pingAll := func(d time.Duration) {
		for _, nc := range socks {
			_ = nc.SetWriteDeadline(time.Now().Add(d))
			_, _ = nc.Write(ping) // the broker may have closed it
		}
	}
	var opened atomic.Int64
	var wg sync.WaitGroup
	const workers = 32
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := floodDialer(w)
			for i := w; i < count; i += workers {
				nc, err := d.Dial("tcp", addr)
				if err != nil {
					fmt.Fprintf(os.Stderr, "flood helper: %v\n", err)
					return
				}
				socks[i] = nc
				opened.Add(1)
				_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
				_, _ = nc.Write(ping)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("flood: open %d\n", opened.Load())
	if int(opened.Load()) != count {
		return
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() { // until the test closes stdin
		if sc.Text() == "ping" {
			pingAll(time.Second)
			fmt.Println("flood: pinged")
		}
	}
}

// floodDialer dials from source address 127.0.0.(2 + w%8) with the port
// left to connect (IP_BIND_ADDRESS_NO_PORT): 20,000 connections from one
// source address to one destination make every connect scan the nearly
// full ephemeral port range (about half a millisecond of kernel time
// each), spreading them keeps the test quick.
func floodDialer(w int) net.Dialer {
	const ipBindAddressNoPort = 24 // linux/in.h
	return net.Dialer{
		Timeout:   10 * time.Second,
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+w%8))},
		Control: func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
			})
		},
	}
}
