package redis

import (
	"context"
	"fmt"
	"testing"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/redistest"
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
