// Command misbehave is a sink plugin that fails on purpose, for the
// tests of package plugin/host and `ferry plugin test`: its first
// argument says how.
//
//	exit     exits at once, before the handshake
//	garbage  prints something that is not a handshake on standard output
//	hang     hangs in every Consume, ignoring its context
//	oom      allocates without bound in Consume
//	crash    exits in the middle of its third Consume
//	lose     acknowledges every message but writes only every other one
//	ok       behaves (a sink that appends payload lines to plugin_config's path)
package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin/sdk"
)

var mode = "ok"

var spec = connector.NewSpec(connector.NewStringField("path").Require())

type sink struct {
	mu    sync.Mutex
	path  string
	calls int
	keep  [][]byte
}

func (s *sink) Open(context.Context) error { return nil }

func (s *sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	switch mode {
	case "hang":
		select {}
	case "oom":
		fmt.Fprintln(os.Stderr, "allocating without bound")
		for {
			s.keep = append(s.keep, make([]byte, 64<<20))
		}
	case "crash":
		if s.calls == 3 {
			fmt.Fprintln(os.NewFile(2, "stderr"), "crashing in the middle of a batch")
			os.Exit(7)
		}
	}
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for i, m := range b.Messages {
		if mode == "lose" && i%2 == 1 {
			continue
		}
		if _, err := f.Write(append(m.Payload, '\n')); err != nil {
			return err
		}
	}
	return nil
}

func (s *sink) Close(context.Context) error { return nil }

func main() {
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "misbehave: cannot start: a library is missing")
		os.Exit(3)
	case "garbage":
		fmt.Println("Hello! This is not a handshake.")
		time.Sleep(time.Hour)
	}
	sdk.Serve(connector.Info{Kind: connector.KindSink, Name: "misbehave-" + mode, Summary: "a sink that " + mode + "s", Spec: spec,
		NewSink: func(cfg connector.Config) (connector.Sink, error) {
			set, err := spec.Parse(cfg.Plugin)
			if err != nil {
				return nil, err
			}
			return &sink{path: set.String("path")}, nil
		}})
}
