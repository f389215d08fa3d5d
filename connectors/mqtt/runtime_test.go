package mqtt

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/mqtttest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

func sinkTOML(url, topic, extra, plugin string) string {
	return fmt.Sprintf(`type = "sink"
key = "to_mqtt"
path = "mqtt"
[[streams]]
stream = "bridge"
topics = ["events", "alerts"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "to_mqtt"
%s
[plugin_config]
urls = [%q]
topic = %q
qos = 1
%s
`, extra, url, topic, plugin)
}

func sourceTOML(url, clientID string, filters []string, plugin string) string {
	quoted := make([]string, len(filters))
	for i, f := range filters {
		quoted[i] = fmt.Sprintf("%q", f)
	}
	return fmt.Sprintf(`type = "source"
key = "from_mqtt"
path = "mqtt"
[[streams]]
stream = "bridge"
topic = "events"
schema = "json"
linger_time = "0ms"
[plugin_config]
urls = [%q]
topics = [%s]
client_id = %q
qos = 1
batch_size = 50
batch_wait = "5ms"
%s
`, url, strings.Join(quoted, ", "), clientID, plugin)
}

func sendJSON(t *testing.T, rt interface{ IggyAddress() string }, stream, topic string, payloads ...string) {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var msgs []iggy.Message
	for _, p := range payloads {
		msgs = append(msgs, iggy.Message{Payload: []byte(p)})
	}
	_, err = admin.SendMessages(context.Background(), iggy.NamedID(stream), iggy.NamedID(topic), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
}

func logConnectors(t *testing.T, rt *runtime.Runtime) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, k := range []connector.Kind{connector.KindSource, connector.KindSink} {
				for _, info := range rt.Connectors(k) {
					t.Logf("%s %s: %s, %d restarts, last error %q", k, info.Key, info.Status, info.Restarts, info.LastError)
				}
			}
		}
	})
}

// MQTT → Iggy → MQTT through the runtime: the source's filters with a
// route send alerts to their own Iggy topic, the sink's template puts
// each Iggy topic on an MQTT topic of its own, and every message arrives.
func TestSourceToSinkThroughIggy(t *testing.T) {
	t.Parallel()
	url := mqtttest.URL(t)
	base := mqtttest.Name(t, "rt")
	sub := subscribe(t, url, base+"/out/#")
	run := connectortest.Start(t, map[string]string{
		"in.toml": sourceTOML(url, mqtttest.Name(t, "cid"), []string{base + "/in/+/data", base + "/in/alerts/#"},
			fmt.Sprintf("[plugin_config.topic_routes]\n%q = \"alerts\"\n", base+"/in/alerts/#")),
		"out.toml": sinkTOML(url, base+"/out/{topic}", "", ""),
	})
	logConnectors(t, run.Runtime)
	connectortest.Eventually(t, "the source's subscription", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSource) {
			if info.Status == runtime.StatusRunning {
				return true
			}
		}
		return false
	})
	var events, alerts []string
	for i := range 120 {
		events = append(events, fmt.Sprintf(`{"event":%d}`, i))
	}
	for i := range 15 {
		alerts = append(alerts, fmt.Sprintf(`{"alert":%d}`, i))
	}
	publish(t, url, base+"/in/dev1/data", 1, false, events...)
	publish(t, url, base+"/in/alerts/fire", 1, false, alerts...)
	got := func(topic string) []string {
		sub.mu.Lock()
		defer sub.mu.Unlock()
		var out []string
		for _, m := range sub.got {
			if m.Topic() == topic {
				out = append(out, string(m.Payload()))
			}
		}
		sort.Strings(out)
		return out
	}
	connectortest.Eventually(t, "every message at the output", func() bool {
		return len(got(base+"/out/events")) >= len(events) && len(got(base+"/out/alerts")) >= len(alerts)
	})
	sort.Strings(events)
	sort.Strings(alerts)
	require.Equal(t, events, got(base+"/out/events"))
	require.Equal(t, alerts, got(base+"/out/alerts"))
}

// A message over max_message_size is dead-lettered with the reason, and
// its neighbours are published.
func TestSinkDeadLettersAnOversizedMessage(t *testing.T) {
	t.Parallel()
	url := mqtttest.URL(t)
	base := mqtttest.Name(t, "dlq")
	sub := subscribe(t, url, base+"/#")
	run := connectortest.Start(t, map[string]string{"out.toml": sinkTOML(url, base+"/{topic}",
		"on_error = \"dead_letter\"\ndead_letter_topic = \"dlq\"\nretry_backoff = \"5ms\"", `max_message_size = "1KiB"`)})
	logConnectors(t, run.Runtime)
	big := `{"big":"` + strings.Repeat("x", 2000) + `"}`
	sendJSON(t, run.Runtime, "bridge", "events", `{"n":0}`, big, `{"n":2}`)
	connectortest.Eventually(t, "both small messages", func() bool { return len(sub.payloads()) >= 2 })
	require.Equal(t, []string{`{"n":0}`, `{"n":2}`}, sub.settle(t, base+"/events"))
	var dead []iggy.Message
	connectortest.Eventually(t, "a dead letter", func() bool {
		dead = run.Messages(t, "bridge", "dlq")
		return len(dead) == 1
	})
	v, ok := header.Get(dead[0].Headers, runtime.HeaderDLQError)
	require.True(t, ok, "the dead letter carries its reason")
	require.Contains(t, v.String(), "above max_message_size")
}

// A broker that is down for a while: the sink restarts with backoff and
// nothing sent to Iggy meanwhile is lost (QoS 1; the subscriber's
// persistent session keeps them across the broker's restart).
func TestSinkSurvivesABrokerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a broker of its own")
	}
	t.Parallel()
	srv := mqtttest.Private(t)
	base := mqtttest.Name(t, "outage")
	sub := subscribe(t, srv.URL, base+"/#")
	run := connectortest.Start(t, map[string]string{"out.toml": sinkTOML(srv.URL, base+"/{topic}", `retry_backoff = "5ms"`, "")})
	logConnectors(t, run.Runtime)
	sendJSON(t, run.Runtime, "bridge", "events", `{"n":0}`, `{"n":1}`)
	connectortest.Eventually(t, "the first two", func() bool { return len(sub.payloads()) >= 2 })

	srv.Halt()
	var during []string
	for i := 2; i < 12; i++ {
		during = append(during, fmt.Sprintf(`{"n":%d}`, i))
	}
	sendJSON(t, run.Runtime, "bridge", "events", during...)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	sub.reconnect(t)
	// The runtime restarts a sink with backoff of up to a minute, so its
	// next try may come that long after the broker is back: wait longer
	// than that (a liveness bound).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		have := map[string]bool{}
		for _, p := range sub.payloads() {
			have[p] = true
		}
		missing := 0
		for _, w := range during {
			if !have[w] {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the outage %d of %d messages are missing: %q", missing, len(during), sub.payloads())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
