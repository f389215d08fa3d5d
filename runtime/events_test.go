package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/exec"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/sysevents"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// failingSink cannot open: its connector goes into Error.
type failingSink struct{}

func (failingSink) Open(context.Context) error {
	return errors.New("the warehouse is unreachable")
}
func (failingSink) Consume(context.Context, *connector.SinkBatch) error { return nil }
func (failingSink) Close(context.Context) error                         { return nil }

// cloudEvent checks a payload against the CloudEvents 1.0 JSON format on
// its own (not with package sysevents) and returns its data.
func cloudEvent(t *testing.T, payload []byte, wantType sysevents.Type) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(payload, &m), "%s", payload)
	for _, attr := range []string{"specversion", "id", "source", "type", "time", "datacontenttype"} {
		v, ok := m[attr].(string)
		require.True(t, ok && v != "", "attribute %q in %s", attr, payload)
	}
	require.Equal(t, "1.0", m["specversion"])
	require.Equal(t, string(wantType), m["type"])
	require.Equal(t, "application/json", m["datacontenttype"])
	_, err := time.Parse(time.RFC3339Nano, m["time"].(string))
	require.NoError(t, err)
	data, ok := m["data"].(map[string]any)
	require.True(t, ok, "data is an object in %s", payload)
	return data
}

const statusTriggerTOML = `
type = "sink"
key = "watch"
path = "collect"
[[streams]]
stream = "ferry.events"
topics = ["connector.status_changed"]
`

// A trigger on connector status runs when a sink goes into Error: a
// sink (any sink; here the test's collecting one) on the system stream's
// connector.status_changed topic receives the event.
func TestEventsTriggerOnConnectorError(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "failing",
		NewSink: func(connector.Config) (connector.Sink, error) { return failingSink{}, nil }}))
	watch := &collectSink{}
	e.sinks["watch"] = watch
	e.connector("watch", statusTriggerTOML)
	e.connector("bad", `
type = "sink"
key = "bad"
path = "failing"
[[streams]]
stream = "s"
topics = ["t"]
`)
	e.start()
	var got map[string]any
	eventually(t, "the trigger sees the sink go into Error", func() bool {
		for _, m := range watch.messages() {
			d := cloudEvent(t, m.Payload, sysevents.ConnectorStatusChanged)
			if d["key"] == "bad" && d["to"] == string(StatusError) {
				got = d
				return true
			}
		}
		return false
	})
	require.Equal(t, "sink", got["kind"])
	require.Contains(t, got["error"], "the warehouse is unreachable")
	require.Equal(t, "ferry.events", watch.messages()[0].Stream)
	ev, err := sysevents.Decode(watch.messages()[0].Payload)
	require.NoError(t, err)
	require.Equal(t, sysevents.SourceRuntime, ev.Source)
}

// A trigger on segment.deleted runs when retention deletes a segment: an
// exec sink (what `ferry hook create NAME --on segment.deleted CMD`
// makes) on the system topic runs its command with the event.
func TestEventsTriggerOnSegmentDeleted(t *testing.T) {
	b := brokertest.Start(t, brokertest.Config(func(c *broker.Config) {
		c.Events = broker.Events{Enabled: true}
		c.RetentionInterval = 50 * time.Millisecond
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, err := iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer root.Close()
	_, err = root.CreateStream(ctx, "app")
	require.NoError(t, err)
	sid, tid := iggy.NamedID("app"), iggy.NamedID("logs")
	_, err = root.CreateTopic(ctx, sid, "logs", 1, iggy.TopicSegmentSize(1<<20), iggy.TopicMessageExpiry(time.Second))
	require.NoError(t, err)

	e := newEnv(t)
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "exec", NewSink: exec.New}))
	e.write("config.toml", fmt.Sprintf(`
[iggy]
address = %q
[state]
path = "state"
[connectors]
config_type = "local"
config_dir = "connectors"
[http]
enabled = false
`, b.Addr()))
	out := filepath.Join(t.TempDir(), "deleted.jsonl")
	trig, err := sysevents.TriggerFor("segment.deleted")
	require.NoError(t, err)
	e.connector("on-deleted", fmt.Sprintf(`
type = "sink"
key = "on-deleted"
path = "exec"
[[streams]]
stream = %q
topics = [%q]
schema = "raw"
batch_length = 1
[plugin_config]
command = "printf '%%s\n' {payload} >> '%s'"
`, trig.Stream, trig.Topic, out))
	e.start()

	payload := []byte(strings.Repeat("x", 64<<10))
	for i := 0; i < 24; i++ { // 1.5 MiB: the first 1 MiB segment is sealed, then expires
		_, err := root.SendMessages(ctx, sid, tid, iggy.ToPartition(0), []iggy.Message{{Payload: payload}})
		require.NoError(t, err)
	}
	var d map[string]any
	eventually(t, "the hook ran for the deleted segment", func() bool {
		b, err := os.ReadFile(out)
		if err != nil {
			return false
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			if data := cloudEvent(t, []byte(line), sysevents.SegmentDeleted); data["topic"] == "logs" {
				d = data
				return true
			}
		}
		return false
	})
	require.Equal(t, "app", d["stream"])
	require.Equal(t, float64(0), d["first_offset"])
	require.Equal(t, sysevents.ReasonExpiry, d["reason"])

	// On a broker that is not its own, the runtime sends its events
	// through an Iggy client.
	eventually(t, "the runtime's status event on the external broker", func() bool {
		r, err := root.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID(sysevents.Stream), Topic: iggy.NamedID(sysevents.ConnectorStatusChanged.Topic()),
			Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100})
		if err != nil {
			return false
		}
		for _, m := range r.Messages {
			if d := cloudEvent(t, m.Payload, sysevents.ConnectorStatusChanged); d["key"] == "on-deleted" && d["to"] == string(StatusRunning) {
				return true
			}
		}
		return false
	})
}

// A dead-lettered message makes a message.dead_lettered event naming
// where it came from and where it went.
func TestEventsDeadLettered(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 10, batch: 5}
	e.sinks["picky"] = &collectSink{poison: `"n":3}`}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("picky", `
type = "sink"
key = "picky"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
max_retries = 1
retry_backoff = "5ms"
on_error = "dead_letter"
dead_letter_topic = "dlq"
`)
	rt := e.start()
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var d map[string]any
	eventually(t, "a message.dead_lettered event", func() bool {
		r, err := admin.PollMessages(context.Background(), iggy.PollRequest{
			Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID(sysevents.Stream),
			Topic: iggy.NamedID(sysevents.MessageDeadLettered.Topic()), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
		if err != nil || len(r.Messages) == 0 {
			return false
		}
		d = cloudEvent(t, r.Messages[0].Payload, sysevents.MessageDeadLettered)
		return true
	})
	require.Equal(t, map[string]any{"connector": "picky", "kind": "sink", "stream": "s", "topic": "t",
		"partition": float64(0), "offset": float64(3), "message_id": d["message_id"],
		"dead_letter_stream": "s", "dead_letter_topic": "dlq", "error": d["error"]}, d)
	require.Contains(t, d["error"], "rejected poison record")
}

// A full queue drops (and counts) instead of blocking a connector.
func TestEventsQueueFullDrops(t *testing.T) {
	rt := &Runtime{log: slog.New(slog.DiscardHandler), metrics: newMetrics(), started: time.Now()}
	rt.startEvents()
	e := rt.events
	e.cancel() // the sender stops: nothing drains the queue
	<-e.done
	for i := 0; i < eventQueue+10; i++ {
		e.statusChanged(connector.KindSink, "k", StatusRunning, StatusStopped, "")
	}
	require.Len(t, e.q, eventQueue)
	require.Equal(t, 10.0, counter(t, e.dropped.WithLabelValues(dropQueueFull)))
	e.close()
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}
