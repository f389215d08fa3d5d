package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ferryhq/ferry/api"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/runtime"
)

// printWhere writes, once the runtime runs, where everything is and what
// to type next: the broker, the API and its credential, the state and
// connector directories, and a command that sends a test message.
func printWhere(w io.Writer, rt *runtime.Runtime, cfg *config.Runtime, srv *api.Server) {
	var b strings.Builder
	b.WriteString("\nFerry is running.\n")
	addr := rt.IggyAddress()
	if cfg.Iggy.Embedded() {
		fmt.Fprintf(&b, "  Iggy broker   %s (embedded; data in %s)\n", addr, shortPath(filepath.Join(cfg.State.Path, "broker")))
	} else {
		fmt.Fprintf(&b, "  Iggy server   %s\n", addr)
	}
	switch {
	case srv == nil:
		b.WriteString("  API           off ([http] enabled = false)\n")
	case srv.TokenPath() != "":
		fmt.Fprintf(&b, "  API           http://%s (local token in %s; ferry commands use it)\n", srv.Addr(), shortPath(srv.TokenPath()))
	default:
		fmt.Fprintf(&b, "  API           http://%s (api-key header: [http] api_key)\n", srv.Addr())
	}
	fmt.Fprintf(&b, "  State         %s\n", shortPath(cfg.State.Path))
	if cfg.Connectors.ConfigDir != "" {
		n := len(rt.Connectors(connector.KindSource)) + len(rt.Connectors(connector.KindSink))
		fmt.Fprintf(&b, "  Connectors    %d from %s\n", n, shortPath(cfg.Connectors.ConfigDir))
	}
	stream, topic := "hooks", "my-topic"
	for _, i := range rt.Connectors(connector.KindSink) {
		if i.Config != nil && len(i.Config.Consumers) > 0 && len(i.Config.Consumers[0].Topics) > 0 {
			stream, topic = i.Config.Consumers[0].Stream, i.Config.Consumers[0].Topics[0]
			break
		}
	}
	send := fmt.Sprintf("ferry message send %s %s '{\"hello\": \"ferry\"}'", stream, topic)
	if addr != config.DefaultEmbeddedAddress {
		send += " --address " + addr
	}
	fmt.Fprintf(&b, "Send a test message:  %s\n", send)
	b.WriteString("Status:               ferry status\n")
	b.WriteString("Ctrl-C stops (batches in flight finish first).\n\n")
	_, _ = io.WriteString(w, b.String())
}

// shortPath shows path relative to the working directory when it is
// under it.
func shortPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// waitingFor says what a stopping runtime waits for: the connectors still
// running, by kind and key.
func waitingFor(rt *runtime.Runtime) string {
	var parts []string
	for _, kind := range []connector.Kind{connector.KindSource, connector.KindSink} {
		var keys []string
		for _, i := range rt.Connectors(kind) {
			if i.Status == runtime.StatusRunning || i.Status == runtime.StatusStarting {
				keys = append(keys, i.Key)
			}
		}
		if len(keys) > 0 {
			parts = append(parts, fmt.Sprintf("%ss %s", kind, strings.Join(keys, ", ")))
		}
	}
	if len(parts) == 0 {
		return "no connector is running"
	}
	return "waiting for " + strings.Join(parts, " and ") + " to finish their batches in flight and commit"
}

// exitOnSecondSignal exits at once on the next SIGINT or SIGTERM.
func exitOnSecondSignal(w io.Writer) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		fmt.Fprintln(w, "ferry: second interrupt: exiting now")
		os.Exit(130)
	}()
}
