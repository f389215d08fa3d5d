package iggy

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/internal/backoff"
)

// Client is a connection to an Iggy server speaking protocol 0.11 over
// TCP or TLS. It is safe for concurrent use; calls are serialised on one
// connection (the protocol is lockstep), so a program that wants parallel
// round trips opens several Clients.
//
// A Client logs in after connecting (when given credentials), pings the
// server while idle, and redials after the connection breaks, logging in
// again and re-joining the consumer groups it had joined. While it is
// disconnected a call waits for the reconnect until its context ends (or,
// without a deadline, the request timeout passes) and then fails with a
// *NetError. A rejected password or token is never retried.
//
// After each login the client reads the cluster metadata. With one node
// it stays put; when the metadata names a leader at another address it
// logs that and stays too: leader redirection is not implemented.
type Client struct {
	cfg    config
	log    *slog.Logger
	ctx    context.Context // ends on Close; bounds background work
	cancel context.CancelFunc

	mu      sync.Mutex
	cn      *conn         // nil while disconnected
	ready   chan struct{} // closed once cn is set or reconnecting gave up
	lastErr error         // why the last connection or attempt failed
	permErr error         // set when reconnecting gave up for good
	epoch   uint64        // incremented for every new connection
	groups  map[groupKey]struct{}
	closed  bool

	kick chan struct{}
	wg   sync.WaitGroup

	parts partitionCache
}

type groupKey struct{ stream, topic, group Identifier }

// Dial connects to target, logs in and returns a ready Client. target is
// "host:port" or a connection string (see the package doc); the options
// given here override what the connection string says. Dial makes one
// attempt: it does not retry a failed first connection.
func Dial(ctx context.Context, target string, opts ...Option) (*Client, error) {
	cfg := defaultConfig()
	if err := parseTarget(target, &cfg); err != nil {
		return nil, err
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{
		cfg:    cfg,
		log:    cfg.logger.With(slog.String("iggy_server", cfg.addr)),
		ready:  make(chan struct{}),
		groups: map[groupKey]struct{}{},
		kick:   make(chan struct{}, 1),
	}
	c.parts.init()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	cn, err := c.connect(ctx)
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.install(cn)
	c.wg.Add(1)
	go c.run()
	return c, nil
}

// String returns the server address; never the credentials.
func (c *Client) String() string { return "iggy.Client(" + c.cfg.addr + ")" }

// GoString is String, so %#v does not print the configuration either.
func (c *Client) GoString() string { return c.String() }

// Addr returns the server address, host:port.
func (c *Client) Addr() string { return c.cfg.addr }

// Close closes the connection and stops the heartbeat and reconnect
// goroutine. The server ends the session, which also removes this client
// from its consumer groups. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cn := c.cn
	c.cn = nil
	closeReady(c.ready)
	c.mu.Unlock()
	c.cancel()
	if cn != nil {
		cn.close()
	}
	c.wg.Wait()
	return nil
}

func closeReady(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// connect dials, logs in, reads the cluster metadata and re-joins the
// groups this client is a member of.
func (c *Client) connect(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.dialTimeout)
	defer cancel()
	cn, err := dialConn(ctx, &c.cfg)
	if err != nil {
		return nil, err
	}
	cn.onBroken = c.connBroken
	if c.cfg.username == "" && c.cfg.token == "" {
		return cn, nil
	}
	if err := cn.login(ctx); err != nil {
		cn.close()
		return nil, err
	}
	if err := c.checkCluster(ctx, cn); err != nil {
		cn.close()
		return nil, err
	}
	c.mu.Lock()
	groups := make([]groupKey, 0, len(c.groups))
	for g := range c.groups {
		groups = append(groups, g)
	}
	c.mu.Unlock()
	for _, g := range groups {
		req := &wire.GroupRef{Stream: g.stream, Topic: g.topic, Group: g.group}
		err := cn.do(ctx, wire.CmdJoinConsumerGroup, encodable(req), nil)
		if err != nil && cn.broken != nil {
			cn.close()
			return nil, err
		}
		if err != nil {
			c.log.Warn("iggy: could not re-join consumer group after reconnecting",
				"stream", g.stream.String(), "topic", g.topic.String(), "group", g.group.String(), "error", err)
		}
	}
	return cn, nil
}

// checkCluster reads the cluster metadata after login. A failure of the
// call itself is logged and ignored, as the Go SDK does; a broken
// connection is returned.
func (c *Client) checkCluster(ctx context.Context, cn *conn) error {
	var md wire.ClusterMetadata
	err := cn.do(ctx, wire.CmdGetClusterMetadata, nil, func(p []byte) error { return wire.Unmarshal(p, &md) })
	if err != nil {
		if cn.broken != nil {
			return err
		}
		c.log.Debug("iggy: cluster metadata unavailable", "error", err)
		return nil
	}
	for _, n := range md.Nodes {
		if n.Role != 0 || n.Status != 0 {
			continue
		}
		leader := net.JoinHostPort(n.IP, strconv.Itoa(int(n.TCP)))
		if len(md.Nodes) > 1 && leader != c.cfg.addr {
			c.log.Info("iggy: the cluster leader is at another address; staying on this one (leader redirection is not implemented)",
				"leader", leader, "cluster", md.Name)
		}
	}
	return nil
}

// install makes cn the current connection and wakes waiting calls.
func (c *Client) install(cn *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cn.close()
		return
	}
	c.cn = cn
	c.epoch++
	c.lastErr = nil
	closeReady(c.ready)
}

// connBroken runs when cn fails, with cn.mu held (never take cn.mu under
// c.mu).
func (c *Client) connBroken(cn *conn, err error) {
	c.mu.Lock()
	if c.cn != cn || c.closed {
		c.mu.Unlock()
		return
	}
	c.cn = nil
	c.lastErr = err
	c.ready = make(chan struct{})
	c.mu.Unlock()
	c.log.Warn("iggy: connection lost", "error", err, "reconnect", c.cfg.reconnect)
	if c.cfg.reconnect {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

// run pings while idle and redials after a failure, until Close.
func (c *Client) run() {
	defer c.wg.Done()
	var tick <-chan time.Time
	if c.cfg.heartbeat > 0 {
		t := time.NewTicker(c.cfg.heartbeat)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.kick:
			c.reconnect()
		case <-tick:
			c.heartbeat()
		}
	}
}

func (c *Client) heartbeat() {
	c.mu.Lock()
	cn := c.cn
	c.mu.Unlock()
	if cn == nil || time.Since(time.Unix(0, cn.lastUsed.Load())) < c.cfg.heartbeat/2 {
		return
	}
	if !cn.mu.TryLock() {
		return // a request is in flight: the connection is not idle
	}
	defer cn.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.requestTimeout)
	defer cancel()
	if _, err := cn.roundTrip(ctx, wire.CmdPing, nil); err != nil {
		c.log.Debug("iggy: heartbeat failed", "error", err)
	}
}

// reconnect redials with capped exponential backoff and jitter until it
// succeeds, the client closes, or the failure is one retrying cannot fix.
func (c *Client) reconnect() {
	retry := backoff.Backoff{Min: c.cfg.backoffMin, Max: c.cfg.backoffMax, Jitter: 0.2}
	for attempt := 1; ; attempt++ {
		if c.ctx.Err() != nil {
			return
		}
		cn, err := c.connect(c.ctx)
		if err == nil {
			c.log.Info("iggy: reconnected", "attempts", attempt)
			c.install(cn)
			return
		}
		c.mu.Lock()
		c.lastErr = err
		c.mu.Unlock()
		if permanentLogin(err) || (c.cfg.maxReconnects > 0 && attempt >= c.cfg.maxReconnects) {
			c.log.Error("iggy: giving up reconnecting", "attempts", attempt, "error", err)
			c.mu.Lock()
			c.permErr = err
			closeReady(c.ready)
			c.mu.Unlock()
			return
		}
		wait := retry.Next()
		c.log.Warn("iggy: reconnect failed", "attempt", attempt, "retry_in", wait, "error", err)
		if backoff.Sleep(c.ctx, wait) != nil {
			return
		}
	}
}

// acquire returns the current connection, waiting for a reconnect while
// there is none.
func (c *Client) acquire(ctx context.Context) (*conn, error) {
	var timeout <-chan time.Time
	for {
		c.mu.Lock()
		cn, ready, last, perm, closed := c.cn, c.ready, c.lastErr, c.permErr, c.closed
		c.mu.Unlock()
		switch {
		case closed:
			return nil, ErrClosed
		case cn != nil:
			return cn, nil
		case perm != nil:
			return nil, fmt.Errorf("iggy: not connected, reconnecting gave up: %w", perm)
		case !c.cfg.reconnect:
			return nil, &NetError{Op: "connect", Addr: c.cfg.addr,
				Err: fmt.Errorf("connection lost and reconnecting is off: %w", last)}
		}
		if _, ok := ctx.Deadline(); !ok && timeout == nil {
			t := time.NewTimer(c.cfg.requestTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, &NetError{Op: "reconnect", Addr: c.cfg.addr,
				Err: fmt.Errorf("%w while waiting to reconnect (last error: %w)", ctx.Err(), last)}
		case <-timeout:
			return nil, &NetError{Op: "reconnect", Addr: c.cfg.addr,
				Err: fmt.Errorf("not reconnected within the %s request timeout (last error: %w)", c.cfg.requestTimeout, last)}
		}
	}
}

// connEpoch returns a number that changes whenever the connection (and so
// the session and group memberships) is replaced.
func (c *Client) connEpoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// do runs one command on the current connection.
func (c *Client) do(ctx context.Context, cmd wire.Command, body encoder, decode func([]byte) error) error {
	cn, err := c.acquire(ctx)
	if err != nil {
		return err
	}
	return cn.do(ctx, cmd, body, decode)
}

// call runs cmd with req as its body and returns a copy of the reply
// payload, safe to decode into values that alias it.
func (c *Client) call(ctx context.Context, cmd wire.Command, req wire.Encodable) ([]byte, error) {
	var out []byte
	err := c.do(ctx, cmd, encodable(req), func(p []byte) error {
		out = append([]byte(nil), p...)
		return nil
	})
	return out, err
}

// fetch runs cmd and decodes its reply into a new T. An empty reply is
// the error notFound when that is not zero (get_stream, get_topic and
// get_consumer_group answer a missing resource that way).
func fetch[T any, P interface {
	*T
	wire.Decodable
}](ctx context.Context, c *Client, cmd wire.Command, req wire.Encodable, notFound wire.Code) (*T, error) {
	p, err := c.call(ctx, cmd, req)
	if err != nil {
		return nil, err
	}
	if len(p) == 0 && notFound != 0 {
		return nil, newError(cmd, notFound)
	}
	v := new(T)
	if err := decode(cmd, p, P(v)); err != nil {
		return nil, err
	}
	return v, nil
}

// decode unmarshals a reply payload of cmd into v.
func decode(cmd wire.Command, p []byte, v wire.Decodable) error {
	if err := wire.Unmarshal(p, v); err != nil {
		return fmt.Errorf("iggy: %s: decoding the reply: %w", cmd, err)
	}
	return nil
}

func encodable(req wire.Encodable) encoder {
	if req == nil {
		return nil
	}
	return func(b []byte) ([]byte, error) { return req.AppendTo(b), nil }
}

// checkIDs validates identifiers before they are encoded, naming the bad
// one. The ids are, in order, a stream, a topic and a group.
func checkIDs(cmd wire.Command, ids ...Identifier) error {
	names := [...]string{"stream", "topic", "group"}
	for i, id := range ids {
		if err := id.Validate(); err != nil {
			return fmt.Errorf("iggy: %s: %s id: %w", cmd, names[i], err)
		}
	}
	return nil
}
