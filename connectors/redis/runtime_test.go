package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/redistest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

func sinkTOML(url, stream, extra string) string {
	return fmt.Sprintf(`type = "sink"
key = "to_redis"
enabled = true
name = "Redis sink"
path = "redis"

[[streams]]
stream = "test_stream"
topics = ["test_topic"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "redis_sink"
%s
[plugin_config]
url = %q
mode = "streams"
stream = %q
`, extra, url, stream)
}

func sendJSON(t *testing.T, addr, stream, topic string, payloads ...string) {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), addr, iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var msgs []iggy.Message
	for _, p := range payloads {
		msgs = append(msgs, iggy.Message{Payload: []byte(p)})
	}
	_, err = admin.SendMessages(context.Background(), iggy.NamedID(stream), iggy.NamedID(topic), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
}

// Iggy → Redis stream through the runtime and the embedded broker: every
// message arrives once, as entry <offset+1>-0 with its metadata.
func TestRuntimeSinkToStream(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	run := connectortest.Start(t, map[string]string{"redis.toml": sinkTOML(url, p+"{stream}:{topic}:{partition}", "")})
	var want []string
	for i := range 250 {
		want = append(want, fmt.Sprintf(`{"n":%d}`, i))
	}
	sendJSON(t, run.Runtime.IggyAddress(), "test_stream", "test_topic", want...)
	stream := p + "test_stream:test_topic:0"
	connectortest.Eventually(t, "250 entries", func() bool { return c.XLen(context.Background(), stream).Val() >= 250 })
	require.Equal(t, want, streamBodies(t, c, stream))
	es, err := c.XRangeN(context.Background(), stream, "-", "+", 1).Result()
	require.NoError(t, err)
	require.Equal(t, "1-0", es[0].ID)
	require.Equal(t, "0", es[0].Values["iggy_offset"])
	require.Equal(t, "test_topic", es[0].Values["iggy_topic"])
}

// Keys mode through the runtime: a message without a key is
// dead-lettered with the reason, the others set and delete their keys.
func TestRuntimeKeysDeadLettersAMessageWithoutKey(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	run := connectortest.Start(t, map[string]string{"redis.toml": fmt.Sprintf(`type = "sink"
key = "to_redis"
path = "redis"
[[streams]]
stream = "test_stream"
topics = ["test_topic"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "redis_sink"
on_error = "dead_letter"
dead_letter_topic = "dlq"
retry_backoff = "5ms"
[plugin_config]
url = %q
mode = "keys"
key = %q
`, url, p+"{key}")})
	admin, err := iggy.Dial(context.Background(), run.Runtime.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	key := func(k string) []header.Header { return []header.Header{header.New("key", header.StringValue(k))} }
	msgs := []iggy.Message{
		{Payload: []byte(`{"v":1}`), Headers: key("a")},
		{Payload: []byte(`{"v":2}`), Headers: key("b")},
		{Payload: []byte(`{"nokey":true}`)},
		{Payload: []byte(`{}`), Headers: append(key("a"), header.New("deleted", header.BoolValue(true)))},
		{Payload: []byte(`{"v":3}`), Headers: key("c")},
	}
	_, err = admin.SendMessages(context.Background(), iggy.NamedID("test_stream"), iggy.NamedID("test_topic"), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
	var dead []iggy.Message
	connectortest.Eventually(t, "a dead letter", func() bool {
		dead = run.Messages(t, "test_stream", "dlq")
		return len(dead) == 1
	})
	require.Equal(t, `{"nokey":true}`, string(dead[0].Payload))
	v, ok := header.Get(dead[0].Headers, runtime.HeaderDLQError)
	require.True(t, ok, "the dead letter carries its reason")
	require.Contains(t, v.String(), `no "key" header`)
	ctx := context.Background()
	connectortest.Eventually(t, "key c", func() bool { return c.Get(ctx, p+"c").Val() == `{"v":3}` })
	require.Equal(t, `{"v":2}`, c.Get(ctx, p+"b").Val())
	require.Zero(t, c.Exists(ctx, p+"a").Val(), "the deletion marker deleted a")
}

// A Redis that is down for a while: the sink restarts with backoff and
// every message sent to Iggy meanwhile arrives, once (offset entry ids).
func TestSinkSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a Redis of its own")
	}
	t.Parallel()
	srv := redistest.Private(t)
	c := redistest.Client(t, srv.URL)
	run := connectortest.Start(t, map[string]string{"redis.toml": sinkTOML(srv.URL, "{stream}:{topic}:{partition}", `retry_backoff = "5ms"`)})
	stream := "test_stream:test_topic:0"
	sendJSON(t, run.Runtime.IggyAddress(), "test_stream", "test_topic", `{"n":0}`, `{"n":1}`)
	ctx := context.Background()
	connectortest.Eventually(t, "2 entries", func() bool { return c.XLen(ctx, stream).Val() == 2 })

	srv.Halt()
	var want = []string{`{"n":0}`, `{"n":1}`}
	var during []string
	for i := 2; i < 12; i++ {
		during = append(during, fmt.Sprintf(`{"n":%d}`, i))
	}
	want = append(want, during...)
	sendJSON(t, run.Runtime.IggyAddress(), "test_stream", "test_topic", during...)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	// The runtime restarts a sink with backoff of up to a minute: wait
	// longer than that (a liveness bound).
	deadline := time.Now().Add(3 * time.Minute)
	for c.XLen(ctx, stream).Val() < int64(len(want)) {
		if time.Now().After(deadline) {
			for _, info := range run.Runtime.Connectors(connector.KindSink) {
				t.Logf("sink %s: %s, %d restarts, last error %q", info.Key, info.Status, info.Restarts, info.LastError)
			}
			t.Fatalf("after the outage %d of %d entries", c.XLen(ctx, stream).Val(), len(want))
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, want, streamBodies(t, c, stream), "every message once, in order")
}
