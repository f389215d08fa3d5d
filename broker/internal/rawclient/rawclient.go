// Package rawclient is a minimal Iggy protocol client for the broker's
// tests: it frames requests with package wire following the session and
// request-id rules of the fact sheet (§2.5) and returns each reply or
// eviction frame as it came, without interpreting statuses. It is not a
// general client (that is package iggy): one request in flight, no retries.
package rawclient

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// Timeout bounds each exchange, so a silent broker fails a test instead of
// hanging it.
const Timeout = 10 * time.Second

// Client is one connection.
type Client struct {
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
	// ClientID is the random non-zero client id of the connection.
	ClientID wire.U128
	// Counter is the next request id (starts at 1, §2.5).
	Counter uint64
	// Session is the bound session, 0 before login.
	Session uint64
}

// Reply is one frame from the server: a reply or an eviction.
type Reply struct {
	Header   wire.ReplyHeader
	Body     []byte
	Eviction *wire.Eviction
}

// Status returns the reply's status (0 for an eviction).
func (r *Reply) Status() wire.Code { return r.Header.Status }

// Result splits a result-framed body: payload and first result code.
func (r *Reply) Result() ([]byte, wire.Code, error) { return wire.SplitResult(r.Body) }

// Dial connects to addr over TCP.
func Dial(ctx context.Context, addr string) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rawclient: dial %s: %w", addr, err)
	}
	return newClient(nc), nil
}

// DialTLS connects to addr over TLS.
func DialTLS(ctx context.Context, addr string, cfg *tls.Config) (*Client, error) {
	d := tls.Dialer{Config: cfg}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rawclient: dial tls %s: %w", addr, err)
	}
	return newClient(nc), nil
}

func newClient(nc net.Conn) *Client {
	c := &Client{conn: nc, r: bufio.NewReaderSize(nc, 64<<10), Counter: 1}
	c.NewClientID()
	return c
}

// NewClientID mints a fresh random client id and resets the counter and
// session, as the Go SDK does before a new Register.
func (c *Client) NewClientID() {
	var b [16]byte
	for {
		_, _ = rand.Read(b[:])
		c.ClientID = wire.U128{Lo: binary.LittleEndian.Uint64(b[:]), Hi: binary.LittleEndian.Uint64(b[8:])}
		if !c.ClientID.IsZero() {
			break
		}
	}
	c.Counter, c.Session = 1, 0
}

// Conn returns the underlying connection.
func (c *Client) Conn() net.Conn { return c.conn }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Login registers with username and password; on success it binds the
// session from the reply.
func (c *Client) Login(user, pass string) (*Reply, error) {
	body := wire.Marshal(&wire.Register{
		ProtocolVersion: wire.ProtocolVersion, SDKName: "ferry-rawclient", SDKVersion: "0",
		Username: user, Password: pass,
	})
	return c.Register(body)
}

// LoginPAT registers with a personal access token.
func (c *Client) LoginPAT(token string) (*Reply, error) {
	body := wire.Marshal(&wire.RegisterPAT{
		ProtocolVersion: wire.ProtocolVersion, SDKName: "ferry-rawclient", SDKVersion: "0", Token: token,
	})
	return c.Register(body)
}

// Register sends a Register (request 0, session 0) with body and binds
// the session if the reply carries one.
func (c *Client) Register(body []byte) (*Reply, error) {
	h := wire.RequestHeader{Client: c.ClientID, Operation: wire.OpRegister}
	rep, err := c.Exchange(h, body)
	if err != nil || rep.Eviction != nil || rep.Status() != 0 {
		return rep, err
	}
	payload, code, err := rep.Result()
	if err != nil || code != 0 {
		return rep, err
	}
	var rr wire.RegisterReply
	if err := wire.Unmarshal(payload, &rr); err != nil {
		return rep, fmt.Errorf("rawclient: register reply: %w", err)
	}
	c.Session = rr.Session
	return rep, nil
}

// Header builds the request header for cmd following §2.5: the
// operation for the code; metadata operations take the counter and
// advance it, partition and NonReplicated ones take it as is.
func (c *Client) Header(cmd wire.Command) wire.RequestHeader {
	op := wire.OperationFor(cmd)
	h := wire.RequestHeader{Client: c.ClientID, Operation: op, Command: cmd, Session: c.Session, Request: c.Counter}
	if op.Metadata() {
		c.Counter++
	}
	return h
}

// Do sends cmd with body and returns the reply.
func (c *Client) Do(cmd wire.Command, body []byte) (*Reply, error) {
	return c.Exchange(c.Header(cmd), body)
}

// Exchange sends one request with header h (Size is filled in) and reads
// the next frame.
func (c *Client) Exchange(h wire.RequestHeader, body []byte) (*Reply, error) {
	if err := c.Write(h, body); err != nil {
		return nil, err
	}
	return c.Read()
}

// Write sends one request without waiting for its reply.
func (c *Client) Write(h wire.RequestHeader, body []byte) error {
	h.Size = uint32(wire.HeaderSize + len(body))
	frame := make([]byte, wire.HeaderSize, int(h.Size))
	h.Put(frame)
	return c.WriteRaw(append(frame, body...))
}

// WriteRaw writes bytes as they are.
func (c *Client) WriteRaw(b []byte) error {
	_ = c.conn.SetWriteDeadline(time.Now().Add(Timeout))
	if _, err := c.conn.Write(b); err != nil {
		return fmt.Errorf("rawclient: write: %w", err)
	}
	return nil
}

// ErrTimeout is returned by Read when nothing arrives within Timeout.
var ErrTimeout = errors.New("rawclient: no frame within the timeout")

// Read reads the next frame within Timeout.
func (c *Client) Read() (*Reply, error) { return c.ReadWithin(Timeout) }

// ReadWithin reads the next frame within d.
func (c *Client) ReadWithin(d time.Duration) (*Reply, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(d))
	frame, err := wire.ReadFrame(c.r, c.buf, wire.MaxFrameSize)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, ErrTimeout
		}
		return nil, fmt.Errorf("rawclient: read: %w", err)
	}
	c.buf = frame[:0]
	switch wire.Kind(frame) {
	case wire.FrameEviction:
		e, err := wire.DecodeEviction(frame)
		if err != nil {
			return nil, err
		}
		return &Reply{Eviction: &e}, nil
	case wire.FrameReply:
		h, err := wire.DecodeReplyHeader(frame)
		if err != nil {
			return nil, err
		}
		return &Reply{Header: h, Body: append([]byte(nil), frame[wire.HeaderSize:]...)}, nil
	}
	return nil, fmt.Errorf("rawclient: unexpected frame kind %d", wire.Kind(frame))
}
