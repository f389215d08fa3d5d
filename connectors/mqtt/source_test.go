package mqtt

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mqtttest"
	"github.com/stretchr/testify/require"
)

func newSource(t testing.TB, values map[string]any) connector.Source {
	t.Helper()
	s, err := NewSource(cfg(values))
	require.NoError(t, err)
	return s
}

func openSource(t testing.TB, s connector.Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Open(ctx, nil))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
}

// The conformance suite at QoS 1 and 2, on a persistent session: what a
// source acknowledged is not sent again, what it did not is sent to the
// next source with the same client id.
func TestSourceConformance(t *testing.T) {
	t.Parallel()
	for _, qos := range []int64{1, 2} {
		t.Run(fmt.Sprintf("qos %d", qos), func(t *testing.T) {
			t.Parallel()
			url := mqtttest.URL(t)
			base := mqtttest.Name(t, "src")
			values := map[string]any{"urls": []any{url}, "topics": []any{base + "/+/data"}, "qos": qos,
				"client_id": mqtttest.Name(t, "cid"), "batch_size": int64(5), "batch_wait": "20ms"}
			// The session and its subscription exist before the first message.
			first := newSource(t, values)
			openSource(t, first)
			require.NoError(t, first.Close(context.Background()))
			var n atomic.Int64
			connectortest.Source(t, connectortest.SourceSuite{
				New: func(t *testing.T) connector.Source { return newSource(t, values) },
				Add: func(t *testing.T, k int) []string {
					var out []string
					for range k {
						out = append(out, fmt.Sprintf(`{"n":%d}`, n.Add(1)))
					}
					publish(t, url, base+"/dev1/data", byte(qos), false, out...)
					return out
				},
				AckedPosition: true,
			})
		})
	}
}

// Bad configurations fail with the key named.
func TestSourceConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	u := []any{"tcp://x:1883"}
	for _, c := range []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{"urls": u, "client_id": "c"}, "topics"},
		{map[string]any{"urls": u, "client_id": "c", "topics": []any{"a/#/b"}}, "topics"},
		{map[string]any{"urls": u, "client_id": "c", "topics": []any{"a/b+"}}, "topics"},
		{map[string]any{"urls": u, "client_id": "c", "topics": []any{"a\x00"}}, "topics"},
		{map[string]any{"urls": u, "topics": []any{"a/#"}}, "client_id"},
		{map[string]any{"urls": u, "client_id": "c", "topics": []any{"a/#"}, "topic_routes": map[string]any{"b/#": "b"}}, "topic_routes"},
		{map[string]any{"urls": u, "client_id": "c", "topics": []any{"a/#"}, "qos": int64(-1)}, "qos"},
	} {
		_, err := NewSource(cfg(c.values))
		require.Error(t, err, "%v", c.values)
		require.Contains(t, err.Error(), c.key, "%v", c.values)
	}
	_, err := NewSource(cfg(map[string]any{"urls": u, "topics": []any{"a/#"}, "clean_session": true}))
	require.NoError(t, err, "a clean session needs no client id")
}

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		filter, topic string
		want          bool
	}{
		{"a/#", "a", true}, {"a/#", "a/b/c", true}, {"a/+", "a/b", true}, {"a/+", "a/b/c", false},
		{"+/b", "a/b", true}, {"#", "$SYS/x", false}, {"a/b", "a/b", true}, {"a/b", "a/bc", false}, {"a/+/c", "a//c", true},
	} {
		require.Equal(t, c.want, match(c.filter, c.topic), "%s ~ %s", c.filter, c.topic)
	}
}

// Retained messages are skipped with skip_retained, and acknowledged:
// a source opened again gets neither them nor what it forwarded.
func TestSourceSkipsRetainedMessages(t *testing.T) {
	t.Parallel()
	url := mqtttest.URL(t)
	base := mqtttest.Name(t, "ret")
	for i := range 3 {
		publish(t, url, fmt.Sprintf("%s/r%d", base, i), 1, true, fmt.Sprintf(`{"retained":%d}`, i))
	}
	t.Cleanup(func() {
		for i := range 3 {
			publish(t, url, fmt.Sprintf("%s/r%d", base, i), 1, true, "")
		}
	})
	values := map[string]any{"urls": []any{url}, "topics": []any{base + "/#"}, "client_id": mqtttest.Name(t, "cid"),
		"skip_retained": true, "batch_wait": "10ms"}
	s := newSource(t, values)
	openSource(t, s)
	publish(t, url, base+"/live", 1, false, `{"live":1}`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := s.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b.Messages, 1)
	require.Equal(t, `{"live":1}`, string(b.Messages[0].Payload))
	v, ok := b.Messages[0].Header("mqtt_topic")
	require.True(t, ok)
	require.Equal(t, base+"/live", v.String())
	require.NoError(t, s.(connector.Acker).Ack(ctx, b))
	require.NoError(t, s.Close(ctx))

	again := newSource(t, values)
	openSource(t, again)
	publish(t, url, base+"/live", 1, false, `{"live":2}`)
	b, err = again.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b.Messages, 1, "nothing acknowledged came again")
	require.Equal(t, `{"live":2}`, string(b.Messages[0].Payload))
}
