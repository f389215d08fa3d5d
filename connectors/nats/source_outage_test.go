package nats

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/natstest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// sourceTOML is a nats source connector file into bridge/events.
func sourceTOML(url, plugin string) string {
	return fmt.Sprintf(`type = "source"
key = "from_nats"
path = "nats"
[[streams]]
stream = "bridge"
topic = "events"
schema = "json"
linger_time = "0ms"
[plugin_config]
url = %q
timeout = "5s"
%s
`, url, plugin)
}

func logSources(t *testing.T, rt *runtime.Runtime) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, info := range rt.Connectors(connector.KindSource) {
				t.Logf("source %s: %s, %d restarts, last error %q", info.Key, info.Status, info.Restarts, info.LastError)
			}
		}
	})
}

// A nats-server killed (SIGKILL) mid-stream and started again on its
// JetStream store: the source rides out the outage (reconnecting, or
// restarted by the runtime), and once the server is back every message
// JetStream acknowledged reaches the Iggy topic, with no help from the
// test. A message repeats only when it was delivered and its
// acknowledgement lost with the server (at most max_ack_pending), with
// the id of its stream sequence.
func TestSourceJetStreamSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a nats-server of its own")
	}
	t.Parallel()
	const maxAckPending = 40
	srv, n := natstest.Private(t), natstest.NewNames(t)
	js := natstest.Stream(t, srv.URL, n)
	run := connectortest.Start(t, map[string]string{"in.toml": sourceTOML(srv.URL, fmt.Sprintf(`stream = %q
durable = "from_nats"
ack_wait = "2s"
max_ack_pending = %d
batch_size = 10
batch_wait = "5ms"
`, n.Stream, maxAckPending))})
	logSources(t, run.Runtime)

	var mu sync.Mutex
	acked, tried, failed := map[int]bool{}, map[int]bool{}, 0
	counts := func() (int, int) { mu.Lock(); defer mu.Unlock(); return len(acked), failed }
	stop := connectortest.Feed(t, 2*time.Millisecond, func(i int) error {
		mu.Lock()
		tried[i] = true
		mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		// No Nats-Msg-Id: the source's id is then the stream sequence.
		_, err := js.Publish(ctx, n.Subject+".in", []byte(`{"n":`+strconv.Itoa(i)+`}`))
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			acked[i] = true
		} else {
			failed++
		}
		return nil
	})
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	topic := func() []iggy.Message { return run.Messages(t, "bridge", "events") }
	connectortest.Eventually(t, "messages flowing into Iggy", func() bool { return len(topic()) >= 50 })

	srv.Halt()
	connectortest.Eventually(t, "publishes failing in the outage", func() bool { _, f := counts(); return f >= 3 })
	_, failedInOutage := counts()
	srv.Resume(t)
	ackedAtResume, _ := counts()
	connectortest.Eventually(t, "publishes acknowledged again after the restart", func() bool {
		a, _ := counts()
		return a >= ackedAtResume+100
	})
	stopped = true
	stop()

	mu.Lock()
	want := acked
	mu.Unlock()
	// A source the runtime restarts waits up to a minute of backoff: wait
	// longer than that (a liveness bound).
	var msgs []iggy.Message
	deadline := time.Now().Add(3 * time.Minute)
	for {
		msgs = topic()
		seen := map[int]bool{}
		for _, m := range msgs {
			var v struct{ N int }
			if json.Unmarshal(m.Payload, &v) == nil {
				seen[v.N] = true
			}
		}
		missing := 0
		for i := range want {
			if !seen[i] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the outage %d of %d acknowledged messages are not in Iggy", missing, len(want))
		}
		time.Sleep(50 * time.Millisecond)
	}
	src, err := NewSource(cfg(map[string]any{"stream": n.Stream}))
	require.NoError(t, err)
	key := src.(*Source).streamKey
	copies, ids := map[int]int{}, map[int][16]byte{}
	for _, m := range msgs {
		var v struct{ N int }
		require.NoError(t, json.Unmarshal(m.Payload, &v), "%s", m.Payload)
		require.True(t, tried[v.N], "message %d was never published", v.N)
		h, ok := header.Get(m.Headers, "nats_sequence")
		require.True(t, ok, "message %d has its nats_sequence", v.N)
		seq, err := strconv.ParseUint(h.String(), 10, 64)
		require.NoError(t, err)
		var id [16]byte
		copy(id[:8], key[:])
		binary.BigEndian.PutUint64(id[8:], seq)
		require.Equal(t, id, m.ID, "message %d: the id is the stream and its sequence", v.N)
		if prev, ok := ids[v.N]; ok {
			require.Equal(t, prev, m.ID, "message %d repeated with another id", v.N)
		}
		ids[v.N] = m.ID
		copies[v.N]++
	}
	repeats := len(msgs) - len(copies)
	var restarts int
	for _, info := range run.Runtime.Connectors(connector.KindSource) {
		restarts = info.Restarts
	}
	t.Logf("%d messages acknowledged by JetStream (%d tried), %d in Iggy, %d repeated; %d publishes failed in the outage; %d source restarts",
		len(want), len(tried), len(msgs), repeats, failedInOutage, restarts)
	require.LessOrEqual(t, repeats, maxAckPending, "more repeats than what was unacknowledged at the outage")
	cons, err := js.Consumer(context.Background(), n.Stream, "from_nats")
	require.NoError(t, err)
	connectortest.Eventually(t, "every message acknowledged", func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
}

// Core NATS keeps nothing, so what was published while the server was
// down is gone; what is asserted is that the source recovers by itself
// (its subscription comes back) and receives what is published once it
// is back.
func TestSourceCoreRecoversAfterAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a nats-server of its own")
	}
	t.Parallel()
	srv, n := natstest.Private(t), natstest.NewNames(t)
	run := connectortest.Start(t, map[string]string{"in.toml": sourceTOML(srv.URL, fmt.Sprintf(`mode = "core"
subject = %q
batch_size = 10
batch_wait = "5ms"
`, n.Subject+".>"))})
	logSources(t, run.Runtime)
	seq := 0
	// publish sends one message on a fresh connection and returns its
	// payload; an error (the server still starting) is no message.
	publish := func(tag string, k int) []string {
		nc, err := nats.Connect(srv.URL, nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			return nil
		}
		defer nc.Close()
		var out []string
		for range k {
			seq++
			p := fmt.Sprintf(`{"tag":%q,"n":%d}`, tag, seq)
			if nc.Publish(n.Subject+".x", []byte(p)) == nil {
				out = append(out, p)
			}
		}
		if nc.Flush() != nil {
			return nil
		}
		return out
	}
	got := func(tag string) map[string]bool {
		out := map[string]bool{}
		for _, m := range run.Messages(t, "bridge", "events") {
			var v struct{ Tag string }
			require.NoError(t, json.Unmarshal(m.Payload, &v), "%s", m.Payload)
			if v.Tag == tag {
				out[string(m.Payload)] = true
			}
		}
		return out
	}
	// The subscription is made when the source opens: publish until one
	// message arrives.
	connectortest.Eventually(t, "the source subscribed", func() bool {
		publish("before", 1)
		return len(got("before")) > 0
	})

	srv.Halt()
	srv.Resume(t)
	connectortest.Eventually(t, "the source subscribed again after the restart", func() bool {
		publish("probe", 1)
		return len(got("probe")) > 0
	})
	// Subscribed again: a burst published now arrives whole.
	burst := publish("after", 50)
	require.Len(t, burst, 50)
	connectortest.Eventually(t, "the burst after the restart", func() bool { return len(got("after")) >= len(burst) })
	after := got("after")
	for _, p := range burst {
		require.True(t, after[p], "%s published after the restart is missing", p)
	}
	require.Len(t, after, len(burst), "nothing but the burst")
}
