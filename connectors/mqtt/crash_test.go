package mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mqtttest"
	"github.com/stretchr/testify/require"
)

// TestRuntimeChild is the runtime process the crash test kills.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9 of the runtime mid-stream, MQTT → Iggy → MQTT at QoS 1:
// every message published to the input topic reaches the output topic.
// Both connectors are at-least-once, so a kill may repeat at most what
// was in flight: the source's batches in Iggy but not yet acknowledged
// to the broker (the runtime reads one batch ahead: two batches) and the
// sink's batch acknowledged by the broker but whose offset was not yet
// committed (batch_length).
func TestEveryMessageArrivesAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const kills, batch = 10, 20
	url := mqtttest.URL(t)
	base := mqtttest.Name(t, "crash")
	clientID := mqtttest.Name(t, "cid")
	sub := subscribe(t, url, base+"/out/#")
	source := fmt.Sprintf(`type = "source"
key = "from_mqtt"
path = "mqtt"
[[streams]]
stream = "bridge"
topic = "events"
schema = "json"
linger_time = "0ms"
[plugin_config]
urls = [%q]
topics = [%q]
client_id = %q
qos = 1
batch_size = %d
batch_wait = "5ms"
`, url, base+"/in/#", clientID, batch)
	sink := fmt.Sprintf(`type = "sink"
key = "to_mqtt"
path = "mqtt"
[[streams]]
stream = "bridge"
topics = ["events"]
schema = "json"
batch_length = %d
poll_interval = "5ms"
consumer_group = "to_mqtt"
[plugin_config]
urls = [%q]
topic = %q
qos = 1
`, batch, url, base+"/out/{topic}")
	// The persistent session exists before the first message.
	s := newSource(t, map[string]any{"urls": []any{url}, "topics": []any{base + "/in/#"}, "client_id": clientID})
	openSource(t, s)
	require.NoError(t, s.Close(context.Background()))

	e := connectortest.NewCrashEnv(t, map[string]string{"in.toml": source, "out.toml": sink})
	seen := func() map[int]int {
		out := map[int]int{}
		for _, p := range sub.payloads() {
			var v struct{ N int }
			require.NoError(t, json.Unmarshal([]byte(p), &v), "%s", p)
			out[v.N]++
		}
		return out
	}
	var mu sync.Mutex
	published := 0
	stop := connectortest.Feed(t, 10*time.Millisecond, func(int) error {
		mu.Lock()
		from := published
		mu.Unlock()
		var ps []string
		for i := from; i < from+5; i++ {
			ps = append(ps, fmt.Sprintf(`{"n":%d}`, i))
		}
		publish(t, url, base+"/in/dev", 1, false, ps...)
		mu.Lock()
		published += 5
		mu.Unlock()
		return nil
	})
	final := e.KillLoop(nil, kills, func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen()), published
	})
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	mu.Lock()
	total := published
	mu.Unlock()
	connectortest.Eventually(t, "every message at the output", func() bool { return len(seen()) >= total })
	got := seen()
	copies := 0
	for n := 0; n < total; n++ {
		require.NotZero(t, got[n], "message %d was lost", n)
		copies += got[n]
	}
	t.Logf("%d messages, %d at the output (%d repeated by %d kills)", total, copies, copies-total, e.Kills)
	require.LessOrEqual(t, copies-total, e.Kills*(2*batch+batch), "more repeats than what was in flight at the kills")
}
