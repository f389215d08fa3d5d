package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/state"
	"github.com/ferryhq/ferry/telemetry"
)

// Options tune a Runtime. The zero value is usable.
type Options struct {
	// Registry resolves connector paths; nil means connector.Default.
	Registry *connector.Registry
	// Logger receives the runtime's logs; nil discards them.
	Logger *slog.Logger
	// ConfigOptions are passed to the connector config provider (for
	// example config.WithEnv in tests).
	ConfigOptions []config.Option
	// ShutdownTimeout bounds Stop when its context has no deadline;
	// default 30s.
	ShutdownTimeout time.Duration
}

// Runtime runs the connectors of one configuration.
type Runtime struct {
	cfg     *config.Runtime
	opts    Options
	log     *slog.Logger
	metrics *Metrics
	started time.Time
	broker  *broker.Broker // embedded broker, if any
	addr    string         // Iggy server address
	admin   *iggy.Client
	// stateClient and leaseClient are the connections of state.storage =
	// "iggy" and of [scale_out]'s leases (scaleout.go).
	stateClient, leaseClient *iggy.Client
	states                   state.Store
	provider                 config.Provider
	events                   *events // the runtime's events (events.go); nil before Start
	lag                      lagCache
	tel                      *telemetry.Telemetry // OpenTelemetry export; nil when [telemetry] is off

	mu         sync.Mutex
	connectors map[connector.Kind]map[string]*managed
	closed     bool
}

// New checks the configuration and returns a runtime that Start runs.
func New(cfg *config.Runtime, opts Options) (*Runtime, error) {
	if cfg == nil {
		return nil, errors.New("runtime: no configuration")
	}
	if opts.Registry == nil {
		opts.Registry = connector.Default
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	r := &Runtime{cfg: cfg, opts: opts, log: opts.Logger, metrics: newMetrics(),
		connectors: map[connector.Kind]map[string]*managed{connector.KindSource: {}, connector.KindSink: {}}}
	r.metrics.registry.MustRegister(newLagCollector(r))
	return r, nil
}

// Logger is the runtime's logger: Options.Logger, and after Start with
// [telemetry] enabled, OTLP as well.
func (r *Runtime) Logger() *slog.Logger { return r.log }

// Metrics returns the runtime's metrics.
func (r *Runtime) Metrics() *Metrics { return r.metrics }

// Registry returns the registry the runtime resolves connector paths
// with.
func (r *Runtime) Registry() *connector.Registry { return r.opts.Registry }

// Config returns the runtime configuration.
func (r *Runtime) Config() *config.Runtime { return r.cfg }

// Provider returns the connector configuration provider (for the API's
// config versions). Nil before Start.
func (r *Runtime) Provider() config.Provider { return r.provider }

// IggyAddress is the address of the Iggy server in use (the embedded
// broker's when it runs).
func (r *Runtime) IggyAddress() string { return r.addr }

// Admin is the runtime's own client of the Iggy server, logged in with
// [iggy] credentials; nil before Start. It is safe for concurrent use and
// closed by Stop: callers must not close it.
func (r *Runtime) Admin() *iggy.Client { return r.admin }

// StartedAt is when Start was called.
func (r *Runtime) StartedAt() time.Time { return r.started }

// Start opens the state store, starts the embedded broker or connects to
// the configured server, loads every connector and starts the enabled
// ones. A connector whose file is broken, or whose streams are missing,
// gets status Error with the reason; the others run. Start fails only
// when the runtime as a whole cannot run, and then undoes what it started.
func (r *Runtime) Start(ctx context.Context) (err error) {
	r.started = time.Now()
	defer func() {
		if err != nil {
			r.closeResources()
		}
	}()
	if err := r.startTelemetry(ctx); err != nil {
		return err
	}
	// The provider first: a missing config_dir stops the start before
	// anything is created or listened on.
	if r.provider, err = config.NewProvider(r.cfg, r.opts.ConfigOptions...); err != nil {
		return fmt.Errorf("runtime: connectors provider: %w", err)
	}
	if err := r.openState(); err != nil {
		return err
	}
	if err := r.connectIggy(ctx); err != nil {
		return err
	}
	if r.cfg.State.Storage == config.StorageIggy {
		if err := r.openIggyState(ctx); err != nil {
			return err
		}
	}
	if r.cfg.ScaleOut.Enabled {
		if err := r.openLeases(ctx); err != nil {
			return err
		}
	}
	r.startEvents()
	set, err := r.provider.Load(ctx)
	if err != nil {
		return fmt.Errorf("runtime: load connectors: %w", err)
	}
	for _, w := range set.Warnings {
		r.log.Warn(w)
	}
	var toStart []*managed
	for _, c := range set.Connectors {
		m := r.add(connector.Kind(c.Type), c.Key, c)
		if c.Enabled {
			toStart = append(toStart, m)
		} else {
			m.setStatus(StatusStopped)
		}
	}
	for _, le := range set.Errors {
		if le.Type == "" {
			r.log.Error("connector file could not be read", "file", le.File, "error", le.Err)
			continue
		}
		m := r.add(connector.Kind(le.Type), le.Key, nil)
		m.fail(fmt.Errorf("configuration: %w", le))
	}
	for _, m := range toStart {
		if err := r.ensureStreams(ctx, m.cfg); err != nil {
			m.fail(err)
			continue
		}
		m.start()
	}
	return nil
}

func (r *Runtime) add(kind connector.Kind, key string, cfg *config.Connector) *managed {
	m := &managed{rt: r, kind: kind, key: key, cfg: cfg, status: StatusStopped,
		log:     r.log.With("connector_type", string(kind), "connector_key", key),
		metrics: r.metrics.forConnector(kind, key), tr: r.tracerFor(kind, key)}
	r.mu.Lock()
	r.connectors[kind][key] = m
	n := len(r.connectors[kind])
	r.mu.Unlock()
	if kind == connector.KindSource {
		r.metrics.sourcesTotal.Set(float64(n))
	} else {
		r.metrics.sinksTotal.Set(float64(n))
	}
	return m
}

func (r *Runtime) statusChanged(kind connector.Kind, from, to Status) {
	if from == to {
		return
	}
	g := r.metrics.sinksRunning
	if kind == connector.KindSource {
		g = r.metrics.sourcesRunning
	}
	if from == StatusRunning {
		g.Dec()
	}
	if to == StatusRunning {
		g.Inc()
	}
}

func (r *Runtime) openState() error {
	switch r.cfg.State.Storage {
	case "", "file":
		dir := r.cfg.State.Path
		if dir == "" {
			dir = "local_state"
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("runtime: state directory: %w", err)
		}
		s, err := state.OpenFile(filepath.Join(dir, "sources"))
		if err != nil {
			return fmt.Errorf("runtime: state store: %w", err)
		}
		r.states = s
	case "http":
		h := r.cfg.State.HTTP
		if (h.LoadMethod != "" && h.LoadMethod != "get") || (h.SaveMethod != "" && h.SaveMethod != "put") {
			r.log.Warn("state.http load_method/save_method are not used: Ferry's HTTP state store loads with GET and saves with a conditional PUT",
				"load_method", h.LoadMethod, "save_method", h.SaveMethod)
		}
		opts := []state.HTTPOption{state.WithTimeout(h.Timeout)}
		for k, v := range h.RequestHeaders {
			opts = append(opts, state.WithHeader(k, v))
		}
		s, err := state.NewHTTP(h.URL, opts...)
		if err != nil {
			return fmt.Errorf("runtime: state store: %w", err)
		}
		r.states = s
	case config.StorageIggy:
		// Opened once the Iggy server is reached (openIggyState).
	default:
		return fmt.Errorf("runtime: state.storage %q is not supported (use file, http or iggy)", r.cfg.State.Storage)
	}
	return nil
}

// connectIggy starts the embedded broker when no server is configured and
// opens the admin client.
func (r *Runtime) connectIggy(ctx context.Context) error {
	r.addr = r.cfg.Iggy.Address
	if r.cfg.Iggy.Embedded() {
		dir := filepath.Join(r.stateDir(), "broker")
		addr := r.cfg.Iggy.EmbeddedAddress
		if addr == "" {
			addr = config.DefaultEmbeddedAddress
		}
		// The config owns the embedded broker's root credentials: they are
		// set at every start, not only the first (ResetRoot).
		b, err := broker.Start(ctx, broker.Config{Addr: addr, DataDir: dir,
			RootUsername: r.cfg.Iggy.Username, RootPassword: r.cfg.Iggy.Password, ResetRoot: true,
			Events: broker.Events{Enabled: true}, Logger: r.log.With("component", "broker"),
			Dedup: broker.Dedup{MaxEntries: r.cfg.Iggy.EmbeddedDedupEntries, Expiry: r.cfg.Iggy.EmbeddedDedupExpiry}})
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("runtime: embedded broker: %s is already in use ([iggy] embedded_address, or IGGY_CONNECTORS_IGGY_EMBEDDED_ADDRESS): "+
				"is another ferry run or ferry serve running? Stop it, or set another address (\"127.0.0.1:0\" picks a free port): %w", addr, err)
		}
		if err != nil {
			return fmt.Errorf("runtime: embedded broker: %w", err)
		}
		r.broker, r.addr = b, b.Addr()
		r.log.Info("embedded broker started", "addr", r.addr, "data_dir", dir)
	}
	c, err := r.dial(ctx, "admin")
	if err != nil {
		return fmt.Errorf("runtime: connect to iggy at %s: %w", r.addr, err)
	}
	r.admin = c
	return nil
}

func (r *Runtime) stateDir() string {
	if r.cfg.State.Path != "" {
		return r.cfg.State.Path
	}
	return "local_state"
}

// dial opens a client to the Iggy server for one connector or purpose.
func (r *Runtime) dial(ctx context.Context, purpose string) (*iggy.Client, error) {
	ic := r.cfg.Iggy
	opts := []iggy.Option{iggy.WithLogger(r.log.With("iggy_client", purpose)), iggy.WithSDK("ferry-runtime", "0.1.0")}
	if ic.Token != "" {
		opts = append(opts, iggy.WithToken(ic.Token))
	} else {
		user, pass := ic.Username, ic.Password
		if user == "" {
			user, pass = "iggy", "iggy"
		}
		opts = append(opts, iggy.WithCredentials(user, pass))
	}
	if ic.TLS.Enabled {
		opts = append(opts, iggy.WithTLS(ic.TLS.CAFile, ic.TLS.Domain))
	}
	return iggy.Dial(ctx, r.addr, opts...)
}

// ensureStreams checks that the streams and topics a connector names exist,
// creating them on the embedded broker or with create_missing.
func (r *Runtime) ensureStreams(ctx context.Context, c *config.Connector) error {
	create := r.cfg.Iggy.Embedded() || r.cfg.Iggy.CreateMissing
	need := map[[2]string]bool{}
	for _, p := range c.Producers {
		need[[2]string{p.Stream, p.Topic}] = true
	}
	for _, s := range c.Consumers {
		for _, t := range s.Topics {
			need[[2]string{s.Stream, t}] = true
		}
		if s.OnError == config.PolicyDeadLetter {
			need[[2]string{s.DeadLetterStream, s.DeadLetterTopic}] = true
		}
	}
	keys := make([][2]string, 0, len(need))
	for k := range need {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"/"+keys[i][1] < keys[j][0]+"/"+keys[j][1] })
	for _, k := range keys {
		if err := r.ensureTopic(ctx, k[0], k[1], create); err != nil {
			return terminal(err)
		}
	}
	return nil
}

func (r *Runtime) ensureTopic(ctx context.Context, stream, topic string, create bool) error {
	sid, tid := iggy.NamedID(stream), iggy.NamedID(topic)
	_, err := r.admin.GetStream(ctx, sid)
	if errors.Is(err, iggy.ErrStreamNotFound) {
		if !create {
			return fmt.Errorf("stream %q does not exist on %s; create it or set create_missing = true in [iggy]", stream, r.addr)
		}
		if _, err = r.admin.CreateStream(ctx, stream); err != nil && !errors.Is(err, iggy.ErrStreamNameAlreadyExists) {
			return fmt.Errorf("create stream %q: %w", stream, r.explainDenied(err, actCreateStream, stream, ""))
		}
		err = nil
	}
	if err != nil {
		return fmt.Errorf("get stream %q: %w", stream, r.explainDenied(err, actReadStream, stream, ""))
	}
	_, err = r.admin.GetTopic(ctx, sid, tid)
	if errors.Is(err, iggy.ErrTopicNotFound) {
		if !create {
			return fmt.Errorf("topic %q in stream %q does not exist on %s; create it or set create_missing = true in [iggy]", topic, stream, r.addr)
		}
		if _, err = r.admin.CreateTopic(ctx, sid, topic, 1); err != nil && !errors.Is(err, iggy.ErrTopicNameAlreadyExists) {
			return fmt.Errorf("create topic %s/%s: %w", stream, topic, r.explainDenied(err, actCreateTopic, stream, topic))
		}
		r.log.Info("created topic", "stream", stream, "topic", topic)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get topic %s/%s: %w", stream, topic, r.explainDenied(err, actReadTopic, stream, topic))
	}
	return nil
}

// Connectors lists the connectors of a kind, sorted by key.
func (r *Runtime) Connectors(kind connector.Kind) []Info {
	r.mu.Lock()
	ms := make([]*managed, 0, len(r.connectors[kind]))
	for _, m := range r.connectors[kind] {
		ms = append(ms, m)
	}
	r.mu.Unlock()
	out := make([]Info, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// ErrNotFound is returned for an unknown connector key.
var ErrNotFound = errors.New("connector not found")

// Connector returns one connector's information.
func (r *Runtime) Connector(kind connector.Kind, key string) (Info, error) {
	m, err := r.get(kind, key)
	if err != nil {
		return Info{}, err
	}
	return m.info(), nil
}

func (r *Runtime) get(kind connector.Kind, key string) (*managed, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.connectors[kind][key]
	if !ok {
		return nil, fmt.Errorf("%s %q: %w", kind, key, ErrNotFound)
	}
	return m, nil
}

// ErrStopped is returned by Restart once the runtime is stopping.
var ErrStopped = errors.New("runtime is stopped")

// Restart stops a connector (draining what is in flight), reloads its
// active configuration, and starts it again if it is enabled. Other
// connectors are not touched; restarts of one connector run one at a
// time. A key the runtime does not know yet but the provider does (a
// connector added since Start) is added; an unknown key is ErrNotFound.
func (r *Runtime) Restart(ctx context.Context, kind connector.Kind, key string) error {
	m, err := r.get(kind, key)
	var cfg *config.Connector
	if errors.Is(err, ErrNotFound) {
		if cfg, err = r.provider.Active(ctx, config.Kind(kind), key); err != nil {
			if config.IsNotFound(err) {
				return fmt.Errorf("%s %q: %w", kind, key, ErrNotFound)
			}
			return fmt.Errorf("%s %q: load configuration: %w", kind, key, err)
		}
		m = r.add(kind, key, cfg)
	} else if err != nil {
		return err
	}
	m.restartMu.Lock()
	defer m.restartMu.Unlock()
	if r.isClosed() {
		return ErrStopped
	}
	if !r.current(m) {
		return fmt.Errorf("%s %q: removed meanwhile: %w", kind, key, ErrNotFound)
	}
	if err := m.halt(ctx); err != nil {
		return err
	}
	if cfg == nil {
		if cfg, err = r.provider.Active(ctx, config.Kind(kind), key); err != nil {
			m.fail(fmt.Errorf("configuration: %w", err))
			return fmt.Errorf("%s %q: load configuration: %w", kind, key, err)
		}
	}
	m.mu.Lock()
	m.cfg = cfg
	m.lastErr, m.lastErrAt = "", time.Time{}
	m.mu.Unlock()
	if !cfg.Enabled {
		m.setStatus(StatusStopped)
		return nil
	}
	if err := r.ensureStreams(ctx, cfg); err != nil {
		m.fail(err)
		return err
	}
	m.start()
	return nil
}

// Remove stops a connector (draining what is in flight, until ctx ends)
// and forgets it: it no longer appears in Connectors and Stop does not
// touch it. Its configuration is left to the caller; a later Restart of
// the same key loads it again if the provider still has it. An unknown
// key is ErrNotFound. Ferry extension: upstream's runtime cannot remove
// a connector while it runs.
func (r *Runtime) Remove(ctx context.Context, kind connector.Kind, key string) error {
	m, err := r.get(kind, key)
	if err != nil {
		return err
	}
	m.restartMu.Lock()
	defer m.restartMu.Unlock()
	if r.isClosed() {
		return ErrStopped
	}
	if err := m.halt(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	if r.connectors[kind][key] == m {
		delete(r.connectors[kind], key)
	}
	n := len(r.connectors[kind])
	r.mu.Unlock()
	if kind == connector.KindSource {
		r.metrics.sourcesTotal.Set(float64(n))
	} else {
		r.metrics.sinksTotal.Set(float64(n))
	}
	m.log.Info("connector removed")
	return nil
}

// current reports whether m is still the connector under its key (a
// Remove may have run while a caller waited for m.restartMu).
func (r *Runtime) current(m *managed) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.connectors[m.kind][m.key] == m
}

func (r *Runtime) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Stop stops every connector (sources first, so sinks can drain what they
// sent), then closes the clients, the state store and the embedded broker.
// It waits for in-flight batches until ctx ends (or ShutdownTimeout).
func (r *Runtime) Stop(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.opts.ShutdownTimeout)
		defer cancel()
	}
	var errs []error
	for _, kind := range []connector.Kind{connector.KindSource, connector.KindSink} {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, info := range r.Connectors(kind) {
			m, err := r.get(kind, info.Key)
			if err != nil {
				continue // removed meanwhile
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.restartMu.Lock() // a restart in progress finishes first; later ones see closed
				defer m.restartMu.Unlock()
				if err := m.halt(ctx); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	r.closeResources()
	return errors.Join(errs...)
}

func (r *Runtime) closeResources() {
	r.events.close()        // before the broker: what is queued is sent
	defer r.stopTelemetry() // last: what the rest logs while closing is sent
	if r.admin != nil {
		r.admin.Close()
	}
	if r.provider != nil {
		r.provider.Close()
	}
	if r.states != nil {
		r.states.Close()
	}
	for _, c := range []*iggy.Client{r.stateClient, r.leaseClient} {
		if c != nil {
			c.Close()
		}
	}
	if r.broker != nil {
		r.broker.Close()
	}
}
