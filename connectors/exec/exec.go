package exec

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "exec",
		Summary: "runs a shell command for each message (ferry hook)",
		NewSink: New,
	})
}

// Defaults and limits of the plugin_config.
const (
	DefaultShell       = "/bin/sh"
	DefaultTimeout     = time.Minute
	DefaultOutputLimit = 4096
	maxConcurrency     = 1024
	maxOutputLimit     = 1 << 20
	// waitDelay bounds how long a finished command's leftover children
	// may hold its output or input open.
	waitDelay = time.Second
)

// Orderings.
const (
	OrderingPartition = "partition"
	OrderingNone      = "none"
)

// Config is the exec sink's plugin_config; see the package documentation.
type Config struct {
	Command     string              `json:"command"`
	Shell       string              `json:"shell"`
	WorkingDir  string              `json:"working_dir"`
	Env         map[string]string   `json:"env"`
	PassEnv     []string            `json:"pass_env"`
	Timeout     *connector.Duration `json:"timeout"`
	Concurrency int                 `json:"concurrency"`
	Ordering    string              `json:"ordering"`
	OutputLimit int                 `json:"output_limit"`
}

// Sink is the exec sink.
type Sink struct {
	shell    string
	script   string          // the rewritten command
	uses     map[string]bool // placeholders the command uses
	dir      string
	environ  []string // the runtime's environment without its secrets (see commandEnv), then env
	timeout  time.Duration
	ordered  bool
	limit    int
	verbose  bool
	log      logger
	sem      chan struct{} // one slot per command allowed to run
	mu       sync.Mutex
	parts    map[string]*sync.Mutex // one per stream/topic/partition (ordered mode)
	closedMu sync.Mutex
	closed   bool
}

// New builds an exec sink from its plugin_config. It checks the whole
// configuration, including the command line's placeholders, without
// running anything.
func New(cfg connector.Config) (connector.Sink, error) {
	return newSink(cfg)
}

func newSink(cfg connector.Config) (*Sink, error) {
	var c Config
	if err := cfg.Plugin.Decode(&c); err != nil {
		return nil, err
	}
	p := cfg.Plugin
	if err := p.Required("command", strings.TrimSpace(c.Command)); err != nil {
		return nil, err
	}
	script, uses, err := Rewrite(c.Command)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where(p, "command"), err)
	}
	s := &Sink{shell: cmpOr(c.Shell, DefaultShell), script: script, uses: uses,
		dir: c.WorkingDir, timeout: DefaultTimeout, ordered: true, limit: DefaultOutputLimit,
		verbose: cfg.Verbose, log: newLogger(cfg.Logger), parts: map[string]*sync.Mutex{}}
	if c.Timeout != nil {
		if c.Timeout.D() < 0 {
			return nil, fmt.Errorf("%s: %s is negative; use 0 for no timeout", where(p, "timeout"), c.Timeout.D())
		}
		s.timeout = c.Timeout.D()
	}
	switch {
	case c.Concurrency == 0:
		c.Concurrency = 1
	case c.Concurrency < 0 || c.Concurrency > maxConcurrency:
		return nil, fmt.Errorf("%s: %d, want 1 to %d", where(p, "concurrency"), c.Concurrency, maxConcurrency)
	}
	s.sem = make(chan struct{}, c.Concurrency)
	switch c.Ordering {
	case "", OrderingPartition:
	case OrderingNone:
		s.ordered = false
	default:
		return nil, fmt.Errorf("%s: %q, want %q or %q", where(p, "ordering"), c.Ordering, OrderingPartition, OrderingNone)
	}
	switch {
	case c.OutputLimit == 0:
	case c.OutputLimit < 0 || c.OutputLimit > maxOutputLimit:
		return nil, fmt.Errorf("%s: %d, want 1 to %d bytes", where(p, "output_limit"), c.OutputLimit, maxOutputLimit)
	default:
		s.limit = c.OutputLimit
	}
	if strings.IndexByte(s.shell, 0) >= 0 || strings.IndexByte(s.dir, 0) >= 0 {
		return nil, fmt.Errorf("%s: shell and working_dir must not contain NUL bytes", where(p, ""))
	}
	for i, name := range c.PassEnv {
		if err := checkPassEnv(name); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", where(p, fmt.Sprintf("pass_env[%d]", i)), name, err)
		}
	}
	s.environ = commandEnv(os.Environ(), c.PassEnv)
	for k, v := range c.Env {
		if err := checkEnvName(k); err != nil {
			return nil, fmt.Errorf("%s: %w", where(p, "env."+k), err)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, fmt.Errorf("%s: the value contains a NUL byte", where(p, "env."+k))
		}
		s.environ = append(s.environ, k+"="+v)
	}
	return s, nil
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// where names a plugin_config key for errors, as PluginConfig does.
func where(p connector.PluginConfig, key string) string {
	w := p.Table
	if w == "" {
		w = "plugin_config"
	}
	if key != "" {
		w += "." + key
	}
	if p.Source != "" {
		w = p.Source + ": " + w
	}
	return w
}

// withheld reports whether a variable of the runtime's environment is one
// of Ferry's or Iggy's secrets (or Ferry's own settings), which commands
// do not get unless pass_env names them: IGGY_CONNECTORS_* (the runtime's
// configuration, with connector credentials and the API key),
// IGGY_PASSWORD, IGGY_TOKEN, IGGY_ROOT_PASSWORD and FERRY_* (FERRY_API_KEY,
// and the names the placeholders use).
func withheld(name string) bool {
	switch name {
	case "IGGY_PASSWORD", "IGGY_TOKEN", "IGGY_ROOT_PASSWORD":
		return true
	}
	return strings.HasPrefix(name, "IGGY_CONNECTORS_") || strings.HasPrefix(name, "FERRY_")
}

// commandEnv is the part of environ ("NAME=value" entries) a command
// gets: all of it but the withheld variables, except those pass names,
// exactly or by a prefix ending in "*" ("*" alone passes everything).
func commandEnv(environ, pass []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if withheld(name) && !passes(pass, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func passes(pass []string, name string) bool {
	for _, p := range pass {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
			return true
		}
	}
	return false
}

// checkPassEnv checks one pass_env entry: a variable name, or a prefix
// followed by "*".
func checkPassEnv(p string) error {
	name := strings.TrimSuffix(p, "*")
	if p == "*" {
		return nil
	}
	if name == "" || strings.ContainsAny(name, "=*\x00") {
		return errors.New(`want a variable name such as "DATABASE_URL", or a prefix ending in "*" such as "IGGY_CONNECTORS_SINK_X_*"`)
	}
	return nil
}

func checkEnvName(k string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return errors.New("an environment variable name must be non-empty, without '=' or NUL")
	}
	for _, p := range Placeholders {
		if k == p.Env {
			return fmt.Errorf("%s is set by Ferry for each message and cannot be set here", k)
		}
	}
	return nil
}

// Open checks that the shell and the working directory exist; an error
// is retried by the runtime with backoff.
func (s *Sink) Open(context.Context) error {
	if _, err := osexec.LookPath(s.shell); err != nil {
		return fmt.Errorf("exec: shell %q: %w", s.shell, err)
	}
	if s.dir != "" {
		fi, err := os.Stat(s.dir)
		if err != nil {
			return fmt.Errorf("exec: working_dir: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("exec: working_dir %s is not a directory", s.dir)
		}
	}
	return nil
}

// Consume runs the command once per message. It returns nil when every
// run exited with status 0, a connector.MessageErrors naming the messages
// whose runs failed, or ctx's error when ctx ended first (then nothing is
// committed and the batch is read again).
func (s *Sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	if s.isClosed() {
		return errors.New("exec: sink is closed")
	}
	failed := connector.MessageErrors{}
	if s.ordered {
		unlock := s.lockPartition(b)
		defer unlock()
		for i := range b.Messages {
			if err := s.acquire(ctx); err != nil {
				return err
			}
			err := s.run(ctx, &b.Messages[i])
			<-s.sem
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				failed[i] = err
			}
		}
	} else if err := s.consumeParallel(ctx, b, failed); err != nil {
		return err
	}
	if len(failed) == 0 {
		return nil
	}
	for _, err := range failed {
		if !connector.IsPermanent(err) {
			return failed
		}
	}
	return connector.Permanent(failed)
}

// consumeParallel runs the batch's messages at once, up to concurrency.
func (s *Sink) consumeParallel(ctx context.Context, b *connector.SinkBatch, failed connector.MessageErrors) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	defer wg.Wait()
	for i := range b.Messages {
		if err := s.acquire(ctx); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-s.sem }()
			if err := s.run(ctx, &b.Messages[i]); err != nil {
				mu.Lock()
				failed[i] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

func (s *Sink) acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lockPartition serializes the batches of one partition.
func (s *Sink) lockPartition(b *connector.SinkBatch) func() {
	k := fmt.Sprintf("%s\x00%s\x00%d", b.Stream, b.Topic, b.Partition)
	s.mu.Lock()
	m, ok := s.parts[k]
	if !ok {
		m = &sync.Mutex{}
		s.parts[k] = m
	}
	s.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// Close marks the sink closed; Consume is not running by then. It is
// idempotent.
func (s *Sink) Close(context.Context) error {
	s.closedMu.Lock()
	s.closed = true
	s.closedMu.Unlock()
	return nil
}

func (s *Sink) isClosed() bool {
	s.closedMu.Lock()
	defer s.closedMu.Unlock()
	return s.closed
}

var _ connector.Sink = (*Sink)(nil)
