package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/dlq"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
)

// A hook that fails on one message dead-letters it; ferry dlq lists the
// topic, shows why and from where, and replays it to the hook's topic once
// the hook is fixed: the hook then runs it, and a second replay (even from
// the first offset) runs it no more.
func TestDLQListShowReplay(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	work := filepath.Join(dir, "project")
	require.NoError(t, os.Mkdir(work, 0o755))
	fixed, ran := filepath.Join(work, "fixed"), filepath.Join(work, "ran")
	live := startLiveRuntime(t, dir)
	_, mustHook := hookCLI(t, live)
	mustHook("create", "picky", "work", `{ [ {payload} != bad ] || [ -e `+fixed+` ]; } && printf '%s\n' {payload} >> `+ran, "--max-retries", "0")
	live.send(t, "hooks", "work", "one", "bad", "two")
	waitFor(t, "the good messages ran", fileHas(ran, "two"))

	dlqCLI := func(args ...string) string {
		t.Helper()
		out, err := ferry(t, "", append(append([]string{"dlq"}, args...), "--address", live.rt.IggyAddress())...)
		require.NoError(t, err, "ferry dlq %v: %s", args, out)
		return out
	}
	const topic = "hook-picky_dead_letter"
	waitFor(t, "the bad message dead-lettered", func() bool {
		return strings.Contains(dlqCLI("list", "hooks"), topic)
	})
	var list []map[string]any
	require.NoError(t, json.Unmarshal([]byte(dlqCLI("list", "--json")), &list))
	require.Contains(t, list, map[string]any{"stream": "hooks", "topic": topic, "messages": 1.0, "replayed": 0.0})

	var shown []map[string]any
	require.NoError(t, json.Unmarshal([]byte(dlqCLI("show", "hooks", topic, "--json")), &shown))
	require.Len(t, shown, 1)
	d := shown[0]
	require.Equal(t, "bad", d["payload"])
	require.Equal(t, "hooks", d["stream"])
	require.Equal(t, "work", d["topic"])
	require.Equal(t, 1.0, d["original_offset"])
	require.Equal(t, "hook-picky", d["connector"])
	require.Contains(t, d["error"], "exit status 1")
	out := dlqCLI("show", "hooks", topic)
	require.Contains(t, out, "from:      hooks/work partition 0 offset 1")
	require.Contains(t, out, "payload:   bad")

	out = dlqCLI("replay", "hooks", topic, "--dry-run")
	require.Contains(t, out, "would replay 1 message(s) from hooks/"+topic+": 1 to hooks/work")

	require.NoError(t, os.WriteFile(fixed, nil, 0o644))
	out = dlqCLI("replay", "hooks", topic)
	require.Contains(t, out, "replayed 1 message(s) from hooks/"+topic+": 1 to hooks/work")
	waitFor(t, "the fixed hook ran the replayed message", fileHas(ran, "bad"))
	require.Contains(t, dlqCLI("replay", "hooks", topic), "nothing to replay")
	require.Regexp(t, `hooks\s+`+topic+`\s+1\s+1\n`, dlqCLI("list", "hooks"), "MESSAGES and REPLAYED")

	// From the first offset again: the same id, so the broker (which
	// deduplicates by id under ferry run) stores it once.
	require.Contains(t, dlqCLI("replay", "hooks", topic, "--from", "first"), "replayed 1 message(s)")
	live.send(t, "hooks", "work", "three")
	waitFor(t, "a later message ran", fileHas(ran, "three"))
	require.Equal(t, "one\ntwo\nbad\nthree\n", read(t, ran), "the replay ran once")
	replays := 0
	cl, err := iggy.Dial(context.Background(), live.rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply, err := cl.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(9)),
		Stream: iggy.NamedID("hooks"), Topic: iggy.NamedID("work"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100})
	require.NoError(t, err)
	for _, m := range reply.Messages {
		if v, ok := header.Get(m.Headers, dlq.HeaderReplayOf); ok {
			replays++
			require.Equal(t, "bad", string(m.Payload))
			require.NotEmpty(t, v.String())
			_, isDLQ := header.Get(m.Headers, "ferry.dlq.error")
			require.False(t, isDLQ, "the dead-letter headers are not sent on")
		}
	}
	require.Equal(t, 1, replays)

	// --to another topic (made for it), and bad flags.
	_, err = cl.CreateTopic(ctx, iggy.NamedID("hooks"), "parked", 1)
	require.NoError(t, err)
	require.Contains(t, dlqCLI("replay", "hooks", topic, "--from", "0", "--to", "hooks/parked"), "1 to hooks/parked")

	// One dead letter by its place: sent under the same replay id (the
	// dry run names it), the replay offset left where it was.
	out = dlqCLI("replay", "hooks", topic, "--partition", "0", "--offset", "0", "--to", "hooks/parked", "--dry-run")
	require.Regexp(t, `would send [0-9a-f-]{36} to hooks/parked\n`, out)
	require.Contains(t, out, "would replay 1 message(s) from hooks/"+topic+": 1 to hooks/parked")
	require.Contains(t, dlqCLI("replay", "hooks", topic, "--partition", "0", "--offset", "0", "--to", "hooks/parked"), "1 to hooks/parked")
	require.Regexp(t, `hooks\s+`+topic+`\s+1\s+1\n`, dlqCLI("list", "hooks"), "the one-message replay left the offset")
	parked, err := cl.GetTopic(ctx, iggy.NamedID("hooks"), iggy.NamedID("parked"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), parked.MessagesCount, "three replays of one letter to hooks/parked, stored once")
	for _, bad := range [][]string{{"--partition", "0"}, {"--offset", "0"}, {"--offset", "9", "--partition", "0"},
		{"--offset", "0", "--partition", "0", "--from", "first"}} {
		out, err := ferry(t, "", append([]string{"dlq", "replay", "hooks", topic, "--address", live.rt.IggyAddress()}, bad...)...)
		require.Error(t, err, out)
		require.Contains(t, out+err.Error(), bad[0])
	}
	for _, bad := range [][]string{{"--to", "nostream"}, {"--from", "yesterday"}} {
		out, err := ferry(t, "", append([]string{"dlq", "replay", "hooks", topic, "--address", live.rt.IggyAddress()}, bad...)...)
		require.Error(t, err, out)
		require.Contains(t, out+err.Error(), bad[0])
	}
	out, err = ferry(t, "", "dlq", "show", "hooks", "nope", "--address", live.rt.IggyAddress())
	require.Error(t, err, out)
}
