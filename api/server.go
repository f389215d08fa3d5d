package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/console"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/apitoken"
	"github.com/ferryhq/ferry/runtime"
)

// Runtime is what the API needs from the connector runtime.
// *runtime.Runtime implements it.
type Runtime interface {
	// Connectors lists the connectors of a kind, sorted by key.
	Connectors(kind connector.Kind) []runtime.Info
	// Connector returns one connector; runtime.ErrNotFound for an unknown key.
	Connector(kind connector.Kind, key string) (runtime.Info, error)
	// Activity is what a running connector reports of its recent work;
	// runtime.ErrNoActivity when it reports none.
	Activity(kind connector.Kind, key string) (any, error)
	// View answers a point lookup from a running sink's keyed state
	// (GET /views/{name}/{key}); runtime.ErrNoView, runtime.ErrNoKey.
	View(sink, key string) (json.RawMessage, error)
	// Lag reads how far a sink's consumer groups are behind each partition.
	Lag(ctx context.Context, sink string) ([]runtime.PartitionLag, error)
	// Restart stops one connector, reloads its active configuration and
	// starts it again.
	Restart(ctx context.Context, kind connector.Kind, key string) error
	// Remove stops one connector and forgets it (Ferry extension, for
	// DELETE /{kind}s/{key}); runtime.ErrNotFound for an unknown key.
	Remove(ctx context.Context, kind connector.Kind, key string) error
	// Provider holds the configuration versions; nil before the runtime started.
	Provider() config.Provider
	// Metrics are the Prometheus metrics /metrics serves and /stats reads.
	Metrics() *runtime.Metrics
	// StartedAt is when the runtime started.
	StartedAt() time.Time
	// Admit checks that the runtime could run a configuration, without
	// running it.
	Admit(c *config.Connector) error
	// IggyAddress is the Iggy server's address (host:port, no
	// credentials); Config is the runtime's configuration.
	IggyAddress() string
	Config() *config.Runtime
	// Admin is the runtime's client of the Iggy server (the dead-letter
	// and stream endpoints read through it); nil before the runtime
	// started.
	Admin() *iggy.Client
	// Registry resolves connector paths (and their settings specs, for
	// redacting answers exactly).
	Registry() *connector.Registry
}

var _ Runtime = (*runtime.Runtime)(nil)

// Option tunes a Server.
type Option func(*options)

type options struct {
	version        string
	restartTimeout time.Duration
	tokenDir       string
}

// WithVersion sets the runtime version /stats reports (connectors_runtime_version
// and each connector's version; built-in connectors ship with the runtime).
// Default "0.0.0".
func WithVersion(v string) Option { return func(o *options) { o.version = v } }

// WithRestartTimeout bounds one POST .../restart: draining the connector and
// starting it again. Default 60s.
func WithRestartTimeout(d time.Duration) Option {
	return func(o *options) { o.restartTimeout = d }
}

// WithTokenDir sets the directory of the local token, which the server
// writes when [http] api_key is empty. Default apitoken.Dir(), the
// directory the same user's ferry commands read
// (~/.config/ferry/api).
func WithTokenDir(dir string) Option { return func(o *options) { o.tokenDir = dir } }

// Server is the management API server.
type Server struct {
	rt      Runtime
	cfg     config.HTTP
	log     *slog.Logger
	opts    options
	handler http.Handler
	tls     *tls.Config // nil without [http.tls]
	probe   *probe
	guard   *guard

	// key is the credential every non-public request must carry: [http]
	// api_key, or, when that is empty, the local token (localToken),
	// written to tokenPath once the server listens.
	key        string
	localToken bool
	tokenPath  string

	// console is the web console at /ui: its login links and sessions
	// (api/console.go).
	console *console.Console

	idsMu sync.Mutex
	ids   map[connector.Kind]map[string]uint32
	next  uint32

	restartMu sync.Mutex
	restarts  map[string]*connLock // one per connector in use: restarts and removals of one connector run one at a time

	mu       sync.Mutex
	srv      *http.Server
	ln       net.Listener
	serveErr chan error // receives Serve's result once
	closed   bool
}

// New checks cfg and builds the API over rt. It does not look at
// cfg.Enabled: the caller decides whether to run the API. Bad settings
// (CORS lists, TLS files, metrics endpoint) are errors naming the key.
// logger may be nil.
func New(rt Runtime, cfg config.HTTP, logger *slog.Logger, opts ...Option) (*Server, error) {
	if rt == nil {
		return nil, errors.New("api: no runtime")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	o := options{version: "0.0.0", restartTimeout: 60 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if o.tokenDir == "" {
		// An error here leaves the token unwritten: Start says so, and the
		// API still requires it.
		o.tokenDir, _ = apitoken.Dir()
	}
	if o.restartTimeout <= 0 {
		return nil, fmt.Errorf("api: restart timeout %s: expected a duration above zero", o.restartTimeout)
	}
	s := &Server{rt: rt, cfg: cfg, log: logger.With("component", "api"), opts: o, probe: newProbe(),
		ids:      map[connector.Kind]map[string]uint32{connector.KindSource: {}, connector.KindSink: {}},
		restarts: map[string]*connLock{}, key: cfg.APIKey, console: console.New(cfg.TLS.Enabled)}
	if s.key == "" {
		s.key, s.localToken = apitoken.New(), true
	}
	if _, _, err := net.SplitHostPort(cfg.Address); err != nil {
		return nil, fmt.Errorf("api: http.address %q: expected host:port such as \"127.0.0.1:8081\": %w", cfg.Address, err)
	}
	if cfg.TLS.Enabled {
		tc, err := loadTLS(cfg.TLS)
		if err != nil {
			return nil, err
		}
		s.tls = tc
	}
	mux, err := s.routes()
	if err != nil {
		return nil, err
	}
	var h http.Handler = s.authenticate(mux)
	var c *cors
	if cfg.CORS.Enabled {
		if c, err = newCORS(cfg.CORS); err != nil {
			return nil, err
		}
		h = c.wrap(h)
	}
	s.guard = newGuard(cfg.Address, c, cfg.APIKey != "")
	s.handler = s.guard.wrap(s, h)
	// Number the connectors the runtime has now in upstream's order:
	// sources, then sinks, each by key.
	for _, kind := range []connector.Kind{connector.KindSource, connector.KindSink} {
		for _, info := range rt.Connectors(kind) {
			s.id(kind, info.Key)
		}
	}
	return s, nil
}

func loadTLS(c config.HTTPTLS) (*tls.Config, error) {
	if c.CertFile == "" {
		return nil, errors.New("api: http.tls.cert_file: required when http.tls.enabled = true")
	}
	if c.KeyFile == "" {
		return nil, errors.New("api: http.tls.key_file: required when http.tls.enabled = true")
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("api: http.tls.cert_file %q / key_file %q: %w", c.CertFile, c.KeyFile, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// Handler is the whole API (request guards, CORS, authentication and
// routes), for tests and for programs that serve it themselves.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on [http] address (HTTPS with [http.tls]) and serves in
// the background until Shutdown. It logs upstream's warnings about
// exposure first. Start fails when the address cannot be bound, and when
// the server was started or shut down before.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("api: server was shut down")
	}
	if s.srv != nil {
		return errors.New("api: server already started")
	}
	for _, w := range containmentWarnings(ctx, s.cfg) {
		s.log.Warn(w)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Address)
	if err != nil {
		return fmt.Errorf("api: listen on http.address %s: %w", s.cfg.Address, err)
	}
	scheme := "http"
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
		scheme = "https"
	}
	s.ln = ln
	s.guard.boundTo(ln.Addr())
	if s.localToken {
		s.writeToken(ln.Addr().String())
	}
	s.srv = &http.Server{
		Handler:           s.accessLog(s.handler),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.serveErr = make(chan error, 1)
	srv, done := s.srv, s.serveErr
	go func() { done <- srv.Serve(ln) }()
	s.log.Info("management API listening", "url", scheme+"://"+ln.Addr().String())
	return nil
}

// writeToken stores the local token where the same user's ferry commands
// find it. Failing that, the API keeps requiring the token, which nobody
// then has: only the public paths answer.
func (s *Server) writeToken(addr string) {
	if s.opts.tokenDir == "" {
		s.log.Error("management API: no directory for the local token (no home directory?); only /, /health and the public reads answer; set [http] api_key to use the API")
		return
	}
	path, err := apitoken.Write(s.opts.tokenDir, addr, s.key)
	if err != nil {
		s.log.Error("management API: the local token could not be written; only /, /health and the public reads answer; set [http] api_key to use the API", "error", err)
		return
	}
	s.tokenPath = path
	s.log.Info("management API token written (no [http] api_key): ferry commands of this user use it", "path", path)
}

// removeToken deletes the token file, unless another runtime has written
// its own since.
func (s *Server) removeToken() {
	if s.tokenPath == "" {
		return
	}
	if err := apitoken.Remove(s.tokenPath, s.key); err != nil {
		s.log.Warn("management API: the local token file could not be removed", "error", err)
	}
}

// TokenPath is the file holding the local token once the server listens,
// or "" (with [http] api_key, or when it could not be written).
func (s *Server) TokenPath() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenPath
}

// Addr is the bound address (host:port) once started, else "".
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops accepting connections and waits for the requests in
// flight, until ctx ends; then it closes the remaining connections and
// returns ctx's error. It is idempotent, and a server that never started
// just becomes unusable.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	srv, done := s.srv, s.serveErr
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	s.removeToken()
	err := srv.Shutdown(ctx)
	if err != nil {
		_ = srv.Close()
	}
	if serveErr := <-done; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("api: serve: %w", serveErr))
	}
	if err != nil {
		return fmt.Errorf("api: shutdown: %w", err)
	}
	s.log.Info("management API stopped")
	return nil
}

// Close stops the server at once, dropping requests in flight; it is
// idempotent.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// accessLog logs each request at debug level: method, path, status and
// duration (never headers: they may carry the API key).
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "took", time.Since(start))
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// id returns the number of a connector: upstream shows each connector
// with a numeric id. Ferry numbers them in the order first seen (those
// present at New first: sources, then sinks, by key); the number stays
// the same for the life of the Server.
func (s *Server) id(kind connector.Kind, key string) uint32 {
	s.idsMu.Lock()
	defer s.idsMu.Unlock()
	m := s.ids[kind]
	if m == nil {
		m = map[string]uint32{}
		s.ids[kind] = m
	}
	if n, ok := m[key]; ok {
		return n
	}
	s.next++
	m[key] = s.next
	return s.next
}

// connLock is the lock of one connector, with the number of requests
// holding or waiting for it.
type connLock struct {
	mu   sync.Mutex
	refs int
}

// lockConnector serializes restarts and removals of one connector. The
// lock exists while a request holds or waits for it, so keys requested
// once (DELETE /sinks/<anything>) leave nothing behind.
func (s *Server) lockConnector(kind connector.Kind, key string) func() {
	k := string(kind) + "/" + key
	s.restartMu.Lock()
	l, ok := s.restarts[k]
	if !ok {
		l = &connLock{}
		s.restarts[k] = l
	}
	l.refs++
	s.restartMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.restartMu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.restarts, k)
		}
		s.restartMu.Unlock()
	}
}
