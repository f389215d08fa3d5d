package broker

import (
	"bufio"
	"container/list"
	"errors"
	"io"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
)

// conn is one client connection. Its reader goroutine reads a frame,
// handles it to the end and queues the reply, in order (lockstep clients
// and pipelining clients both get replies in request order). Its writer
// goroutine writes queued frames and is the only writer of the socket; an
// eviction from outside (a stale client) goes through kick, and also
// shortens the write deadline so that a writer stuck on a client that
// stopped reading gives up (the connection then closes, and the reader
// ends the session).
//
// Memory bounds: a frame larger than maxPreAuthFrame before a session is
// bound closes the connection; frames are read into a buffer that grows
// with the bytes that arrive; the reply queue holds at most maxQueueFrames
// frames and maxQueueBytes bytes (one larger frame when it is empty).
// Until the connection first logs in it reads and writes the socket
// unbuffered into a frame buffer of one header, so a connection that
// never logs in costs about 12 KiB (mostly its two goroutines' stacks); the
// 64 KiB read and write buffers come with the first login.
// Deadlines: a connection without a session is closed Config.LoginTimeout
// after it connected or logged out, whatever it sends meanwhile; a write
// that makes no progress for writeTimeout closes the connection. A
// logged-in connection may stay idle (heartbeats are the client's
// business; only stale group members are evicted).
type conn struct {
	b      *Broker
	nc     net.Conn
	id     uint64 // transport id; get_clients reports its low 32 bits
	remote string

	out      chan outFrame       // closed by the reader when it ends
	kick     chan evictionReason // unsolicited eviction, buffered 1
	lastSeen atomic.Int64        // unix nanos of the last request
	evictBy  atomic.Int64        // unix nanos by which an evicted connection's writes must end; 0 = not evicted
	queue    byteQueue           // bytes queued on out
	gone     chan struct{}       // closed by close
	goneOnce sync.Once
	authed   atomic.Bool   // has logged in at least once: buffers are worth it
	waiting  *list.Element // in Broker.admission.waiting; guarded by Broker.connsMu

	// Reader goroutine only.
	checker   wire.BatchChecker
	watermark uint64 // highest committed metadata request id of this session
	cached    *cachedReply
	loginBy   time.Time // while no session is bound: when the connection is closed

	// mu guards the session binding and the groups set; it is taken after
	// a group's mu when both are held.
	mu      sync.Mutex
	bound   bool
	session uint64
	client  wire.U128 // the client id given at Register
	userID  uint32
	groups  map[*group]struct{}
}

type outFrame struct {
	b     []byte
	close bool // close the connection after writing this frame
}

// Connection limits; see conn.
const (
	// maxPreAuthFrame bounds a frame read while no session is bound: a
	// Register body is a few hundred bytes.
	maxPreAuthFrame = 64 << 10
	maxQueueFrames  = 64
	maxQueueBytes   = wire.MaxFrameSize
	// minWriteTimeout is the floor of a connection's write timeout, which
	// is otherwise 1.2 × HeartbeatInterval.
	minWriteTimeout = 10 * time.Second
	// evictGrace is how long an evicted connection's writer may take to
	// send the eviction before its writes are cut.
	evictGrace = time.Second
)

// byteQueue counts the bytes queued for the writer; the reader waits for
// room before queueing more than maxQueueBytes. The writer always drains
// (it discards frames once the socket failed), so the wait ends.
type byteQueue struct {
	mu    sync.Mutex
	room  sync.Cond
	bytes int
}

// reserve waits until n more bytes fit (always when nothing is queued).
func (q *byteQueue) reserve(n int) {
	q.mu.Lock()
	for q.bytes > 0 && q.bytes+n > maxQueueBytes {
		q.room.Wait()
	}
	q.bytes += n
	q.mu.Unlock()
}

// release returns n bytes the writer is done with.
func (q *byteQueue) release(n int) {
	q.mu.Lock()
	q.bytes -= n
	q.mu.Unlock()
	q.room.Signal()
}

type evictionReason = wire.EvictionReason

const evictStale = wire.EvictStaleClient

// cachedReply is the reply of the last committed metadata request, kept
// for a client that retries with the same request id.
type cachedReply struct {
	request uint64
	rep     reply
}

// reply is what a handler decided: a reply frame (status, body), an
// eviction, or nothing.
type reply struct {
	status wire.Code // non-zero: a pre-commit denial; the body is dropped
	body   []byte    // the payload, with its result section if any
	// framed: body starts with wire.HeaderSize bytes left for the reply
	// header, so the body is sent as the frame without a copy (polls).
	framed bool
	op     wire.Operation // reply operation; 0 echoes the request's
	evict  wire.EvictionReason
	silent bool // send nothing
	drop   bool // close the connection after the reply (if any)
}

func newConn(b *Broker, nc net.Conn) *conn {
	c := &conn{
		b: b, nc: nc, id: b.connSeq.Add(1), remote: nc.RemoteAddr().String(),
		out: make(chan outFrame, maxQueueFrames), kick: make(chan evictionReason, 1),
		gone: make(chan struct{}), groups: map[*group]struct{}{},
	}
	c.queue.room.L = &c.queue.mu
	now := time.Now()
	c.lastSeen.Store(now.UnixNano())
	c.loginBy = now.Add(b.cfg.LoginTimeout)
	return c
}

// close closes the socket from outside the connection's goroutines (an
// admission eviction) and wakes a reader waiting out a login backoff.
func (c *conn) close() {
	c.goneOnce.Do(func() { close(c.gone) })
	c.nc.Close()
}

// enqueue hands a frame to the writer, waiting for room in the queue.
func (c *conn) enqueue(f outFrame) {
	c.queue.reserve(len(f.b))
	c.out <- f
}

func (c *conn) lastSeenTime() time.Time { return time.Unix(0, c.lastSeen.Load()) }

func (c *conn) inGroups() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.groups) > 0
}

// sessionInfo returns the binding under c.mu.
func (c *conn) sessionInfo() (bound bool, session uint64, client wire.U128, user uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bound, c.session, c.client, c.userID
}

// evict asks the writer to send an eviction and close the connection. A
// writer blocked on a client that does not read cannot see the request, so
// the write deadline is cut to evictGrace from the first call; the janitor
// calls again while the connection lingers, which re-applies it. It
// reports whether this was the first call.
func (c *conn) evict(r evictionReason) bool {
	select {
	case c.kick <- r:
	default:
	}
	by := time.Now().Add(evictGrace).UnixNano()
	first := c.evictBy.CompareAndSwap(0, by)
	if !first {
		by = c.evictBy.Load()
	}
	_ = c.nc.SetWriteDeadline(time.Unix(0, by))
	return first
}

// writeTimeout is how long one write may make no progress.
func (b *Broker) writeTimeout() time.Duration {
	return max(b.cfg.HeartbeatInterval*6/5, minWriteTimeout)
}

// deadlineWriter writes to the socket in chunks, each under a fresh write
// deadline (cut short once the connection is evicted), so a slow reader
// is served and a reader that stopped is dropped.
type deadlineWriter struct{ c *conn }

const writeChunk = 64 << 10

func (w deadlineWriter) Write(p []byte) (int, error) {
	timeout := w.c.b.writeTimeout()
	done := 0
	for done < len(p) {
		deadline := time.Now().Add(timeout)
		if by := w.c.evictBy.Load(); by != 0 && by < deadline.UnixNano() {
			deadline = time.Unix(0, by)
		}
		if err := w.c.nc.SetWriteDeadline(deadline); err != nil {
			return done, err
		}
		n, err := w.c.nc.Write(p[done:min(len(p), done+writeChunk)])
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

const maxPooledFrame = 1 << 20

// maxKeptReadBuffer bounds the read buffer a logged-in connection keeps.
const maxKeptReadBuffer = 64 << 20

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getFrame(n int) []byte {
	if n > maxPooledFrame {
		return make([]byte, n)
	}
	p := framePool.Get().(*[]byte)
	if cap(*p) < n {
		return make([]byte, n)
	}
	return (*p)[:n]
}

func putFrame(b []byte) {
	if cap(b) > maxPooledFrame || cap(b) < wire.HeaderSize {
		return
	}
	b = b[:0]
	framePool.Put(&b)
}

// keepReadBuffer reports whether a connection's read buffer, holding the
// frame just read, is kept for the next: any buffer up to maxPooledFrame,
// and a logged-in connection's larger one (up to maxKeptReadBuffer) while its
// frames fill a quarter of it, so a producer sending big batches reads
// each into the same buffer and one that went back to small frames lets
// the big buffer go.
func keepReadBuffer(frame []byte, bound bool) bool {
	return cap(frame) <= maxPooledFrame || bound && cap(frame) <= maxKeptReadBuffer && len(frame) >= cap(frame)/4
}

func (c *conn) readLoop() {
	defer c.finish()
	var r io.Reader = c.nc // unbuffered until the first login
	buf := make([]byte, 0, wire.HeaderSize)
	var deadline time.Time // the read deadline set; zero = none
	for {
		limit := wire.MaxFrameSize
		if bound, _, _, _ := c.sessionInfo(); !bound {
			// Before login: small frames, and a deadline that requests
			// do not move.
			limit = maxPreAuthFrame
			if !deadline.Equal(c.loginBy) {
				if err := c.nc.SetReadDeadline(c.loginBy); err != nil {
					c.logReadError(err)
					return
				}
				deadline = c.loginBy
			}
		} else {
			if !deadline.IsZero() {
				if err := c.nc.SetReadDeadline(time.Time{}); err != nil {
					c.logReadError(err)
					return
				}
				deadline = time.Time{}
			}
			if r == c.nc {
				// Unbuffered reads took only whole frames, so nothing is
				// lost by buffering from here on.
				r = bufio.NewReaderSize(c.nc, 64<<10)
				buf = make([]byte, 0, 64<<10)
			}
		}
		frame, err := wire.ReadFrame(r, buf, limit)
		if err != nil {
			c.logReadError(err)
			return
		}
		if keepReadBuffer(frame, limit == wire.MaxFrameSize) {
			buf = frame[:0]
		} else if cap(buf) > maxPooledFrame {
			buf = make([]byte, 0, 64<<10)
		}
		c.lastSeen.Store(time.Now().UnixNano())
		if k := wire.Kind(frame); k != wire.FrameRequest {
			c.b.log.Info("ignoring a frame that is not a request", "conn", c.id, "kind", k)
			continue
		}
		if !c.serve(frame) {
			return
		}
	}
}

func (c *conn) logReadError(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.b.log.Debug("connection closed", "conn", c.id, "remote", c.remote)
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.b.log.Info("closing a connection that did not log in in time", "conn", c.id, "remote", c.remote,
			"timeout", c.b.cfg.LoginTimeout)
	case errors.Is(err, wire.ErrFrameTooLarge), errors.Is(err, wire.ErrFrameTooSmall), errors.Is(err, wire.ErrMalformed):
		c.b.log.Warn("closing connection on a malformed frame", "conn", c.id, "remote", c.remote, "err", err)
	default:
		c.b.log.Debug("connection read failed", "conn", c.id, "remote", c.remote, "err", err)
	}
}

// serve handles one request frame and queues its reply. It reports false
// when the connection must end. A panic in a handler is logged, counted
// and ends only this connection.
func (c *conn) serve(frame []byte) (keep bool) {
	defer func() {
		if p := recover(); p != nil {
			c.b.panics.Add(1)
			c.b.log.Error("panic while serving a request; closing the connection",
				"conn", c.id, "panic", p, "stack", string(debug.Stack()))
			keep = false
		}
	}()
	h, err := wire.DecodeRequestHeader(frame)
	if err == nil {
		err = h.Validate()
	}
	if err != nil {
		// Upstream drops such requests without a reply.
		c.b.log.Debug("dropping a request with an invalid header", "conn", c.id, "err", err)
		return true
	}
	r := &request{c: c, h: h, body: frame[wire.HeaderSize:]}
	return c.send(&r.h, c.b.dispatch(r))
}

// send queues the reply to h and reports whether the connection stays.
func (c *conn) send(h *wire.RequestHeader, rep reply) bool {
	if rep.evict != 0 {
		f := getFrame(wire.HeaderSize)
		e := wire.Eviction{Client: h.Client, Reason: rep.evict}
		if rep.evict == wire.EvictIncompatibleProtocol {
			e.ServerProtocolMax, e.ServerProtocolMin = wire.ProtocolVersion, wire.ProtocolVersion
		}
		e.Put(f)
		c.enqueue(outFrame{b: f, close: true})
		return false
	}
	if rep.silent {
		return !rep.drop
	}
	if rep.status != 0 {
		rep.body, rep.framed = nil, false
	}
	op := rep.op
	if op == 0 {
		op = h.Operation
	}
	_, session, _, _ := c.sessionInfo()
	var f []byte
	if rep.framed {
		f = rep.body
	} else {
		f = getFrame(wire.HeaderSize + len(rep.body))
		copy(f[wire.HeaderSize:], rep.body)
	}
	rh := wire.ReplyHeader{
		Prefix: h.Prefix, Size: uint32(len(f)), RequestChecksum: h.RequestChecksum,
		Client: h.Client, Op: session, Commit: c.b.commit.Load(), Timestamp: h.Timestamp,
		Request: h.Request, Operation: op, Status: rep.status,
	}
	rh.Put(f)
	c.enqueue(outFrame{b: f, close: rep.drop})
	return !rep.drop
}

// finish runs when the reader ends: the session ends as on a logout (the
// client leaves every group), then the writer drains and closes.
func (c *conn) finish() {
	c.unbind(sysevents.ReasonClosed)
	c.b.dropConn(c)
	close(c.out)
}

func (c *conn) writeLoop() {
	defer c.nc.Close()
	// Unbuffered until the connection has logged in (replies before login
	// are one frame at a time), then through a 64 KiB buffer.
	w := &frameWriter{c: c}
	dead := false
	fail := func(err error) {
		if !dead {
			dead = true
			if err != nil {
				c.b.log.Debug("connection write failed", "conn", c.id, "err", err)
			}
			c.nc.Close()
		}
	}
	for {
		select {
		case f, ok := <-c.out:
			if !ok {
				if !dead {
					fail(w.Flush())
				}
				return
			}
			if !dead {
				if err := w.write(f.b); err != nil {
					fail(err)
				}
			}
			c.queue.release(len(f.b))
			putFrame(f.b)
			if !dead && (f.close || len(c.out) == 0) {
				if err := w.Flush(); err != nil {
					fail(err)
				}
			}
			if f.close {
				fail(nil)
			}
		case reason := <-c.kick:
			if !dead {
				_, _, client, _ := c.sessionInfo()
				e := wire.Eviction{Client: client, Reason: reason}
				f := make([]byte, wire.HeaderSize)
				e.Put(f)
				if err := w.write(f); err == nil {
					_ = w.Flush()
				}
			}
			fail(nil)
		}
	}
}

// frameWriter is the writer goroutine's view of the socket: direct writes
// until the connection has logged in, buffered ones after.
type frameWriter struct {
	c  *conn
	bw *bufio.Writer
}

func (w *frameWriter) write(f []byte) error {
	if w.bw == nil && w.c.authed.Load() {
		w.bw = bufio.NewWriterSize(deadlineWriter{w.c}, 64<<10)
	}
	if w.bw == nil {
		_, err := deadlineWriter{w.c}.Write(f)
		return err
	}
	_, err := w.bw.Write(f)
	return err
}

// Flush writes what is buffered.
func (w *frameWriter) Flush() error {
	if w.bw == nil {
		return nil
	}
	return w.bw.Flush()
}
