package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/prometheus/client_golang/prometheus"
)

// Broker is a running embedded Iggy server. Build one with Start; it
// serves until Close.
type Broker struct {
	cfg   Config
	log   *slog.Logger
	ln    net.Listener
	addr  string
	start time.Time

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the broker starts
	once   sync.Once
	done   chan struct{}
	err    error

	commit   atomic.Uint64 // commit number of metadata ops; sessions are commit numbers
	panics   atomic.Int64  // handler panics recovered (tests assert zero)
	connSeq  atomic.Uint64
	snapBusy atomic.Bool
	dirLock  io.Closer // DataDir/LOCK; nil in memory

	// mu guards the model (streams, topics, partitions, groups' maps),
	// users (with their PATs), nextUID and nextUserID. See
	// locksordering.txt.
	mu         sync.RWMutex
	streams    map[uint32]*stream
	users      map[uint32]*user
	nextUID    uint64
	nextUserID uint32

	connsMu   sync.Mutex // guards conns, admission and closing
	conns     map[uint64]*conn
	admission admission
	closing   bool

	logins   *loginLimiter
	verified *verifiedPasswords // passwords.go

	controls controls

	events *eventPub // nil with events off (events.go)

	registry    *prometheus.Registry // the broker's own (metrics.go)
	metricsSrv  *http.Server         // nil without Config.MetricsAddr
	metricsAddr string
}

// Start validates cfg, recovers DataDir if set, listens on cfg.Addr and
// serves. When it returns without error the broker accepts connections.
// ctx bounds the startup only; the broker runs until Close. On error
// everything started so far is undone.
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	bctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg: cfg, log: cfg.Logger, start: time.Now(),
		ctx: bctx, cancel: cancel, done: make(chan struct{}),
		streams: map[uint32]*stream{}, users: map[uint32]*user{},
		conns:    map[uint64]*conn{},
		logins:   newLoginLimiter(cfg.clock),
		verified: newVerifiedPasswords(),
	}
	b.events = newEventPub(b, cfg.Events)
	if err := b.recover(ctx); err != nil {
		cancel()
		b.closeLogs()
		if b.dirLock != nil {
			b.dirLock.Close()
		}
		return nil, err
	}
	if b.events != nil {
		// A failure is logged: the broker serves, and the next event
		// tries again.
		if err := b.events.ensure(true); err != nil {
			b.log.Warn("events: the system stream could not be made; retrying at the next event", "err", err)
		}
	}
	lc := net.ListenConfig{}
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		cancel()
		b.closeLogs()
		if b.dirLock != nil {
			b.dirLock.Close()
		}
		return nil, fmt.Errorf("broker: listen on %s: %w", cfg.Addr, err)
	}
	b.addr = ln.Addr().String()
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	b.ln = ln
	b.registry = newRegistry(b)
	var mln net.Listener
	if cfg.MetricsAddr != "" {
		if mln, err = lc.Listen(ctx, "tcp", cfg.MetricsAddr); err != nil {
			cancel()
			ln.Close()
			b.closeLogs()
			if b.dirLock != nil {
				b.dirLock.Close()
			}
			return nil, fmt.Errorf("broker: listen for metrics on %s: %w", cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", b.MetricsHandler())
		b.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(b.log.Handler(), slog.LevelWarn)}
		b.metricsAddr = mln.Addr().String()
	}
	b.goroutine(b.acceptLoop)
	b.goroutine(b.janitor)
	b.goroutine(b.retentionLoop)
	if b.events != nil {
		b.goroutine(func() { b.events.run(b.ctx) })
	}
	if cfg.DataDir != "" && cfg.Fsync == FsyncInterval {
		b.goroutine(b.fsyncLoop)
	}
	if b.metricsSrv != nil {
		b.goroutine(func() {
			if err := b.metricsSrv.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				b.log.Error("metrics listener failed", "addr", b.metricsAddr, "err", err)
			}
		})
	}
	b.log.Info("broker listening", "addr", b.addr, "tls", cfg.TLS != nil, "data_dir", cfg.DataDir, "metrics", b.metricsAddr)
	return b, nil
}

// Addr returns the address the broker listens on, as "ip:port".
func (b *Broker) Addr() string { return b.addr }

// Close stops the listener, closes every connection, waits for the
// broker's goroutines and closes the partition logs. It is idempotent and
// safe to call concurrently; every call returns the same error.
func (b *Broker) Close() error {
	b.once.Do(func() {
		b.cancel()
		errs := []error{}
		if err := b.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("close listener: %w", err))
		}
		if b.metricsSrv != nil {
			if err := b.metricsSrv.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close metrics listener: %w", err))
			}
		}
		b.connsMu.Lock()
		b.closing = true
		for _, c := range b.conns {
			c.nc.Close()
		}
		b.connsMu.Unlock()
		b.wg.Wait()
		errs = append(errs, b.closeLogs())
		if b.dirLock != nil {
			errs = append(errs, b.dirLock.Close())
		}
		b.err = errors.Join(errs...)
		close(b.done)
		b.log.Info("broker closed", "addr", b.addr)
	})
	return b.err
}

// Wait blocks until the broker is closed or ctx ends, and returns Close's
// error or ctx's.
func (b *Broker) Wait(ctx context.Context) error {
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when Close has finished.
func (b *Broker) Done() <-chan struct{} { return b.done }

// goroutine runs fn on a goroutine that Close waits for.
func (b *Broker) goroutine(fn func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn()
	}()
}

func (b *Broker) acceptLoop() {
	retry := backoff.Backoff{Min: 5 * time.Millisecond, Max: time.Second}
	for {
		nc, err := b.ln.Accept()
		if err != nil {
			if b.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			delay := retry.Next()
			b.log.Warn("accept failed; retrying", "err", err, "in", delay)
			if backoff.Sleep(b.ctx, delay) != nil {
				return
			}
			continue
		}
		retry.Reset()
		c := newConn(b, nc)
		if !b.admit(c) {
			nc.Close()
			if b.ctx.Err() != nil {
				return
			}
			continue
		}
		b.goroutine(c.writeLoop)
		b.goroutine(c.readLoop)
	}
}

// janitor evicts stale group members and completes timed-out revocations.
func (b *Broker) janitor() {
	tick := min(max(b.cfg.HeartbeatInterval/5, 10*time.Millisecond), time.Second)
	tick = min(tick, max(b.cfg.RebalancingTimeout/5, 10*time.Millisecond))
	t := time.NewTicker(tick)
	defer t.Stop()
	stale := b.cfg.HeartbeatInterval * 6 / 5
	for {
		select {
		case <-b.ctx.Done():
			return
		case now := <-t.C:
			for _, c := range b.connList() {
				if c.inGroups() && now.Sub(c.lastSeenTime()) > stale {
					// Called on every tick until the connection is gone: a
					// writer stuck on a client that stopped reading gets its
					// deadline cut again.
					if c.evict(evictStale) {
						b.log.Info("evicting stale client", "conn", c.id, "remote", c.remote)
					}
				}
			}
			b.expireRevocations(now)
		}
	}
}

func (b *Broker) connList() []*conn {
	b.connsMu.Lock()
	defer b.connsMu.Unlock()
	out := make([]*conn, 0, len(b.conns))
	for _, c := range b.conns {
		out = append(out, c)
	}
	return out
}

// hostname is cached for stats and snapshots.
var hostname = sync.OnceValue(func() string {
	h, err := os.Hostname()
	if err != nil {
		return "unknown"
	}
	return h
})
