package broker

import (
	"bufio"
	"errors"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// conn is one client connection. Its reader goroutine reads a frame,
// handles it to the end and queues the reply, in order (lockstep clients
// and pipelining clients both get replies in request order). Its writer
// goroutine writes queued frames and is the only writer of the socket; an
// eviction from outside (a stale client) goes through kick.
type conn struct {
	b      *Broker
	nc     net.Conn
	id     uint64 // transport id; get_clients reports its low 32 bits
	remote string

	out      chan outFrame       // closed by the reader when it ends
	kick     chan evictionReason // unsolicited eviction, buffered 1
	lastSeen atomic.Int64        // unix nanos of the last request

	// Reader goroutine only.
	checker   wire.BatchChecker
	watermark uint64 // highest committed metadata request id of this session
	cached    *cachedReply

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
	status wire.Code      // non-zero: a pre-commit denial; the body is dropped
	body   []byte         // the payload, with its result section if any
	op     wire.Operation // reply operation; 0 echoes the request's
	evict  wire.EvictionReason
	silent bool // send nothing
	drop   bool // close the connection after the reply (if any)
}

func newConn(b *Broker, nc net.Conn) *conn {
	c := &conn{
		b: b, nc: nc, id: b.connSeq.Add(1), remote: nc.RemoteAddr().String(),
		out: make(chan outFrame, 64), kick: make(chan evictionReason, 1),
		groups: map[*group]struct{}{},
	}
	c.lastSeen.Store(time.Now().UnixNano())
	return c
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

// evict asks the writer to send an eviction and close the connection.
func (c *conn) evict(r evictionReason) {
	select {
	case c.kick <- r:
	default:
	}
}

const maxPooledFrame = 1 << 20

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

func (c *conn) readLoop() {
	defer c.finish()
	r := bufio.NewReaderSize(c.nc, 64<<10)
	buf := make([]byte, 0, 64<<10)
	for {
		frame, err := wire.ReadFrame(r, buf, wire.MaxFrameSize)
		if err != nil {
			c.logReadError(err)
			return
		}
		if cap(frame) <= maxPooledFrame {
			buf = frame[:0]
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
		c.out <- outFrame{b: f, close: true}
		return false
	}
	if rep.silent {
		return !rep.drop
	}
	if rep.status != 0 {
		rep.body = nil
	}
	op := rep.op
	if op == 0 {
		op = h.Operation
	}
	_, session, _, _ := c.sessionInfo()
	f := getFrame(wire.HeaderSize + len(rep.body))
	rh := wire.ReplyHeader{
		Prefix: h.Prefix, Size: uint32(len(f)), RequestChecksum: h.RequestChecksum,
		Client: h.Client, Op: session, Commit: c.b.commit.Load(), Timestamp: h.Timestamp,
		Request: h.Request, Operation: op, Status: rep.status,
	}
	rh.Put(f)
	copy(f[wire.HeaderSize:], rep.body)
	c.out <- outFrame{b: f, close: rep.drop}
	return !rep.drop
}

// finish runs when the reader ends: the session ends as on a logout (the
// client leaves every group), then the writer drains and closes.
func (c *conn) finish() {
	c.unbind()
	c.b.dropConn(c)
	close(c.out)
}

func (c *conn) writeLoop() {
	defer c.nc.Close()
	w := bufio.NewWriterSize(c.nc, 64<<10)
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
				if _, err := w.Write(f.b); err != nil {
					fail(err)
				}
			}
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
				if _, err := w.Write(f); err == nil {
					_ = w.Flush()
				}
			}
			fail(nil)
		}
	}
}
