// Package brokertest starts an embedded broker for a test: on a free
// loopback port, with its data in t.TempDir() unless told otherwise,
// closed by t.Cleanup.
package brokertest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/ferryhq/ferry/broker"
)

// Option changes how Start configures the broker.
type Option interface{ apply(*options) }

type options struct {
	memory bool
	dir    string
	edit   []func(*broker.Config)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// InMemory keeps everything in memory instead of t.TempDir().
func InMemory() Option { return optionFunc(func(o *options) { o.memory = true }) }

// DataDir uses dir instead of a fresh t.TempDir(), for example to start a
// second broker on the data of a closed one.
func DataDir(dir string) Option { return optionFunc(func(o *options) { o.dir = dir }) }

// Config edits the broker configuration before Start (after the Addr and
// DataDir defaults of this package are set).
func Config(fn func(*broker.Config)) Option {
	return optionFunc(func(o *options) { o.edit = append(o.edit, fn) })
}

// Logger sends the broker's logs to l (default: discarded).
func Logger(l *slog.Logger) Option {
	return Config(func(c *broker.Config) { c.Logger = l })
}

// Start starts a broker on 127.0.0.1:0, registers its Close with
// t.Cleanup and fails the test if it cannot start or close cleanly.
func Start(t testing.TB, opts ...Option) *broker.Broker {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt.apply(&o)
	}
	cfg := broker.Config{Addr: "127.0.0.1:0", RootUsername: "iggy", RootPassword: "iggy"}
	switch {
	case o.dir != "":
		cfg.DataDir = o.dir
	case !o.memory:
		cfg.DataDir = t.TempDir()
	}
	for _, fn := range o.edit {
		fn(&cfg)
	}
	b, err := broker.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("brokertest: start broker: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("brokertest: close broker: %v", err)
		}
	})
	return b
}
