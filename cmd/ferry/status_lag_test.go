package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ferry status shows a sink's lag: a hook stuck on its first message has
// every message of its topic as lag; --watch shows the status again until
// the command's context ends.
func TestStatusShowsLagAndWatches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	live := startLiveRuntime(t, dir)
	_, mustHook := hookCLI(t, live)
	mustHook("create", "stuck", "work", "while [ ! -e "+release+" ]; do sleep 0.05; done", "--timeout", "2m")
	live.send(t, "hooks", "work", "a", "b", "c")

	status := func() map[string]any {
		out, err := ferry(t, "", "status", "--json", "--api", live.url, "--api-key", testAPIKey)
		require.NoError(t, err, out)
		var v struct {
			Connectors []map[string]any `json:"connectors"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &v), out)
		for _, c := range v.Connectors {
			if c["key"] == "hook-stuck" {
				return c
			}
		}
		t.Fatalf("no hook-stuck in %s", out)
		return nil
	}
	waitFor(t, "three messages of lag while the hook is stuck", func() bool { return status()["lag"] == 3.0 })
	out, err := ferry(t, "", "status", "--api", live.url, "--api-key", testAPIKey)
	require.NoError(t, err, out)
	require.Regexp(t, `KEY\s+KIND\s+STATUS\s+IN\s+OUT\s+LAG\s+ERRORS`, out)
	require.Regexp(t, `hook-stuck\s+sink\s+running\s+\d+\s+0\s+3\s`, out)

	require.NoError(t, os.WriteFile(release, nil, 0o644))
	waitFor(t, "no lag once the hook has run", func() bool { return status()["lag"] == 0.0 })

	// --watch: the status again and again, until the context ends.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := newRootCmd()
	var buf syncBuffer
	cmd.SetOut(&buf)
	cmd.SetErr(&buf)
	cmd.SetArgs([]string{"status", "--watch", "50ms", "--api", live.url, "--api-key", testAPIKey})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	waitFor(t, "three refreshes", func() bool { return strings.Count(buf.String(), "hook-stuck") >= 3 })
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("ferry status --watch did not stop when its context ended")
	}

	out, err = ferry(t, "", "status", "--watch", "-1s", "--api", live.url, "--api-key", testAPIKey)
	require.ErrorContains(t, err, "--watch -1s: want a positive interval", out)
}
