package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/ferryhq/ferry/connectors/file" // the file source, for the crash test's child runtime
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/redistest"
	goredis "github.com/redis/go-redis/v9"
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
	// The file source may repeat lines into Iggy across kills (at new
	// offsets), so counts prove nothing: wait until the topic holds every
	// line, then until the stream holds the whole topic. The sink writes
	// each Iggy offset once: entry i is offset i, and the stream equals
	// the topic.
	var topic []iggy.Message
	connectortest.Eventually(t, "every line in the topic", func() bool {
		topic = e.Topic("bridge", "events")
		got := map[int]bool{}
		for _, m := range topic {
			var v struct{ N int }
			if json.Unmarshal(m.Payload, &v) == nil {
				got[v.N] = true
			}
		}
		return len(got) >= total
	})
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

// Ten kill -9 of the runtime mid-stream, Redis → Iggy, over a stream and
// over a list: every record reaches the topic. A kill repeats at most
// the batches in flight (one being sent, one read ahead); a repeated
// stream entry keeps its id.
func TestSourceEveryRecordArrivesAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	for _, mode := range []string{"streams", "lists"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			const batch = 10
			url := redistest.URL(t)
			c := redistest.Client(t, url)
			p := redistest.Prefix(t)
			e := connectortest.NewCrashEnv(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_redis"
path = "redis"
[[streams]]
stream = "bridge"
topic = "records"
schema = "json"
linger_time = "0ms"
[plugin_config]
url = %q
mode = %q
stream = %q
key = %q
batch_size = %d
block = "20ms"
`, url, mode, p+"in", p+"in", batch)})
			ctx := context.Background()
			var added atomic.Int64
			stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
				_, err := c.Pipelined(ctx, func(pl goredis.Pipeliner) error {
					for k := range 5 {
						v := fmt.Sprintf(`{"n":%d}`, i*5+k)
						if mode == "streams" {
							pl.XAdd(ctx, &goredis.XAddArgs{Stream: p + "in", Values: []any{"body", v}})
						} else {
							pl.RPush(ctx, p+"in", v)
						}
					}
					return nil
				})
				if err == nil {
					added.Add(5)
				}
				return err
			})
			read := func() map[int]int {
				copies, ids := map[int]int{}, map[int][16]byte{}
				for _, m := range e.Topic("bridge", "records") {
					var v struct{ N int }
					require.NoError(t, json.Unmarshal(m.Payload, &v), "%s", m.Payload)
					if id, ok := ids[v.N]; ok && mode == "streams" {
						require.Equal(t, id, m.ID, "entry %d repeated with another id", v.N)
					}
					copies[v.N]++
					ids[v.N] = m.ID
				}
				return copies
			}
			final := e.KillLoop(nil, 10, func() (int, int) { return len(read()), int(added.Load()) })
			defer e.Kill(final)
			time.Sleep(300 * time.Millisecond)
			stop()
			total := int(added.Load())
			connectortest.Eventually(t, "every record in Iggy", func() bool { return len(read()) >= total })
			copies := read()
			sum := 0
			for n := 0; n < total; n++ {
				require.NotZero(t, copies[n], "record %d was lost", n)
				sum += copies[n]
			}
			t.Logf("%d records, %d messages (%d repeated by %d kills)", total, sum, sum-total, e.Kills)
			require.LessOrEqual(t, sum-total, e.Kills*2*batch, "more repeats than the batches in flight at the kills")
			if mode == "streams" {
				connectortest.Eventually(t, "no entry left pending", func() bool {
					pend, err := c.XPending(ctx, p+"in", "ferry").Result()
					return err == nil && pend.Count == 0
				})
			} else {
				connectortest.Eventually(t, "the processing list empty", func() bool { return c.LLen(ctx, p+"in:processing").Val() == 0 })
			}
		})
	}
}
