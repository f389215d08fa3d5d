package connectortest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/runtime"
)

// Runtime is a started runtime and the directory holding its
// configuration and state.
type Runtime struct {
	*runtime.Runtime
	// Dir holds config.toml, connectors/ and state/.
	Dir string
}

// Option changes what Start runs.
type Option func(*startOptions)

type startOptions struct {
	registry *connector.Registry
	env      map[string]string
	config   string
	dir      string
}

// WithRegistry resolves connector paths with r instead of
// connector.Default (for connectors registered only in a test).
func WithRegistry(r *connector.Registry) Option { return func(o *startOptions) { o.registry = r } }

// WithEnv gives the configuration these environment variables
// (IGGY_CONNECTORS_* overrides) instead of none.
func WithEnv(vars map[string]string) Option { return func(o *startOptions) { o.env = vars } }

// WithConfig adds TOML to config.toml, after the sections Start writes
// ([iggy] with a free embedded broker port, [state], [connectors] and
// [http] enabled = false); it may add keys to sections of its own only.
func WithConfig(toml string) Option { return func(o *startOptions) { o.config = toml } }

// WithDir puts the configuration and state in dir instead of a new
// temporary directory (for a test that restarts a runtime on the same
// state).
func WithDir(dir string) Option { return func(o *startOptions) { o.dir = dir } }

// Start writes config.toml and one file per entry of connectors (file
// name → TOML) and starts the runtime; it is stopped when the test ends.
func Start(t testing.TB, connectors map[string]string, opts ...Option) *Runtime {
	t.Helper()
	o := startOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	dir := o.dir
	if dir == "" {
		dir = t.TempDir()
	}
	must(t, os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	for name, content := range connectors {
		must(t, os.WriteFile(filepath.Join(dir, "connectors", name), []byte(content), 0o644))
	}
	must(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(`[iggy]
address = "embedded"
embedded_address = "127.0.0.1:0"
[state]
path = "state"
[connectors]
config_dir = "connectors"
[http]
enabled = false
`+o.config), 0o644))
	env := config.WithEnv(config.MapEnv(o.env))
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), env)
	must(t, err)
	rt, err := runtime.New(cfg, runtime.Options{Registry: o.registry, ConfigOptions: []config.Option{env}})
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	must(t, rt.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_ = rt.Stop(ctx)
	})
	return &Runtime{Runtime: rt, Dir: dir}
}

// Eventually waits until cond holds, failing the test after a minute: a
// bound on liveness, not a measure of speed.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(fmt.Errorf("connectortest: %w", err))
	}
}
