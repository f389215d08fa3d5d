package mqtt

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mqtttest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

// retryingPublisher publishes at QoS 1 as a careful producer does: a
// message counts as sent only when the broker acknowledged it, and until
// then it is published again, over a new connection when the old one is
// gone. A message published again after its PUBACK was lost is a repeat
// the publisher made; resent counts those that may be.
type retryingPublisher struct {
	url, topic, id string
	client         paho.Client
	resent         atomic.Int64 // publishes written to a connection and not acknowledged
	refused        atomic.Int64 // attempts that found no broker
}

func newRetryingPublisher(url, topic string, t testing.TB) *retryingPublisher {
	p := &retryingPublisher{url: url, topic: topic, id: mqtttest.Name(t, "rpub")}
	t.Cleanup(func() {
		if p.client != nil {
			p.client.Disconnect(100)
		}
	})
	return p
}

// send publishes payload until the broker acknowledges it, giving up
// after limit (a liveness bound: the error says what never came back).
func (p *retryingPublisher) send(payload string, limit time.Duration) error {
	return p.sendTo(p.topic, payload, limit)
}

func (p *retryingPublisher) sendTo(topic, payload string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no broker acknowledged %s within %s", p.url, payload, limit)
		}
		if p.client == nil || !p.client.IsConnectionOpen() {
			if p.client != nil {
				p.client.Disconnect(0)
				p.client = nil
			}
			c := paho.NewClient(paho.NewClientOptions().AddBroker(p.url).SetClientID(p.id).
				SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(time.Second))
			tok := c.Connect()
			if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				p.refused.Add(1)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			p.client = c
		}
		tok := p.client.Publish(topic, 1, false, payload)
		if tok.WaitTimeout(10*time.Second) && tok.Error() == nil {
			return nil
		}
		p.resent.Add(1)
		p.client.Disconnect(0)
		p.client = nil
	}
}

// roundTrip publishes to topic (one no one subscribes to) and waits for the
// broker's answer. mosquitto saves its persistence file at the start of
// an event-loop turn for the changes of the turns before (autosave after
// every change, see mqtttest), and answers a packet in the turn that
// reads it, so once it answered a packet sent after the last PUBACK, what
// it acknowledged before is saved, and a kill now loses none of it.
func (p *retryingPublisher) roundTrip(t testing.TB, topic string) {
	t.Helper()
	require.NoError(t, p.sendTo(topic, "round trip", 30*time.Second))
}

// The broker goes away mid-stream and comes back on its persistence
// file: every QoS 1 message its publisher got acknowledged — before the
// outage, while the broker was down (held and published again by the
// publisher), and after — arrives in Iggy, and the source recovers by
// itself (the runtime restarts it). Repeats are what the package doc
// says of a broker crash: the messages whose acknowledgement the broker
// had not saved, each once; nothing published after it came back.
func TestSourceSurvivesABrokerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a broker of its own")
	}
	t.Parallel()
	const batch = 10
	srv := mqtttest.Private(t)
	base := mqtttest.Name(t, "src-outage")
	clientID := mqtttest.Name(t, "cid")
	// The persistent session and its subscription exist before the first
	// message (and are in mosquitto's file when it is killed).
	s := newSource(t, map[string]any{"urls": []any{srv.URL}, "topics": []any{base + "/in/#"}, "client_id": clientID})
	openSource(t, s)
	require.NoError(t, s.Close(t.Context()))

	run := connectortest.Start(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
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
connect_timeout = "2s"
`, srv.URL, base+"/in/#", clientID, batch)})
	logConnectors(t, run.Runtime)
	source := func() runtime.Info { return run.Runtime.Connectors(connector.KindSource)[0] }
	connectortest.Eventually(t, "the source running", func() bool { return source().Status == runtime.StatusRunning })

	seen := func() (map[int]int, int) {
		out, total := map[int]int{}, 0
		for _, m := range run.Messages(t, "bridge", "events") {
			var v struct{ N int }
			require.NoError(t, json.Unmarshal(m.Payload, &v), "%s", m.Payload)
			out[v.N]++
			total++
		}
		return out, total
	}
	pub := newRetryingPublisher(srv.URL, base+"/in/dev", t)
	sendRange := func(from, to int) error {
		for i := from; i < to; i++ {
			if err := pub.send(fmt.Sprintf(`{"n":%d}`, i), 3*time.Minute); err != nil {
				return err
			}
		}
		return nil
	}
	const before, during, after = 200, 30, 30

	// Before: a stream the source is still taking in when the broker
	// dies (the repeats show that the broker had deliveries to it
	// outstanding).
	require.NoError(t, sendRange(0, before))
	pub.roundTrip(t, base+"/round-trip")
	got, _ := seen()
	srv.Halt()
	t.Logf("in Iggy just before the broker was killed: %d of %d", len(got), before)

	// During: the publisher holds its messages and keeps trying.
	done := make(chan error, 1)
	go func() { done <- sendRange(before, before+during) }()
	connectortest.Eventually(t, "the source to notice the outage", func() bool { return source().LastError != "" })
	connectortest.Eventually(t, "the publisher to find no broker", func() bool { return pub.refused.Load() > 0 })
	srv.Resume(t)
	require.NoError(t, <-done)

	// After.
	require.NoError(t, sendRange(before+during, before+during+after))
	total := before + during + after

	// The runtime restarts a source with backoff of up to a minute, so
	// its next try may come that long after the broker is back: wait
	// longer than that (a liveness bound).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got, _ := seen()
		if len(got) >= total {
			break
		}
		if time.Now().After(deadline) {
			var missing []int
			for n := 0; n < total; n++ {
				if got[n] == 0 {
					missing = append(missing, n)
				}
			}
			t.Fatalf("after the outage %d of %d messages are missing: %v", len(missing), total, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	got, copies := seen()
	for n := 0; n < total; n++ {
		require.NotZero(t, got[n], "message %d was lost", n)
	}
	require.Len(t, got, total, "only the messages published")
	t.Logf("%d messages, %d in Iggy (%d repeated; the publisher resent %d), %d source restarts",
		total, copies, copies-total, pub.resent.Load(), source().Restarts)
	// One broker crash: what it had delivered before comes again at most
	// once (mosquitto forgets the acknowledgements it received since its
	// last save, see the package doc); what was published once it was
	// back comes once, but for what the publisher itself published again.
	later := 0
	for n := 0; n < total; n++ {
		if n < before {
			require.LessOrEqual(t, got[n], 2, "message %d came more than once again after one broker crash", n)
		} else {
			later += got[n] - 1
		}
	}
	require.LessOrEqual(t, later, int(pub.resent.Load()), "messages published after the broker came back were repeated")
	info := source()
	require.Equal(t, runtime.StatusRunning, info.Status, "the source recovered by itself")
	require.Greater(t, info.Restarts, 0, "restarted by the runtime")
}
