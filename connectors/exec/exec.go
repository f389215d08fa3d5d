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
	"github.com/ferryhq/ferry/internal/envx"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "exec",
		Summary: "runs a shell command for each message (ferry hook)",
		Spec:    Spec,
		NewSink: New,
	})
}

// waitDelay bounds how long a finished command's leftover children may
// hold its output or input open.
const waitDelay = time.Second

// Sink is the exec sink.
type Sink struct {
	shell    string
	script   string          // the rewritten command
	uses     map[string]bool // placeholders the command uses
	dir      string
	environ  []string // the runtime's environment without its secrets (see envx.WithoutSecrets), then env
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
	runs     runLog // the last runs, for Activity
}

// New builds an exec sink from its plugin_config. It checks the whole
// configuration, including the command line's placeholders, without
// running anything.
func New(cfg connector.Config) (connector.Sink, error) {
	return newSink(cfg)
}

func newSink(cfg connector.Config) (*Sink, error) {
	set, err := Spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	script, uses, err := Rewrite(set.String("command"))
	if err != nil {
		return nil, set.Errorf("command", "%v", err)
	}
	s := &Sink{shell: set.String("shell"), script: script, uses: uses, dir: set.String("working_dir"),
		timeout: set.Duration("timeout"), ordered: set.String("ordering") == OrderingPartition,
		limit: set.Int("output_limit"), verbose: cfg.Verbose, log: newLogger(cfg.Logger),
		sem: make(chan struct{}, set.Int("concurrency")), parts: map[string]*sync.Mutex{}}
	s.environ = envx.WithoutSecrets(os.Environ(), set.Strings("pass_env"))
	for k, v := range set.StringMap("env") {
		s.environ = append(s.environ, k+"="+v)
	}
	return s, nil
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

// ConsumesOutOfOrder marks the exec sink as a connector.UnorderedSink:
// each message runs its own command, so ordering = "key" (a hook's
// messages in order per key, keys in parallel) and "none" may be used.
func (s *Sink) ConsumesOutOfOrder() {}

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
