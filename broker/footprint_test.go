package broker_test

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// pingFrame is a ping as a client sends it before login (request 1,
// session 0).
func pingFrame() []byte {
	f := make([]byte, wire.HeaderSize)
	h := wire.RequestHeader{Client: wire.U128{Lo: 7}, Operation: wire.OpNonReplicated,
		Command: wire.CmdPing, Request: 1, Size: wire.HeaderSize}
	h.Put(f)
	return f
}

// pingOnce sends a ping on nc and reads its reply.
func pingOnce(nc net.Conn, ping []byte) error {
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(ping); err != nil {
		return err
	}
	_, err := wire.ReadFrame(nc, make([]byte, 0, wire.HeaderSize), wire.HeaderSize)
	return err
}

// heapAndStacks is the memory the Go runtime holds for live objects and
// goroutine stacks, after a full collection.
func heapAndStacks() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// unauthFootprint opens n connections to addr that each ping once and
// stay open without logging in, and returns the memory they cost the
// process per connection (both ends: the client's socket is in this
// process too, see bareFootprint).
func unauthFootprint(tb testing.TB, addr string, n int) float64 {
	tb.Helper()
	ping := pingFrame()
	before := heapAndStacks()
	defer closeAll(dialAll(tb, addr, n, func(nc net.Conn) error { return pingOnce(nc, ping) }))
	after := heapAndStacks()
	return float64(int64(after)-int64(before)) / float64(n)
}

// dialAll opens n connections to addr, calling then on each.
func dialAll(tb testing.TB, addr string, n int, then func(net.Conn) error) []net.Conn {
	tb.Helper()
	conns := make([]net.Conn, 0, n)
	for range n {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			conns = append(conns, nc)
			err = then(nc)
		}
		if err != nil {
			closeAll(conns)
			require.NoError(tb, err)
		}
	}
	return conns
}

func closeAll(conns []net.Conn) {
	for _, nc := range conns {
		nc.Close()
	}
}

// bareFootprint is unauthFootprint against a listener that accepts and
// holds connections without reading: the cost of a TCP socket pair in
// this process, to subtract from unauthFootprint.
func bareFootprint(tb testing.TB, n int) float64 {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	defer ln.Close()
	held := make(chan net.Conn, n)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			held <- nc
		}
	}()
	defer func() {
		for len(held) > 0 {
			(<-held).Close()
		}
	}()
	before := heapAndStacks()
	defer closeAll(dialAll(tb, ln.Addr().String(), n, func(net.Conn) error { return nil }))
	require.Eventually(tb, func() bool { return len(held) == n }, 30*time.Second, time.Millisecond)
	after := heapAndStacks()
	return float64(int64(after)-int64(before)) / float64(n)
}

// BenchmarkUnauthenticatedConnMemory reports what one connection that
// has not logged in costs the broker, in bytes of heap and stack
// (B/conn), with the cost of a bare TCP socket pair subtracted.
//
//	go test ./broker -run '^$' -bench UnauthenticatedConnMemory -benchtime 1x
func BenchmarkUnauthenticatedConnMemory(b *testing.B) {
	const n = 2000
	br := brokertest.Start(b, brokertest.InMemory(), brokertest.Config(func(c *broker.Config) {
		c.MaxConns, c.MaxUnauthConns = 2*n, 2*n
	}))
	var sum float64
	for range b.N {
		sum += unauthFootprint(b, br.Addr(), n) - bareFootprint(b, n)
	}
	b.ReportMetric(sum/float64(b.N), "B/conn")
}

// A connection that has not logged in costs little: no 64 KiB buffers
// (they come with the login), about 12 KiB in all, mostly goroutine
// stacks. It was 208 KB, so 5,000 idle sockets held a gigabyte.
//
// Not parallel: it reads the process's memory statistics.
func TestUnauthenticatedConnFootprint(t *testing.T) {
	const n = 1000
	b := brokertest.Start(t, brokertest.InMemory())
	perConn := unauthFootprint(t, b.Addr(), n) - bareFootprint(t, n)
	t.Logf("%.0f bytes per connection that has not logged in", perConn)
	require.Less(t, perConn, float64(32<<10), "bytes per connection that has not logged in")
}
