package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	_ "github.com/ferryhq/ferry/connectors/file" // the file source, for the crash test's child runtime
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/redistest"
	"github.com/stretchr/testify/require"
)

// TestRuntimeChild is the runtime process the crash tests kill.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9 of the runtime mid-stream, file → Iggy → Redis stream:
// every line is in the stream exactly once and in order; the offset
// entry ids make a replayed batch add nothing.
func TestSinkEveryMessageOnceAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	in := connectortest.NewFileInput(t, "bridge", "events", 20, func(n int) string { return fmt.Sprintf(`{"n":%d}`, n) })
	e := connectortest.NewCrashEnv(t, map[string]string{"in.toml": in.TOML, "out.toml": fmt.Sprintf(`type = "sink"
key = "to_redis"
path = "redis"
[[streams]]
stream = "bridge"
topics = ["events"]
schema = "json"
batch_length = 20
poll_interval = "5ms"
consumer_group = "to_redis"
[plugin_config]
url = %q
stream = %q
`, url, p+"{stream}:{topic}:{partition}")})
	stream := p + "bridge:events:0"
	ctx := context.Background()
	stop := connectortest.Feed(t, 10*time.Millisecond, func(int) error { return in.Append(5) })
	final := e.KillLoop(nil, 10, func() (int, int) { return int(c.XLen(ctx, stream).Val()), in.Written() })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := in.Written()
	connectortest.Eventually(t, "every line in the stream", func() bool { return c.XLen(ctx, stream).Val() >= int64(total) })
	// The file source may repeat lines into Iggy across kills (at new
	// offsets); the sink writes each Iggy offset once: entry i is offset
	// i, and the stream equals the topic.
	topic := e.Topic("bridge", "events")
	connectortest.Eventually(t, "the whole topic in the stream", func() bool { return c.XLen(ctx, stream).Val() >= int64(len(topic)) })
	es, err := c.XRange(ctx, stream, "-", "+").Result()
	require.NoError(t, err)
	require.Equal(t, len(topic), len(es), "one entry per Iggy offset")
	seen := map[int]bool{}
	for i, m := range topic {
		require.Equal(t, fmt.Sprintf("%d-0", m.Offset+1), es[i].ID, "entry %d", i)
		require.Equal(t, string(m.Payload), es[i].Values["body"], "entry %d", i)
		var v struct{ N int }
		require.NoError(t, json.Unmarshal(m.Payload, &v))
		seen[v.N] = true
	}
	for n := 0; n < total; n++ {
		require.True(t, seen[n], "line %d was lost", n)
	}
	t.Logf("%d lines, %d Iggy messages, each once in the stream, across %d kills", total, len(topic), e.Kills)
}
