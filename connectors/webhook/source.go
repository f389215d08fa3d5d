package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "webhook",
		Aliases:   []string{"http_source", "libiggy_connector_http_source"},
		Summary:   "receives webhooks (Standard Webhooks, GitHub, Stripe, HMAC, bearer, basic) and answers 2xx only once they are in Iggy",
		Spec:      Spec,
		NewSource: NewSource,
	})
}

// Errors a waiting request can end with.
var (
	// errClosing: the source closed before the delivery was stored.
	errClosing = errors.New("the source is closing")
)

// Source is the webhook source. Its HTTP handlers queue each verified
// delivery and wait; Poll hands queued deliveries to the runtime; Ack,
// called once the batch is in Iggy and the state (the dedup window with
// the batch's ids) saved, answers the waiting requests 200.
type Source struct {
	key string
	set *settings
	log *slog.Logger
	now func() time.Time

	// slots bounds the requests being handled at once (max_pending).
	slots chan struct{}
	// wake tells Poll that the queue has grown.
	wake chan struct{}

	mu       sync.Mutex
	queue    []*delivery                      // accepted, not polled yet
	inflight map[[16]byte]*delivery           // queued or polled, not acknowledged, by message id
	batches  map[*connector.Batch][]*delivery // polled, not acknowledged
	win      *window                          // ids handed to the runtime
	closed   bool

	srv       *http.Server
	addr      net.Addr
	serveDone chan struct{}
}

// delivery is one accepted request, waiting to be stored.
type delivery struct {
	id     [16]byte
	dedup  bool // id derives from the provider's delivery id
	msg    connector.Message
	schema connector.Schema
	done   chan struct{} // closed by finish
	err    error         // nil: stored
}

func (d *delivery) finish(err error) {
	select {
	case <-d.done:
	default:
		d.err = err
		close(d.done)
	}
}

// NewSource builds a webhook source from its configuration; secrets are
// read from the environment now.
func NewSource(cfg connector.Config) (connector.Source, error) {
	return newSource(cfg, os.LookupEnv)
}

func newSource(cfg connector.Config, getenv func(string) (string, bool)) (*Source, error) {
	set, err := Spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	s, err := settle(cfg.Key, set, getenv)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if set.Has("management_token") || set.Has("admin_listen_addr") {
		log.Warn("admin_listen_addr and management_token are upstream's endpoint management API, which Ferry does not have; they are ignored")
	}
	return &Source{key: cfg.Key, set: s, log: log, now: time.Now,
		slots: make(chan struct{}, s.maxPending), wake: make(chan struct{}, 1),
		inflight: map[[16]byte]*delivery{}, batches: map[*connector.Batch][]*delivery{},
		win: newWindow(s.window, s.maxEntries)}, nil
}

// Open restores the dedup window from state and starts the listener.
func (s *Source) Open(ctx context.Context, state []byte) error {
	if err := s.win.decode(state, s.now()); err != nil {
		return fmt.Errorf("webhook %s: %w", s.key, err)
	}
	var tlsCfg *tls.Config
	if s.set.certFile != "" {
		cert, err := tls.LoadX509KeyPair(s.set.certFile, s.set.keyFile)
		if err != nil {
			return fmt.Errorf("tls_cert_file %s, tls_key_file %s: %w", s.set.certFile, s.set.keyFile, err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.set.address)
	if err != nil {
		return fmt.Errorf("webhook listener on %s (address): %w", s.set.address, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	s.addr = ln.Addr()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		WriteTimeout: s.set.waitTimeout + time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	s.serveDone = make(chan struct{})
	go func() {
		defer close(s.serveDone)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("webhook listener stopped", "address", s.set.address, "error", err)
		}
	}()
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	s.log.Info("webhook listener ready", "url", scheme+"://"+s.addr.String(), "endpoints", len(s.set.endpoints), "remembered_deliveries", s.win.len())
	return nil
}

// Addr is the listener's address once open (for tests with port 0).
func (s *Source) Addr() net.Addr { return s.addr }

// Poll returns the queued deliveries, oldest first, up to max_batch_size
// of one schema; it blocks until there is one or ctx ends.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		if b := s.take(); b != nil {
			return b, nil
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *Source) take() *connector.Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return nil
	}
	schema := s.queue[0].schema
	n := 0
	for n < len(s.queue) && n < s.set.maxBatch && s.queue[n].schema == schema {
		n++
	}
	taken := s.queue[:n:n]
	s.queue = s.queue[n:]
	if len(s.queue) == 0 {
		s.queue = nil
	}
	b := &connector.Batch{Schema: schema, Messages: make([]connector.Message, n)}
	now := s.now()
	for i, d := range taken {
		b.Messages[i] = d.msg
		if d.dedup {
			s.win.add(d.id, now)
		}
	}
	s.win.expire(now)
	b.State = s.win.encode()
	s.batches[b] = taken
	return b
}

// Ack answers the batch's requests: their messages are in Iggy.
func (s *Source) Ack(_ context.Context, b *connector.Batch) error {
	s.resolve(b, nil)
	return nil
}

// Nack keeps the batch's requests waiting: the runtime sends the same
// batch again (each request still answers 503 at wait_timeout, and the
// provider's retry joins the delivery or is answered as a duplicate).
func (s *Source) Nack(_ context.Context, b *connector.Batch, cause error) {
	s.log.Warn("a batch of webhook deliveries was not stored yet; the runtime retries it", "deliveries", len(b.Messages), "error", cause)
}

func (s *Source) resolve(b *connector.Batch, err error) {
	s.mu.Lock()
	ds := s.batches[b]
	delete(s.batches, b)
	for _, d := range ds {
		if s.inflight[d.id] == d {
			delete(s.inflight, d.id)
		}
	}
	s.mu.Unlock()
	for _, d := range ds {
		d.finish(err)
	}
}

// Close stops the listener: waiting requests answer 503 (their providers
// retry, and a restarted source takes the retry), then the server shuts
// down within ctx.
func (s *Source) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	var all []*delivery
	for _, d := range s.inflight {
		all = append(all, d)
	}
	s.inflight, s.queue, s.batches = map[[16]byte]*delivery{}, nil, map[*connector.Batch][]*delivery{}
	s.mu.Unlock()
	for _, d := range all {
		d.finish(errClosing)
	}
	if s.srv == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("webhook listener shutdown: %w", err), s.srv.Close())
	}
	<-s.serveDone
	return err
}

var (
	_ connector.Source = (*Source)(nil)
	_ connector.Acker  = (*Source)(nil)
	_ http.Handler     = (*Source)(nil)
)
