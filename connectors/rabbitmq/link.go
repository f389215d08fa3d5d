package rabbitmq

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	amqp "github.com/rabbitmq/amqp091-go"
)

// heartbeat is the AMQP heartbeat interval asked of the server. amqp091
// closes a connection on which nothing was read for 1.5 × heartbeat.
const heartbeat = 10 * time.Second

// link is one AMQP connection and the TCP socket under it. Every blocking
// call on the connection or its channels goes through bounded: amqp091
// gives most of them (channel.open, exchange.declare, confirm.select,
// queue.declare, a publish that TCP back pressure holds) no context and
// no timeout, and they wait until the connection closes, which on a
// server that stopped answering without closing the socket may be never.
type link struct {
	conn *amqp.Connection

	mu   sync.Mutex
	sock net.Conn // nil until the TCP connect succeeded
}

// dial connects and completes the AMQP handshake within timeout and while
// ctx lasts.
func dial(ctx context.Context, url string, timeout time.Duration) (*link, error) {
	l := &link{}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg := amqp.Config{Heartbeat: heartbeat, Dial: func(network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// As amqp.DefaultDial: the handshake has a deadline; amqp091
		// clears it once the connection is open.
		if deadline, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(deadline)
		}
		l.mu.Lock()
		l.sock = c
		l.mu.Unlock()
		return c, nil
	}}
	err := l.bounded(ctx, timeout, "the AMQP handshake", func() (err error) {
		l.conn, err = amqp.DialConfig(url, cfg)
		return err
	})
	if err != nil {
		l.abort()
		return nil, err
	}
	// amqp091 clears the handshake's deadline after it sets the first read
	// deadline of its heartbeat check, or before: in that order the
	// socket has no read deadline until the server sends another frame,
	// and a server that never does is never found dead. Set one here;
	// every frame read moves it on.
	l.mu.Lock()
	_ = l.sock.SetReadDeadline(time.Now().Add(3 * heartbeat / 2))
	l.mu.Unlock()
	return l, nil
}

// bounded runs f, blocking calls on l, for at most timeout and while ctx
// lasts. When either ends first, l's socket is closed: amqp091 ends every
// call pending on a connection that closes, so f returns, and bounded
// says which call was stuck, marked connector.Unavailable (the runtime
// retries; l is dead and must be dialled again).
func (l *link) bounded(ctx context.Context, timeout time.Duration, what string, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, l.abort)
	err := f()
	if !stop() {
		return connector.Unavailable(fmt.Errorf("%s: no answer within %s; the connection was closed: %w", what, timeout, ctx.Err()))
	}
	return err
}

// channel opens a channel on l within timeout.
func (l *link) channel(ctx context.Context, timeout time.Duration) (*amqp.Channel, error) {
	var ch *amqp.Channel
	err := l.bounded(ctx, timeout, "channel.open", func() (err error) {
		ch, err = l.conn.Channel()
		return err
	})
	return ch, err
}

// abort closes the socket at once, without the AMQP close handshake.
func (l *link) abort() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sock != nil {
		_ = l.sock.Close()
	}
}

// close closes the connection, waiting at most 5 s for the server's
// close-ok (a server that is going away may never send it), then the
// socket in any case.
func (l *link) close() error {
	defer l.abort()
	if l.conn == nil {
		return nil
	}
	return l.conn.CloseDeadline(time.Now().Add(5 * time.Second))
}
