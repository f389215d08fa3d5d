package nats

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/natstest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// publishJS stores n JSON messages {"n":from..} on subject and returns
// their payloads.
func publishJS(t testing.TB, js jetstream.JetStream, subject string, from, n int, opts ...func(*nats.Msg)) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for i := from; i < from+n; i++ {
		body := `{"n":` + strconv.Itoa(i) + `}`
		m := &nats.Msg{Subject: subject, Data: []byte(body), Header: nats.Header{}}
		m.Header.Set("tenant", "acme")
		for _, o := range opts {
			o(m)
		}
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err)
		out = append(out, body)
	}
	return out
}

func openSource(t *testing.T, values map[string]any) connector.Source {
	t.Helper()
	s, err := NewSource(cfg(values))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Open(ctx, nil))
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func TestSourceConformance(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	added := 0
	connectortest.Source(t, connectortest.SourceSuite{
		New: func(t *testing.T) connector.Source {
			s, err := NewSource(cfg(map[string]any{"url": url, "stream": n.Stream, "durable": "conformance",
				"batch_size": int64(5), "batch_wait": "20ms", "include_metadata": false}))
			require.NoError(t, err)
			return s
		},
		Add: func(t *testing.T, k int) []string {
			out := publishJS(t, js, n.Subject+".in", added, k)
			added += k
			return out
		},
		StableIDs:     true, // the stream sequence, kept across redeliveries
		AckedPosition: true, // the durable consumer keeps the position
	})
}

// Ids come from the stream sequence, or from Nats-Msg-Id when the
// publisher set one; headers and metadata come along; the filter
// subject selects.
func TestSourceIDsHeadersAndFilter(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	publishJS(t, js, n.Subject+".other", 0, 1)
	publishJS(t, js, n.Subject+".in", 1, 1)
	fixed := uuid.New()
	publishJS(t, js, n.Subject+".in", 2, 1, func(m *nats.Msg) { m.Header.Set(jetstream.MsgIDHeader, fixed.String()) })
	publishJS(t, js, n.Subject+".in", 3, 1, func(m *nats.Msg) { m.Header.Set(jetstream.MsgIDHeader, "order-3") })
	src := openSource(t, map[string]any{"url": url, "stream": n.Stream, "subject": n.Subject + ".in", "batch_size": int64(10)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []connector.Message
	for len(got) < 3 {
		b, err := src.Poll(ctx)
		require.NoError(t, err)
		got = append(got, b.Messages...)
		require.NoError(t, src.(connector.Acker).Ack(ctx, b))
	}
	require.Len(t, got, 3, "only the filter subject")
	require.Equal(t, `{"n":1}`, string(got[0].Payload))
	require.Equal(t, uint64(2), uint64FromID(got[0].ID), "stream sequence 2 in the id's last 8 bytes")
	require.Equal(t, [16]byte(fixed), got[1].ID, "a UUID Nats-Msg-Id is the id")
	want, _ := msgIDFromHeader(nats.Header{jetstream.MsgIDHeader: {"order-3"}})
	require.Equal(t, want, got[2].ID, "another Nats-Msg-Id is hashed")
	for k, v := range map[string]string{"tenant": "acme", "nats_subject": n.Subject + ".in", "nats_stream": n.Stream, "nats_sequence": "2"} {
		h, ok := got[0].Header(k)
		require.True(t, ok, k)
		require.Equal(t, v, h.String(), k)
	}
	require.False(t, got[0].OriginTimestamp.IsZero(), "the stream's timestamp")
}

func uint64FromID(id [16]byte) uint64 {
	var v uint64
	for _, b := range id[8:] {
		v = v<<8 | uint64(b)
	}
	return v
}

// A batch never acknowledged (a crash: the connection gone without a
// Nak) comes back after ack_wait with the same ids.
func TestSourceRedeliversWhatWasNotAcked(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	values := map[string]any{"url": url, "stream": n.Stream, "ack_wait": "1s", "batch_size": int64(10)}
	want := publishJS(t, js, n.Subject+".in", 0, 10)
	first := openSource(t, values).(*Source)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := first.Poll(ctx)
	require.NoError(t, err)
	first.Nack(ctx, b, context.Canceled)
	close(first.stopKeepAlive) // the process dies: no keep-alive, no Nak
	<-first.alive
	first.stopKeepAlive = nil
	first.pending = map[*connector.Batch][]jetstream.Msg{}
	first.nc.Close()

	second := openSource(t, values)
	var got []connector.Message
	for len(got) < len(b.Messages) {
		b2, err := second.Poll(ctx)
		require.NoError(t, err)
		got = append(got, b2.Messages...)
		require.NoError(t, second.(connector.Acker).Ack(ctx, b2))
	}
	require.Equal(t, want[:len(b.Messages)], payloads(got))
	for i := range got {
		require.Equal(t, b.Messages[i].ID, got[i].ID, "message %d keeps its id", i)
	}
}

// A batch the runtime holds longer than ack_wait (Iggy away, retries)
// is kept alive with in-progress acks: the server redelivers nothing.
func TestSourceKeepsAWaitingBatchAlive(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	publishJS(t, js, n.Subject+".in", 0, 5)
	src := openSource(t, map[string]any{"url": url, "stream": n.Stream, "durable": "alive", "ack_wait": "1s", "batch_size": int64(5)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := src.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b.Messages, 5)
	// Another client of the same durable consumer polls for three and a
	// half ack_waits: a redelivery would come to it.
	other := openSource(t, map[string]any{"url": url, "stream": n.Stream, "durable": "alive", "ack_wait": "1s", "batch_size": int64(5)})
	octx, ocancel := context.WithTimeout(ctx, 3500*time.Millisecond)
	defer ocancel()
	ob, err := other.Poll(octx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the other client got %v", ob)
	cons, err := js.Consumer(ctx, n.Stream, "alive")
	require.NoError(t, err)
	info, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.NumRedelivered, "a message redelivered while its batch waited")
	require.Equal(t, 5, info.NumAckPending)
	require.NoError(t, src.(connector.Acker).Ack(ctx, b))
	connectortest.Eventually(t, "no message pending after the Ack", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.AckFloor.Stream == 5
	})
}

// Core mode: messages published while subscribed arrive; nothing is
// kept for a source that was not there.
func TestSourceCoreMode(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	src := openSource(t, map[string]any{"url": url, "mode": "core", "subject": n.Subject + ".>", "batch_size": int64(3)})
	nc := natstest.Connect(t, url)
	for i := range 3 {
		m := &nats.Msg{Subject: n.Subject + ".x", Data: []byte(`{"n":` + strconv.Itoa(i) + `}`), Header: nats.Header{"k": {"v"}}}
		require.NoError(t, nc.PublishMsg(m))
	}
	require.NoError(t, nc.Flush())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []connector.Message
	for len(got) < 3 {
		b, err := src.Poll(ctx)
		require.NoError(t, err)
		got = append(got, b.Messages...)
	}
	require.Equal(t, []string{`{"n":0}`, `{"n":1}`, `{"n":2}`}, payloads(got))
	h, ok := got[0].Header("k")
	require.True(t, ok)
	require.Equal(t, "v", h.String())
}

func TestSourceRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{}, "stream"},
		{map[string]any{"mode": "core"}, "subject"},
		{map[string]any{"stream": "S", "subject": "a..b"}, "subject"},
		{map[string]any{"stream": "S", "subject": "a.>.b"}, "subject"},
		{map[string]any{"stream": "S", "max_ack_pending": int64(10), "batch_size": int64(100)}, "max_ack_pending"},
		{map[string]any{"stream": "S", "ack_wait": "10ms"}, "ack_wait"},
		{map[string]any{"stream": "S", "deliver": "sometimes"}, "deliver"},
	} {
		_, err := NewSource(cfg(c.values))
		require.Error(t, err, "%v", c.values)
		require.ErrorContains(t, err, c.key, "%v", c.values)
	}
	s, err := NewSource(cfg(map[string]any{"url": natstest.URL(t), "stream": "NO_SUCH_STREAM"}))
	require.NoError(t, err)
	require.ErrorContains(t, s.Open(context.Background(), nil), "NO_SUCH_STREAM")
}

func payloads(ms []connector.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Payload)
	}
	return out
}
