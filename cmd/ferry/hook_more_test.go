package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

// --from now skips what the topic already held; --ordering key runs the
// hook's messages in order per key; hook logs shows the runs with their
// offsets, exit codes and output.
func TestHookFromNowOrderingAndLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	work := filepath.Join(dir, "project")
	require.NoError(t, os.Mkdir(work, 0o755))
	live := startLiveRuntime(t, dir)
	hook, mustHook := hookCLI(t, live)

	// The topic holds two messages before the hook exists.
	mustHook("create", "first", "events", "true") // makes hooks/events
	live.send(t, "hooks", "events", "old-1", "old-2")
	out := mustHook("create", "late", "events", `printf '%s\n' {payload} >> `+filepath.Join(work, "late")+`; echo ran {offset}; [ {payload} != bad ]`,
		"--from", "now", "--ordering", "key", "--concurrency", "4", "--max-retries", "0", "--json")
	var created map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &created))
	require.Equal(t, "now", created["start_from"])
	require.Equal(t, "key", created["ordering"])

	live.send(t, "hooks", "events", "new-1", "bad", "new-2")
	waitFor(t, "the new messages ran", fileHas(filepath.Join(work, "late"), "new-2"))
	got := read(t, filepath.Join(work, "late"))
	require.NotContains(t, got, "old-", "--from now skipped what the topic held")
	for _, p := range []string{"new-1", "bad", "new-2"} {
		require.Contains(t, got, p+"\n")
	}

	waitFor(t, "three runs logged", func() bool {
		out, err := hook("logs", "late", "--json")
		return err == nil && strings.Count(out, `"offset"`) >= 3
	})
	out = mustHook("logs", "late")
	require.Contains(t, out, "STARTED")
	require.Regexp(t, `\s2\s+0\s+\S+\s+ran 2`, out, "offset 2 ran with exit 0 and its output")
	require.Regexp(t, `\s3\s+1\s+\S+\s+exit status 1`, out, "the failing run: its exit code and error")
	var runs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustHook("logs", "late", "--json", "--limit", "2")), &runs))
	require.Len(t, runs, 2, "--limit keeps the newest")

	out = mustHook("get", "late")
	require.Contains(t, out, "ordering:       key")
	require.Contains(t, out, "start from:     now")

	for _, tc := range []struct{ args []string }{
		{[]string{"create", "x", "t", "true", "--from", "yesterday"}},
		{[]string{"create", "x", "t", "true", "--ordering", "random"}},
	} {
		_, err := hook(tc.args...)
		require.Error(t, err)
		require.Equal(t, 2, exitCode(err))
	}
	_, err := hook("logs", "missing")
	require.ErrorContains(t, err, "hook missing does not exist")
}

// --on TYPE makes a trigger: the hook runs for each event of the type,
// with the CloudEvent as its payload.
func TestHookOnABrokerEvent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "created")
	live := startLiveRuntime(t, dir)
	hook, _ := hookCLI(t, live)
	got, err := hook("create", "on-streams", "--on", "stream.created", `printf '%s\n' {payload} >> `+out)
	require.NoError(t, err, got)
	require.Contains(t, got, "on ferry.events/stream.created")
	ctx := context.Background()
	cl, err := iggy.Dial(ctx, live.rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	_, err = cl.CreateStream(ctx, "brand-new")
	require.NoError(t, err)
	waitFor(t, "the trigger ran", fileHas(out, `"brand-new"`))
	var ev map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.SplitN(read(t, out), "\n", 2)[0]), &ev))
	require.Equal(t, "1.0", ev["specversion"])
	require.Equal(t, "stream.created", ev["type"])
	view, err := hook("get", "on-streams", "--json")
	require.NoError(t, err)
	require.Contains(t, view, `"dead_letter": "hooks/hook-on-streams_dead_letter"`)

	_, err = hook("create", "typo", "--on", "segment.delted", "true")
	require.ErrorContains(t, err, "segment.deleted", "names the type meant")
	require.Equal(t, 2, exitCode(err))
	_, err = hook("create", "both", "--on", "stream.created", "true", "--stream", "s")
	require.ErrorContains(t, err, "leave out --stream")
}
