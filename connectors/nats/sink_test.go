package nats

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/natstest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { natstest.Main(m) }

func cfg(values map[string]any) connector.Config {
	return connector.Config{Key: "nats", Plugin: connector.PluginConfig{Source: "nats.toml", Values: values}}
}

// stored returns every message of a JetStream stream, in order.
func stored(t testing.TB, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		out = append(out, m)
	}
	return out
}

func storedPayloads(t testing.TB, js jetstream.JetStream, stream string) []string {
	var out []string
	for _, m := range stored(t, js, stream) {
		out = append(out, string(m.Data))
	}
	return out
}

func openSink(t *testing.T, values map[string]any) connector.Sink {
	t.Helper()
	s, err := NewSink(cfg(values))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Open(ctx))
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n, jetstream.StreamConfig{MaxMsgSize: 4096})
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink {
			s, err := NewSink(cfg(map[string]any{"url": url, "subject": n.Subject + ".{stream}.{topic}", "stream": n.Stream}))
			require.NoError(t, err)
			return s
		},
		Read:       func(t *testing.T) []string { return storedPayloads(t, js, n.Stream) },
		Idempotent: true,                                                  // Nats-Msg-Id within the stream's duplicate window
		Poison:     []byte(`{"big":"` + strings.Repeat("x", 5000) + `"}`), // above the stream's max_msg_size
	})
}

// A batch is stored with the Iggy id as Nats-Msg-Id, the Iggy headers
// and the metadata headers, on the templated subject.
func TestSinkPublishesHeadersAndMetadata(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	s := openSink(t, map[string]any{"url": url, "subject": n.Subject + ".{stream}.{topic}.p{partition}"})
	id := uuid.New()
	m := connector.Message{ID: id, Payload: []byte(`{"n":1}`), Offset: 42, OriginTimestamp: time.UnixMilli(1_700_000_000_000)}
	m.SetHeader("tenant", header.StringValue("acme"))
	m.SetHeader("count", header.Uint64Value(7))
	require.NoError(t, s.Consume(context.Background(), &connector.SinkBatch{Stream: "shop", Topic: "orders", Partition: 3,
		Messages: []connector.Message{m}}))
	got := stored(t, js, n.Stream)
	require.Len(t, got, 1)
	g := got[0]
	require.Equal(t, n.Subject+".shop.orders.p3", g.Subject)
	require.Equal(t, `{"n":1}`, string(g.Data))
	require.Equal(t, id.String(), g.Header.Get(jetstream.MsgIDHeader))
	require.Equal(t, "acme", g.Header.Get("tenant"))
	require.Equal(t, "7", g.Header.Get("count"))
	require.Equal(t, "shop", g.Header.Get("Iggy-Stream"))
	require.Equal(t, "orders", g.Header.Get("Iggy-Topic"))
	require.Equal(t, "3", g.Header.Get("Iggy-Partition"))
	require.Equal(t, "42", g.Header.Get("Iggy-Offset"))
	require.Equal(t, "2023-11-14T22:13:20Z", g.Header.Get("Iggy-Origin-Timestamp"))
}

// Core mode publishes to plain subjects: a subscriber that is there
// gets the messages.
func TestSinkCoreMode(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	nc := natstest.Connect(t, url)
	sub, err := nc.SubscribeSync(n.Subject + ".>")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	s := openSink(t, map[string]any{"url": url, "mode": "core", "subject": n.Subject + ".out", "include_metadata": false})
	m := connector.Message{ID: uuid.New(), Payload: []byte(`{"n":1}`)}
	m.SetHeader("tenant", header.StringValue("acme"))
	require.NoError(t, s.Consume(context.Background(), &connector.SinkBatch{Stream: "s", Topic: "t", Messages: []connector.Message{m}}))
	got, err := sub.NextMsg(30 * time.Second)
	require.NoError(t, err)
	require.Equal(t, n.Subject+".out", got.Subject)
	require.Equal(t, `{"n":1}`, string(got.Data))
	require.Equal(t, "acme", got.Header.Get("tenant"))
	require.Empty(t, got.Header.Get(jetstream.MsgIDHeader), "no JetStream header on core NATS")
}

// Bad configurations are refused naming the key.
func TestSinkRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{"subject": "iggy.*"}, "subject"},
		{map[string]any{"subject": "iggy.>"}, "subject"},
		{map[string]any{"subject": "iggy orders"}, "subject"},
		{map[string]any{"subject": "iggy..orders"}, "subject"},
		{map[string]any{"subject": "iggy.{tenant}"}, "subject"},
		{map[string]any{"url": "http://localhost:4222"}, "url"},
		{map[string]any{"mode": "push"}, "mode"},
		{map[string]any{"mode": "core", "stream": "S"}, "stream"},
		{map[string]any{"max_in_flight": int64(0)}, "max_in_flight"},
	} {
		_, err := NewSink(cfg(c.values))
		require.Error(t, err, "%v", c.values)
		require.ErrorContains(t, err, c.key, "%v", c.values)
	}
}

// A stream the sink is told to expect must exist.
func TestSinkOpenChecksTheStream(t *testing.T) {
	t.Parallel()
	url := natstest.URL(t)
	s, err := NewSink(cfg(map[string]any{"url": url, "stream": "NO_SUCH_STREAM"}))
	require.NoError(t, err)
	err = s.Open(context.Background())
	require.ErrorContains(t, err, "NO_SUCH_STREAM")
	require.False(t, connector.IsUnavailable(err), "a missing stream is a configuration error")
}

// Nothing is published to a subject no stream takes without an error;
// the sink calls the server away (no responders), not the messages bad.
func TestSinkSubjectWithoutStreamIsUnavailable(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	s := openSink(t, map[string]any{"url": url, "subject": n.Subject + ".nowhere", "timeout": "2s"})
	err := s.Consume(context.Background(), &connector.SinkBatch{Stream: "s", Topic: "t",
		Messages: []connector.Message{{ID: uuid.New(), Payload: []byte(`{}`)}}})
	require.Error(t, err)
	require.True(t, connector.IsUnavailable(err), "%v", err)
}
