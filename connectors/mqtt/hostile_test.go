package mqtt

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/mqtttest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

// publishBytes publishes raw payloads to topic at QoS 1 and waits for each.
func publishBytes(t testing.TB, url, topic string, payloads ...[]byte) {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(mqtttest.Name(t, "pub")))
	tok := c.Connect()
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("publisher connect to %s: %v", url, tok.Error())
	}
	defer c.Disconnect(100)
	for _, p := range payloads {
		tok := c.Publish(topic, 1, false, p)
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish to %.80q: %v", topic, tok.Error())
		}
	}
}

// Topic names MQTT allows but few expect (unicode, spaces, empty levels,
// a $ prefix of the application's own, 60,000 bytes), matched by filters
// with wildcards, and payloads of any bytes (NUL, every byte value,
// invalid UTF-8, 1 MiB of random bytes): every payload is in Iggy byte
// for byte under schema = "raw", routed by its filter, with its MQTT
// topic in mqtt_topic when that fits a header (1..255 bytes), and the
// source keeps running. An empty payload, which Iggy cannot hold, goes
// nowhere and harms nothing: its neighbours arrive and the source runs.
func TestSourceHostileTopicsAndPayloads(t *testing.T) {
	t.Parallel()
	url := mqtttest.URL(t)
	base := mqtttest.Name(t, "src-hostile")
	dollar := "$" + base
	long := base + "/long/" + strings.Repeat("ł", 30000) // 60,000 bytes
	clientID := mqtttest.Name(t, "cid")
	filters := []string{base + "/+/wild/#", dollar + "/#", base + "/long/#", base + "/exact topic/ünï"}
	values := map[string]any{"urls": []any{url}, "topics": []any{filters[0], filters[1], filters[2], filters[3]},
		"client_id": clientID}
	// The persistent session exists before the first message.
	s := newSource(t, values)
	openSource(t, s)
	require.NoError(t, s.Close(t.Context()))

	quoted := make([]string, len(filters))
	for i, f := range filters {
		quoted[i] = fmt.Sprintf("%q", f)
	}
	run := connectortest.Start(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_mqtt"
path = "mqtt"
[[streams]]
stream = "bridge"
topic = "events"
schema = "raw"
linger_time = "0ms"
[plugin_config]
urls = [%q]
topics = [%s]
client_id = %q
qos = 1
batch_size = 10
batch_wait = "5ms"
schema = "raw"
[plugin_config.topic_routes]
%q = "dollar"
%q = "long"
`, url, strings.Join(quoted, ", "), clientID, filters[1], filters[2])})
	logConnectors(t, run.Runtime)
	source := func() runtime.Info { return run.Runtime.Connectors(connector.KindSource)[0] }
	connectortest.Eventually(t, "the source running", func() bool { return source().Status == runtime.StatusRunning })

	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	random := make([]byte, 1<<20)
	_, _ = rand.Read(random)
	payloads := [][]byte{
		[]byte("\x00"), []byte("\x00\x00\x00"), every, []byte("\xff\xfe\xc3\x28 not UTF-8"), random,
		[]byte(`{"topic":"#/+","$SYS":"\u0000"}`), []byte("\r\n\t\x1b[31m"), []byte(strings.Repeat("é", 1000)),
	}
	type sent struct {
		topic, iggyTopic string
		payload          []byte
	}
	var want []sent
	send := func(topic, iggyTopic string, ps ...[]byte) {
		publishBytes(t, url, topic, ps...)
		for _, p := range ps {
			want = append(want, sent{topic, iggyTopic, p})
		}
	}
	send(base+"/ünïcødé 日本語 😀/wild/with spaces/ and  more ", "events", payloads...)
	send(base+"//wild//", "events", []byte("empty levels"))
	send(base+"/exact topic/ünï", "events", payloads[0], []byte{}, payloads[2]) // an empty payload between two
	send(dollar+"/its own", "dollar", payloads...)
	send(long, "long", payloads[2], payloads[4])

	byTopic := map[string][]sent{}
	for _, w := range want {
		byTopic[w.iggyTopic] = append(byTopic[w.iggyTopic], w)
	}
	for topic, ws := range byTopic {
		nonEmpty := 0
		for _, w := range ws {
			if len(w.payload) > 0 {
				nonEmpty++
			}
		}
		var got []iggy.Message
		connectortest.Eventually(t, "every message in "+topic, func() bool {
			got = run.Messages(t, "bridge", topic)
			return len(got) >= nonEmpty
		})
		i := 0
		for _, w := range ws {
			if len(w.payload) == 0 {
				continue
			}
			m := got[i]
			i++
			require.True(t, bytes.Equal(w.payload, m.Payload), "%s message %d: %d bytes came as %d bytes", topic, i, len(w.payload), len(m.Payload))
			h, ok := header.Get(m.Headers, "mqtt_topic")
			if len(w.topic) <= 255 {
				require.True(t, ok, "mqtt_topic of %q", w.topic)
				require.Equal(t, w.topic, h.String())
			} else {
				require.False(t, ok, "a %d-byte topic does not fit a header", len(w.topic))
			}
		}
		require.Len(t, got, nonEmpty, "nothing more in %s", topic)
	}
	info := source()
	require.Equal(t, runtime.StatusRunning, info.Status)
	require.Zero(t, info.Restarts, "no message made the source fail: %s", info.LastError)
}

// Hostile configurations fail at load, with the key named.
func TestSourceHostileConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	u := []any{"tcp://x:1883"}
	with := func(kv ...any) map[string]any {
		v := map[string]any{"urls": u, "client_id": "c", "topics": []any{"a/#"}}
		for i := 0; i < len(kv); i += 2 {
			v[kv[i].(string)] = kv[i+1]
		}
		return v
	}
	for _, c := range []struct {
		values map[string]any
		key    string
	}{
		{with("topics", []any{"a/\xff"}), "topics"},
		{with("topics", []any{"a/\x01"}), "topics"},
		{with("topics", []any{"a/\u0085"}), "topics"},
		{with("topics", []any{"a/\uffff"}), "topics"},
		{with("topics", []any{strings.Repeat("x", 65536)}), "topics"},
		{with("topics", []any{"#/a"}), "topics"},
		{with("topics", []any{""}), "topics"},
		{with("topics", []any{}), "topics"},
		{with("urls", []any{"tcp://"}), "urls"},
		{with("urls", []any{"ws://x:1883"}), "urls"},
		{with("topic_routes", map[string]any{"a/#": ""}), "topic_routes"},
		{with("topic_routes", map[string]any{"a/#": strings.Repeat("t", 256)}), "topic_routes"},
		{with("batch_size", int64(0)), "batch_size"},
		{with("schema", "xml"), "schema"},
		{with("keepalive", int64(0)), "keepalive"},
		{with("qos", int64(3)), "qos"},
	} {
		_, err := NewSource(cfg(c.values))
		require.Error(t, err, "%.200v", c.values)
		require.Contains(t, err.Error(), c.key, "%.200v", c.values)
	}
}
