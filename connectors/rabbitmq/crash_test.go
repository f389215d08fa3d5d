package rabbitmq

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/amqptest"
	"github.com/stretchr/testify/require"
)

// TestRuntimeChild is the runtime process the crash test kills.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9 of the runtime mid-stream, RabbitMQ → Iggy → RabbitMQ:
// every message published to the input queue reaches the output queue.
// Both connectors are at-least-once, so a kill may repeat at most what
// was in flight: the source's unacknowledged deliveries (prefetch_count)
// and the sink's unconfirmed batch (batch_length).
func TestEveryMessageArrivesAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const kills, batch, prefetch = 10, 20, 40
	url := amqptest.URL(t)
	in, out := amqptest.Name(t, "in"), amqptest.Name(t, "x")
	ch, q := queueOn(t, url, out, "iggy.messages")
	// The input queue exists before the first publish.
	inCh, _ := queueOn(t, url, amqptest.Name(t, "unused"), "#")
	_, err := inCh.QueueDeclare(in, true, false, false, false, nil)
	require.NoError(t, err)

	e := connectortest.NewCrashEnv(t, map[string]string{
		"in.toml": fmt.Sprintf(`type = "source"
key = "from_rabbit"
path = "rabbitmq"
[[streams]]
stream = "bridge"
topic = "events"
schema = "json"
linger_time = "0ms"
[plugin_config]
amqp_url = %q
queue = %q
batch_size = %d
prefetch_count = %d
batch_wait = "5ms"
`, url, in, batch, prefetch),
		"out.toml": fmt.Sprintf(`type = "sink"
key = "to_rabbit"
path = "libiggy_connector_rabbitmq_sink"
[[streams]]
stream = "bridge"
topics = ["events"]
schema = "json"
batch_length = %d
poll_interval = "5ms"
consumer_group = "to_rabbit"
[plugin_config]
amqp_url = %q
exchange = %q
routing_key = "iggy.messages"
`, batch, url, out),
	})

	var mu sync.Mutex
	seen := map[int]int{} // n → copies at the output
	read := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range drain(t, ch, q) {
			var v struct{ N int }
			require.NoError(t, json.Unmarshal(d.Body, &v), "%s", d.Body)
			seen[v.N]++
		}
	}
	published := 0
	stop := connectortest.Feed(t, 10*time.Millisecond, func(int) error {
		publish(t, url, in, published, 5)
		mu.Lock()
		published += 5
		mu.Unlock()
		return nil
	})
	final := e.KillLoop(nil, kills, func() (int, int) {
		read()
		mu.Lock()
		defer mu.Unlock()
		return len(seen), published
	})
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	mu.Lock()
	total := published
	mu.Unlock()
	connectortest.Eventually(t, "every message at the output", func() bool {
		read()
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= total
	})
	mu.Lock()
	defer mu.Unlock()
	copies := 0
	for n := 0; n < total; n++ {
		require.NotZero(t, seen[n], "message %d was lost", n)
		copies += seen[n]
	}
	t.Logf("%d messages, %d at the output (%d repeated by %d kills)", total, copies, copies-total, e.Kills)
	require.LessOrEqual(t, copies-total, e.Kills*(prefetch+batch), "more repeats than what was in flight at the kills")
}
