package exec_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

// TestRuntimeChild is the runtime process the crash tests kill.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9 of the runtime while an exec sink with ordering = "key"
// runs a command per message: every message ran at least once, and for
// each key the first run of message i+1 came after the first run of
// message i (strict FIFO per key survives the kills; a replay after a kill
// repeats, it never skips ahead).
func TestOrderingKeyAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	out := filepath.Join(t.TempDir(), "ran")
	e := connectortest.NewCrashEnv(t, map[string]string{"hook.toml": fmt.Sprintf(`type = "sink"
key = "by_key"
path = "exec"
[[streams]]
stream = "jobs"
topics = ["todo"]
schema = "raw"
batch_length = 5
poll_interval = "5ms"
consumer_group = "by_key"
ordering = "key"
ordering_concurrency = 4
[plugin_config]
command = "printf '%%s\\n' {payload} >> %s"
`, out)})
	ctx := context.Background()
	_, err := e.Client.CreateStream(ctx, "jobs")
	require.NoError(t, err)
	_, err = e.Client.CreateTopic(ctx, iggy.NamedID("jobs"), "todo", 1)
	require.NoError(t, err)
	const keys = 8
	var sent atomic.Int64
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		var msgs []iggy.Message
		for k := range keys {
			key := fmt.Sprintf("k%d", k)
			msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, "%s:%d", key, i),
				Headers: []header.Header{header.New(iggy.KeyHeader, header.StringValue(key))}})
		}
		_, err := e.Client.SendMessages(ctx, iggy.NamedID("jobs"), iggy.NamedID("todo"), iggy.ToPartition(0), msgs)
		if err == nil {
			sent.Add(keys)
		}
		return err
	})
	final := e.KillLoop(nil, 10, func() (int, int) { return len(distinctRuns(t, out)), int(sent.Load()) })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := int(sent.Load())
	connectortest.Eventually(t, "every message ran", func() bool { return len(distinctRuns(t, out)) >= total })
	first := map[string][]int{} // key → i in the order of their first runs
	seen := map[string]bool{}
	lines := readLines(t, out)
	for _, line := range lines {
		if seen[line] {
			continue
		}
		seen[line] = true
		k, i, ok := strings.Cut(line, ":")
		require.True(t, ok, "line %q", line)
		var n int
		_, err := fmt.Sscan(i, &n)
		require.NoError(t, err)
		first[k] = append(first[k], n)
	}
	require.Len(t, first, keys)
	for k, ns := range first {
		for j, n := range ns {
			require.Equal(t, j, n, "key %s: message %d ran (first) before message %d", k, n, j)
		}
	}
	t.Logf("%d messages over %d keys, each ran, in order per key, across %d kills (%d runs in all)", total, keys, e.Kills, len(lines))
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			out = append(out, line)
		}
	}
	return out
}

func distinctRuns(t *testing.T, path string) map[string]bool {
	seen := map[string]bool{}
	for _, l := range readLines(t, path) {
		seen[l] = true
	}
	return seen
}
