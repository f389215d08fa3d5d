package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/natstest"
	"github.com/stretchr/testify/require"
)

// TestRuntimeChild is the runtime process the crash tests kill.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9 of the runtime mid-stream, Iggy → NATS JetStream: every
// message sent to Iggy is in the stream exactly once. A batch delivered
// again after a kill is published again with the same Nats-Msg-Id, and
// JetStream drops the copies it already stored.
func TestSinkEveryMessageOnceAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	e := connectortest.NewCrashEnv(t, map[string]string{"out.toml": fmt.Sprintf(`type = "sink"
key = "to_nats"
path = "nats"
[[streams]]
stream = "bridge"
topics = ["events"]
schema = "json"
batch_length = 20
poll_interval = "5ms"
consumer_group = "to_nats"
[plugin_config]
url = %q
subject = "%s.{topic}"
stream = %q
`, url, n.Subject, n.Stream)})
	ctx := context.Background()
	_, err := e.Client.CreateStream(ctx, "bridge")
	require.NoError(t, err)
	_, err = e.Client.CreateTopic(ctx, iggy.NamedID("bridge"), "events", 1)
	require.NoError(t, err)
	var sent atomic.Int64
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		var msgs []iggy.Message
		for k := range 5 {
			msgs = append(msgs, iggy.Message{Payload: []byte(fmt.Sprintf(`{"n":%d}`, i*5+k))})
		}
		_, err := e.Client.SendMessages(ctx, iggy.NamedID("bridge"), iggy.NamedID("events"), iggy.ToPartition(0), msgs)
		if err == nil {
			sent.Add(5)
		}
		return err
	})
	final := e.KillLoop(nil, 10, func() (int, int) { return len(stored(t, js, n.Stream)), int(sent.Load()) })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := int(sent.Load())
	connectortest.Eventually(t, "every message in the stream", func() bool { return len(stored(t, js, n.Stream)) >= total })
	got := stored(t, js, n.Stream)
	seen := map[int]int{}
	for _, m := range got {
		var v struct{ N int }
		require.NoError(t, json.Unmarshal(m.Data, &v), "%s", m.Data)
		seen[v.N]++
	}
	for i := 0; i < total; i++ {
		require.Equal(t, 1, seen[i], "message %d stored %d times", i, seen[i])
	}
	require.Len(t, got, total, "no message stored twice")
	t.Logf("%d messages, each once, across %d kills", total, e.Kills)
}

// Ten kill -9 of the runtime mid-stream, NATS JetStream → Iggy: every
// message reaches the topic. A kill repeats at most what was delivered
// and not yet acknowledged (max_ack_pending), each copy with the id of
// its stream sequence.
func TestSourceEveryMessageArrivesAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const batch, maxAckPending = 10, 40
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	e := connectortest.NewCrashEnv(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_nats"
path = "nats"
[[streams]]
stream = "bridge"
topic = "events"
schema = "json"
linger_time = "0ms"
[plugin_config]
url = %q
stream = %q
durable = "from_nats"
ack_wait = "2s"
max_ack_pending = %d
batch_size = %d
batch_wait = "5ms"
`, url, n.Stream, maxAckPending, batch)})
	var added atomic.Int64
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		publishJS(t, js, n.Subject+".in", i*5, 5)
		added.Add(5)
		return nil
	})
	read := func() map[int]int {
		copies, ids := map[int]int{}, map[int][16]byte{}
		for _, m := range e.Topic("bridge", "events") {
			var v struct{ N int }
			require.NoError(t, json.Unmarshal(m.Payload, &v), "%s", m.Payload)
			if id, ok := ids[v.N]; ok {
				require.Equal(t, id, m.ID, "message %d repeated with another id", v.N)
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
	connectortest.Eventually(t, "every message in Iggy", func() bool { return len(read()) >= total })
	copies := read()
	sum := 0
	for i := 0; i < total; i++ {
		require.NotZero(t, copies[i], "message %d was lost", i)
		sum += copies[i]
	}
	t.Logf("%d messages, %d in Iggy (%d repeated by %d kills)", total, sum, sum-total, e.Kills)
	require.LessOrEqual(t, sum-total, e.Kills*maxAckPending, "more repeats than what was unacknowledged at the kills")
}
