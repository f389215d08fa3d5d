package mqtt

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/mqtttest"
	"github.com/stretchr/testify/require"
)

// pollAll polls (and acknowledges) until n messages came, or fails.
func pollAll(t *testing.T, s connector.Source, n int) []connector.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []connector.Message
	for len(out) < n {
		b, err := s.Poll(ctx)
		require.NoError(t, err, "after %d of %d messages", len(out), n)
		out = append(out, b.Messages...)
		require.NoError(t, s.(connector.Acker).Ack(ctx, b))
	}
	return out
}

// What QoS 0 promises: while the source is connected, every message
// arrives, in the order it was published (one publisher, one topic),
// marked mqtt_qos 0; what is published while it is away is not kept
// for it, even in a persistent session (the package doc: QoS 0 loses
// what arrives while Ferry is away).
func TestSourceQoS0(t *testing.T) {
	t.Parallel()
	url := mqtttest.URL(t)
	base := mqtttest.Name(t, "qos0")
	values := map[string]any{"urls": []any{url}, "topics": []any{base + "/#"}, "qos": int64(0),
		"client_id": mqtttest.Name(t, "cid"), "batch_size": int64(7), "batch_wait": "5ms"}
	s := newSource(t, values)
	openSource(t, s)
	var want []string
	for i := range 300 {
		want = append(want, fmt.Sprintf(`{"n":%d}`, i))
	}
	publish(t, url, base+"/dev", 0, false, want...)
	got := pollAll(t, s, len(want))
	var payloads []string
	for _, m := range got {
		payloads = append(payloads, string(m.Payload))
		v, ok := m.Header("mqtt_qos")
		require.True(t, ok)
		require.Equal(t, "0", v.String())
	}
	require.Equal(t, want, payloads, "every message, in order")
	require.NoError(t, s.Close(context.Background()))

	// Away: not kept. Back: what is published now arrives.
	publish(t, url, base+"/dev", 0, false, `{"away":1}`, `{"away":2}`)
	again := newSource(t, values)
	openSource(t, again)
	publish(t, url, base+"/dev", 0, false, `{"back":1}`)
	got = pollAll(t, again, 1)
	require.Len(t, got, 1)
	require.Equal(t, `{"back":1}`, string(got[0].Payload), "nothing published while the source was away")
}

// retained = true: the broker keeps the last message the sink published
// to a topic, and a subscriber that comes later gets it (and only it),
// flagged retained; retained = false (the default) leaves nothing for a
// later subscriber.
func TestSinkRetained(t *testing.T) {
	t.Parallel()
	url := mqtttest.URL(t)
	base := mqtttest.Name(t, "retained")
	ctx := context.Background()
	batch := func(payloads ...string) *connector.SinkBatch {
		b := &connector.SinkBatch{Stream: "s", Topic: "t"}
		for _, p := range payloads {
			b.Messages = append(b.Messages, connector.Message{Payload: []byte(p)})
		}
		return b
	}
	kept := newSink(t, map[string]any{"urls": []any{url}, "topic": base + "/kept/{stream}/{topic}", "retained": true})
	open(t, kept)
	t.Cleanup(func() { publish(t, url, base+"/kept/s/t", 1, true, "") }) // clears it
	require.NoError(t, kept.Consume(ctx, batch(`{"n":1}`, `{"n":2}`, `{"n":3}`)))
	plain := newSink(t, map[string]any{"urls": []any{url}, "topic": base + "/plain/{stream}/{topic}"})
	open(t, plain)
	require.NoError(t, plain.Consume(ctx, batch(`{"n":1}`)))

	late := subscribe(t, url, base+"/kept/s/t")
	require.Equal(t, []string{`{"n":3}`}, late.settle(t, base+"/kept/s/t"), "the last retained message")
	late.mu.Lock()
	require.True(t, late.got[0].Retained(), "flagged retained")
	late.mu.Unlock()
	require.Empty(t, subscribe(t, url, base+"/plain/s/t").settle(t, base+"/plain/s/t"), "nothing kept without retained")

	// A later batch replaces it.
	require.NoError(t, kept.Consume(ctx, batch(`{"n":4}`)))
	later := subscribe(t, url, base+"/kept/s/t")
	require.Equal(t, []string{`{"n":4}`}, later.settle(t, base+"/kept/s/t"))
}
