package iggy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/internal/backoff"
)

const maxFrameSize = wire.MaxFrameSize

// errDesync is the cause of a NetError when a reply does not belong to the
// request in flight.
var errDesync = errors.New("reply does not match the request in flight")

// conn is one connection and its VSR session (§2.5 of the protocol notes):
// a random client id, a request counter starting at 1, and the session
// fence from Register. It is lockstep: mu is held for a whole round trip,
// so one request is in flight at a time and the reply read next is its
// own. Once broken (I/O error, desync, eviction, a context ending
// mid-request) it stays broken; the Client dials a new one.
type conn struct {
	cfg  *config
	nc   net.Conn
	rd   *bufio.Reader
	addr string

	mu       sync.Mutex // lockstep: held for a whole round trip
	clientID wire.U128
	counter  uint64
	session  uint64
	userID   uint32
	wbuf     []byte
	rbuf     []byte
	broken   error
	// ownReply makes the next reply land in a buffer of its own that the
	// caller keeps (set around a poll, so its messages need no copy).
	ownReply bool

	lastUsed atomic.Int64 // unix nanos of the last round trip
	onBroken func(*conn, error)
	once     sync.Once

	// cancelMu and cancelGen keep a context's AfterFunc from cutting the
	// deadline of a later round trip: it acts only while its own
	// generation is current.
	cancelMu  sync.Mutex
	cancelGen uint64
}

func newClientID() wire.U128 {
	for {
		id := wire.U128{Lo: rand.Uint64(), Hi: rand.Uint64()}
		if !id.IsZero() {
			return id
		}
	}
}

// dialConn opens a TCP (and TLS) connection. It does not log in.
func dialConn(ctx context.Context, cfg *config) (*conn, error) {
	nc, err := cfg.dialer(ctx, "tcp", cfg.addr)
	if err != nil {
		return nil, &NetError{Op: "dial", Addr: cfg.addr, Err: err}
	}
	if cfg.tlsConfig != nil {
		tc := tls.Client(nc, cfg.tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, &NetError{Op: "tls handshake", Addr: cfg.addr, Err: err}
		}
		nc = tc
	}
	c := &conn{
		cfg:      cfg,
		nc:       nc,
		rd:       bufio.NewReaderSize(nc, 64<<10),
		addr:     cfg.addr,
		clientID: newClientID(),
		counter:  1,
		wbuf:     make([]byte, wire.HeaderSize, 4096),
		rbuf:     make([]byte, wire.HeaderSize, 4096),
	}
	c.lastUsed.Store(time.Now().UnixNano())
	return c, nil
}

// fail marks the connection broken, closes it and tells the owner once.
// It returns err for convenience.
func (c *conn) fail(err error) error {
	if c.broken == nil {
		c.broken = err
	}
	c.once.Do(func() {
		c.nc.Close()
		if c.onBroken != nil {
			c.onBroken(c, err) // lock order: conn.mu, then Client.mu
		}
	})
	return err
}

// close closes the connection from outside a round trip (Client.Close).
// An in-flight round trip fails with a NetError.
func (c *conn) close() { c.once.Do(func() { c.nc.Close() }) }

// encoder appends a request body to b.
type encoder func(b []byte) ([]byte, error)

// roundTrip sends one request and returns its reply payload: the result
// section stripped where the operation has one, a status or rejection
// turned into an *Error. The payload aliases the read buffer and is valid
// until the next round trip, so callers decode it before unlocking.
// The caller holds c.mu.
func (c *conn) roundTrip(ctx context.Context, cmd wire.Command, body encoder) ([]byte, error) {
	if c.broken != nil {
		return nil, c.broken
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("iggy: %s: %w", cmd, err) // nothing sent; the connection stays
	}
	op := wire.OperationFor(cmd)
	h := wire.RequestHeader{Client: c.clientID, Operation: op, Command: cmd}
	switch {
	case op == wire.OpRegister:
		// request 0, session 0
	case op.Metadata():
		if c.session == 0 {
			return nil, fmt.Errorf("iggy: %s: %w", cmd, ErrNotLoggedIn)
		}
		h.Request, h.Session = c.counter, c.session
		c.counter++
	default:
		if op.Partition() && c.session == 0 {
			return nil, fmt.Errorf("iggy: %s: %w", cmd, ErrNotLoggedIn)
		}
		h.Request, h.Session = c.counter, c.session
	}

	var err error
	c.wbuf = c.wbuf[:wire.HeaderSize]
	if body != nil {
		if c.wbuf, err = body(c.wbuf); err != nil {
			return nil, fmt.Errorf("iggy: %s: %w", cmd, err)
		}
	}
	if len(c.wbuf) > c.cfg.maxFrameSize {
		return nil, fmt.Errorf("iggy: %s: request of %d bytes exceeds the %d-byte frame limit: %w",
			cmd, len(c.wbuf), c.cfg.maxFrameSize, wire.ErrTooManyMessages)
	}
	h.Size = uint32(len(c.wbuf))
	h.Put(c.wbuf)

	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(c.cfg.requestTimeout)
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return nil, c.fail(&NetError{Op: cmd.String(), Addr: c.addr, Err: err})
	}
	if ctx.Done() != nil {
		defer c.watch(ctx)()
	}
	defer c.lastUsed.Store(time.Now().UnixNano())

	for attempt := 0; ; attempt++ {
		payload, code, err := c.exchange(ctx, cmd, h.Request)
		if err != nil {
			return nil, err
		}
		switch code {
		case 0:
			return payload, nil
		case wire.ErrTransientNotCommitted.Code, wire.ErrTransientNotAccepted.Code:
			if attempt >= c.cfg.replayLimit {
				return nil, newError(cmd, code)
			}
			// Replay the same frame, same request id, after a pause.
			if err := backoff.Sleep(ctx, c.cfg.replayDelay); err != nil {
				return nil, fmt.Errorf("iggy: %s: %w (while replaying a transient reply)", cmd, err)
			}
		default:
			return nil, newError(cmd, code)
		}
	}
}

// watch cuts the connection's deadline short when ctx ends, so a blocked
// read or write returns at once. The returned func ends the watch; after it
// returns, the watcher no longer touches the connection.
func (c *conn) watch(ctx context.Context) func() {
	c.cancelMu.Lock()
	c.cancelGen++
	gen := c.cancelGen
	c.cancelMu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		c.cancelMu.Lock()
		if c.cancelGen == gen {
			c.nc.SetDeadline(time.Unix(1, 0))
		}
		c.cancelMu.Unlock()
	})
	return func() {
		if !stop() {
			c.cancelMu.Lock()
			c.cancelGen++
			c.cancelMu.Unlock()
		}
	}
}

// exchange writes the frame in c.wbuf and reads its reply. It returns the
// payload and the status or result code (0 = success).
func (c *conn) exchange(ctx context.Context, cmd wire.Command, request uint64) ([]byte, wire.Code, error) {
	if _, err := c.nc.Write(c.wbuf); err != nil {
		return nil, 0, c.fail(c.ioError(ctx, cmd, err))
	}
	var frame []byte
	var err error
	if c.ownReply {
		// A buffer of the frame's size, which the reply keeps; the header
		// is read into the reusable buffer meanwhile.
		if cap(c.rbuf) < wire.HeaderSize {
			c.rbuf = make([]byte, 0, 4096)
		}
		frame, err = wire.ReadFrameFresh(c.rd, c.rbuf, c.cfg.maxFrameSize)
	} else {
		frame, err = wire.ReadFrameSized(c.rd, c.rbuf, c.cfg.maxFrameSize)
	}
	if err != nil {
		return nil, 0, c.fail(c.ioError(ctx, cmd, err))
	}
	switch {
	case c.ownReply:
	case cap(frame) > 8<<20:
		c.rbuf = nil // do not keep a huge reply's buffer for ever
	default:
		c.rbuf = frame[:0]
	}
	switch wire.Kind(frame) {
	case wire.FrameEviction:
		ev, _ := wire.DecodeEviction(frame)
		e := &Error{Command: cmd, Code: ev.Reason.Code(),
			Err: &wire.EvictionError{Reason: ev.Reason, Min: ev.ServerProtocolMin, Max: ev.ServerProtocolMax}}
		return nil, 0, c.fail(e)
	case wire.FrameReply:
	default:
		return nil, 0, c.fail(&NetError{Op: cmd.String(), Addr: c.addr,
			Err: fmt.Errorf("%w: frame kind %d where a reply was expected", errDesync, wire.Kind(frame))})
	}
	rh, _ := wire.DecodeReplyHeader(frame)
	if rh.Request != request {
		return nil, 0, c.fail(&NetError{Op: cmd.String(), Addr: c.addr,
			Err: fmt.Errorf("%w: reply echoes request %d, sent %d", errDesync, rh.Request, request)})
	}
	if rh.Status != 0 {
		return nil, rh.Status, nil
	}
	body := frame[wire.HeaderSize:]
	framed := rh.Operation.ResultFramed()
	if rh.Operation == wire.OpRegister && len(body) == 0 {
		framed = false
	}
	if !framed {
		return body, 0, nil
	}
	payload, code, err := wire.SplitResult(body)
	if err != nil {
		return nil, 0, c.fail(&NetError{Op: cmd.String(), Addr: c.addr,
			Err: fmt.Errorf("%w: %w", wire.ErrInvalidCommand, err)})
	}
	return payload, code, nil
}

// ioError describes a read or write failure, preferring the context's
// reason when it was the context that cut the I/O short.
func (c *conn) ioError(ctx context.Context, cmd wire.Command, err error) error {
	ctxErr := ctx.Err()
	if dl, ok := ctx.Deadline(); ok && ctxErr == nil && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(dl) {
		ctxErr = context.DeadlineExceeded // the connection's deadline was the context's
	}
	if ctxErr != nil {
		err = fmt.Errorf("%w (connection dropped: a reply may still be in flight)", ctxErr)
	}
	return &NetError{Op: cmd.String(), Addr: c.addr, Err: err}
}

// do runs one round trip under the lockstep lock and hands the payload to
// decode while the lock is held. With own, the payload is in a buffer of
// its own, which decode may keep.
func (c *conn) do(ctx context.Context, cmd wire.Command, body encoder, decode func([]byte) error) error {
	return c.doOwn(ctx, cmd, body, decode, false)
}

func (c *conn) doOwn(ctx context.Context, cmd wire.Command, body encoder, decode func([]byte) error, own bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ownReply = own
	payload, err := c.roundTrip(ctx, cmd, body)
	c.ownReply = false
	if cap(c.wbuf) > 16<<20 {
		c.wbuf = make([]byte, wire.HeaderSize, 4096) // do not keep a huge request's buffer
	}
	if err != nil {
		return err
	}
	if decode == nil {
		return nil
	}
	if err := decode(payload); err != nil {
		return fmt.Errorf("iggy: %s: decoding the reply: %w", cmd, err)
	}
	return nil
}

// login registers the session with a password or a token (§3.2) and
// stores the session fence.
func (c *conn) login(ctx context.Context) error {
	var req wire.Encodable
	cmd := wire.CmdLoginRegister
	if c.cfg.token != "" {
		cmd = wire.CmdLoginRegisterWithPAT
		req = &wire.RegisterPAT{ProtocolVersion: c.cfg.protocolVersion,
			SDKName: c.cfg.sdkName, SDKVersion: c.cfg.sdkVersion, Token: c.cfg.token}
	} else {
		req = &wire.Register{ProtocolVersion: c.cfg.protocolVersion,
			SDKName: c.cfg.sdkName, SDKVersion: c.cfg.sdkVersion,
			Username: c.cfg.username, Password: c.cfg.password}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	payload, err := c.roundTrip(ctx, cmd, func(b []byte) ([]byte, error) { return req.AppendTo(b), nil })
	if errors.Is(err, wire.ErrIncompatibleProtocolVersion) {
		return fmt.Errorf("%w; this client speaks %s", err, wire.FormatVersion(c.cfg.protocolVersion))
	}
	if err != nil {
		return err
	}
	var reply wire.RegisterReply
	if err := wire.Unmarshal(payload, &reply); err != nil {
		return c.fail(&NetError{Op: cmd.String(), Addr: c.addr, Err: fmt.Errorf("register reply: %w", err)})
	}
	c.session, c.userID = reply.Session, reply.UserID
	return nil
}
