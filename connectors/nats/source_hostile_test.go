package nats

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// hostileData are payloads that look like NATS protocol lines, or are
// binary (every byte value, NUL, invalid UTF-8), or large.
func hostileData() [][]byte {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	return [][]byte{
		[]byte("PUB evil 1\r\nx\r\n"),
		[]byte("HPUB evil 12 14\r\nNATS/1.0\r\n\r\nxx\r\n"),
		[]byte("+OK\r\n-ERR 'Authorization Violation'\r\nPING\r\n"),
		[]byte("SUB > 1\r\nUNSUB 1\r\n"),
		{0},
		[]byte("a\x00b\xff\xfe not utf-8"),
		all,
		[]byte("\u202e\u00fc\u65e5\u672c\U0001F600 \"quotes\" 'single' \\"),
		[]byte(strings.Repeat("\x00\xffbig", 200<<10)), // 1000 KiB, near max_payload (1 MiB)
	}
}

// NATS → Iggy through the runtime: messages with hostile subjects
// (unicode, quotes, protocol-looking and very long tokens), headers and
// payloads arrive in Iggy byte for byte and in order; headers that fit
// Iggy come along, longer ones are left out; nothing else happens on the
// server (the stream keeps every message, one consumer only, another
// stream untouched).
func TestSourceHostileSubjectsHeadersAndPayloads(t *testing.T) {
	t.Parallel()
	url, n, canary := natstest.URL(t), natstest.NewNames(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	cjs := natstest.Stream(t, url, canary)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := cjs.Publish(ctx, canary.Subject+".x", []byte("alive"))
	require.NoError(t, err)

	long := strings.Repeat("L", 1000)
	subjects := []string{
		n.Subject + ".\u00fc\u65e5\u672c.\U0001F600",
		n.Subject + `."quoted".'single'.back\slash`,
		n.Subject + ".PUB.HPUB.$JS.API.STREAM.DELETE." + canary.Stream,
		n.Subject + "." + long,
	}
	data := hostileData()
	var want [][]byte
	var wantSubject []string
	for i, d := range data {
		m := &nats.Msg{Subject: subjects[i%len(subjects)], Data: d, Header: nats.Header{}}
		m.Header.Set("ok", "fine")
		m.Header.Set("x-Key_$JS.1", "\u65e5\u672c")
		m.Header.Set("quote", `"'\`)
		m.Header.Set("long", strings.Repeat("v", 300))
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err, "message %d", i)
		want = append(want, d)
		wantSubject = append(wantSubject, m.Subject)
	}

	run := connectortest.Start(t, map[string]string{"in.toml": strings.Replace(sourceTOML(url, fmt.Sprintf(`stream = %q
subject = %q
durable = "hostile"
batch_size = 3
batch_wait = "5ms"
schema = "raw"
`, n.Stream, n.Subject+".>")), `schema = "json"`, `schema = "raw"`, 1)})
	logSources(t, run.Runtime)
	var msgs []iggy.Message
	connectortest.Eventually(t, "every message in Iggy", func() bool {
		msgs = run.Messages(t, "bridge", "events")
		return len(msgs) >= len(want)
	})
	require.Len(t, msgs, len(want))
	for i, m := range msgs {
		require.Equal(t, want[i], m.Payload, "message %d byte for byte", i)
		for k, v := range map[string]string{"ok": "fine", "x-Key_$JS.1": "\u65e5\u672c", "quote": `"'\`, "nats_stream": n.Stream} {
			h, ok := header.Get(m.Headers, k)
			require.True(t, ok, "message %d: header %q", i, k)
			require.Equal(t, v, h.String(), "message %d: header %q", i, k)
		}
		_, ok := header.Get(m.Headers, "long")
		require.False(t, ok, "message %d: a 300-byte header value is left out", i)
		h, ok := header.Get(m.Headers, "nats_subject")
		if len(wantSubject[i]) <= 255 {
			require.True(t, ok, "message %d: nats_subject", i)
			require.Equal(t, wantSubject[i], h.String())
		} else {
			require.False(t, ok, "message %d: a subject longer than an Iggy header is left out", i)
		}
	}

	// Nothing else happened on the server.
	connectortest.Eventually(t, "every message acknowledged", func() bool {
		c, err := js.Consumer(ctx, n.Stream, "hostile")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.AckFloor.Stream == uint64(len(want))
	})
	st, err := js.Stream(ctx, n.Stream)
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(len(want)), info.State.Msgs, "the stream keeps every message")
	require.Equal(t, 1, info.State.Consumers, "one consumer, the durable")
	require.Equal(t, want, [][]byte(rawPayloads(stored(t, js, n.Stream))), "the stream as it was")
	cst, err := cjs.Stream(ctx, canary.Stream)
	require.NoError(t, err, "the canary stream still exists")
	cinfo, err := cst.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), cinfo.State.Msgs)
	require.Zero(t, cinfo.State.Consumers)
}

func rawPayloads(ms []*jetstream.RawStreamMsg) [][]byte {
	out := make([][]byte, len(ms))
	for i, m := range ms {
		out[i] = m.Data
	}
	return out
}

// Hostile Nats-Msg-Id values (protocol lines, NUL, unicode, 4 KiB) make
// stable ids (the SHA-256 of the value), the same on a redelivery; the
// header itself is not carried.
func TestSourceHostileMsgIDs(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	ids := []string{"PUB x 1", "\x00\x01", "\u00fc\u65e5", strings.Repeat("i", 4096), "00000000-0000-0000-0000-000000000000"}
	for i, id := range ids {
		publishJS(t, js, n.Subject+".in", i, 1, func(m *nats.Msg) { m.Header.Set(jetstream.MsgIDHeader, id) })
	}
	values := map[string]any{"url": url, "stream": n.Stream, "durable": "ids", "ack_wait": "1s", "batch_size": int64(len(ids))}
	first := openSource(t, values)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got []connector.Message
	for len(got) < len(ids) {
		b, err := first.Poll(ctx)
		require.NoError(t, err)
		got = append(got, b.Messages...)
	}
	seen := map[[16]byte]bool{}
	for i, m := range got {
		want, _ := msgIDFromHeader(nats.Header{jetstream.MsgIDHeader: {ids[i]}})
		require.Equal(t, want, m.ID, "message %d", i)
		require.NotZero(t, m.ID, "message %d: the nil UUID is hashed, not used", i)
		require.False(t, seen[m.ID], "message %d: two ids alike", i)
		seen[m.ID] = true
	}
	// Closed without an Ack: given back (Nak), delivered again with the
	// same ids.
	require.NoError(t, first.Close(ctx))
	second := openSource(t, values)
	var again []connector.Message
	for len(again) < len(ids) {
		b, err := second.Poll(ctx)
		require.NoError(t, err)
		again = append(again, b.Messages...)
		require.NoError(t, second.(connector.Acker).Ack(ctx, b))
	}
	for i := range got {
		require.Equal(t, got[i].ID, again[i].ID, "message %d keeps its id", i)
		require.Equal(t, got[i].Payload, again[i].Payload)
	}
}

// A message without data (a header-only message, say) cannot go to Iggy,
// which refuses empty payloads and so could not dead-letter it either:
// the source passes over it, acknowledged, rather than failing its batch
// for ever; its neighbours arrive. In core mode likewise.
func TestSourcePassesOverEmptyMessages(t *testing.T) {
	t.Parallel()
	url, n, core := natstest.URL(t), natstest.NewNames(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, d := range []string{"a", "", "c", ""} {
		m := &nats.Msg{Subject: n.Subject + ".in", Data: []byte(d), Header: nats.Header{"only": {"headers"}}}
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	run := connectortest.Start(t, map[string]string{
		"js.toml": strings.Replace(sourceTOML(url, fmt.Sprintf("stream = %q\nbatch_size = 10\nbatch_wait = \"5ms\"\nschema = \"raw\"\n", n.Stream)),
			`schema = "json"`, `schema = "raw"`, 1),
		"core.toml": strings.NewReplacer(`key = "from_nats"`, `key = "from_core"`, `topic = "events"`, `topic = "core"`, `schema = "json"`, `schema = "raw"`).
			Replace(sourceTOML(url, fmt.Sprintf("mode = \"core\"\nsubject = %q\nbatch_size = 10\nbatch_wait = \"5ms\"\nschema = \"raw\"\n", core.Subject+".>"))),
	})
	logSources(t, run.Runtime)
	var msgs []iggy.Message
	connectortest.Eventually(t, "both messages with data", func() bool {
		msgs = run.Messages(t, "bridge", "events")
		return len(msgs) >= 2
	})
	require.Equal(t, []string{"a", "c"}, []string{string(msgs[0].Payload), string(msgs[1].Payload)})
	connectortest.Eventually(t, "every message acknowledged, the empty ones too", func() bool {
		c, err := js.Consumer(ctx, n.Stream, "ferry")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.AckFloor.Stream == 4
	})

	nc := natstest.Connect(t, url)
	connectortest.Eventually(t, "core: a message with data after empty ones", func() bool {
		for _, d := range []string{"", "x", ""} {
			require.NoError(t, nc.Publish(core.Subject+".in", []byte(d)))
		}
		require.NoError(t, nc.Flush())
		return len(run.Messages(t, "bridge", "core")) > 0
	})
	for _, m := range run.Messages(t, "bridge", "core") {
		require.Equal(t, "x", string(m.Payload))
	}
	require.Len(t, run.Messages(t, "bridge", "events"), 2)
	for _, info := range run.Runtime.Connectors(connector.KindSource) {
		require.Empty(t, info.LastError, "source %s", info.Key)
		require.Zero(t, info.Restarts, "source %s", info.Key)
	}
}

// Hostile configuration values are refused when the connector is built,
// naming the key, and a bad URL's error does not show its password.
func TestSourceHostileConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{"stream": "A B"}, "stream"},
		{map[string]any{"stream": "A.B"}, "stream"},
		{map[string]any{"stream": "A>"}, "stream"},
		{map[string]any{"stream": "../../etc"}, "stream"},
		{map[string]any{"stream": "S\r\nPUB x 1"}, "stream"},
		{map[string]any{"stream": "S\x00"}, "stream"},
		{map[string]any{"stream": "S", "durable": ""}, "durable"},
		{map[string]any{"stream": "S", "durable": "a.b"}, "durable"},
		{map[string]any{"stream": "S", "durable": "a b"}, "durable"},
		{map[string]any{"stream": "S", "durable": "*"}, "durable"},
		{map[string]any{"stream": "S", "subject": "a b"}, "subject"},
		{map[string]any{"stream": "S", "subject": "a\r\nPUB x 1\r\n"}, "subject"},
		{map[string]any{"mode": "core", "subject": ">.a"}, "subject"},
		{map[string]any{"mode": "core", "subject": "a", "queue": "q q"}, "queue"},
		{map[string]any{"mode": "core", "subject": "a", "queue": "q\r\n"}, "queue"},
		{map[string]any{"mode": "core\r\nPUB", "subject": "a"}, "mode"},
		{map[string]any{"stream": "S", "url": "http://127.0.0.1:4222"}, "url"},
		{map[string]any{"stream": "S", "url": "nats://u:s3cr3t@127.0.0.1:4222,::bad"}, "url"},
		{map[string]any{"stream": "S", "schema": "json; rm"}, "schema"},
	} {
		_, err := NewSource(cfg(c.values))
		require.Error(t, err, "%q", c.values)
		require.ErrorContains(t, err, c.key, "%q", c.values)
		require.NotContains(t, err.Error(), "s3cr3t", "%q", c.values)
	}
	// Unicode names are the server's to take.
	_, err := NewSource(cfg(map[string]any{"stream": "\u00fc\u65e5", "durable": "d\u00fc-_"}))
	require.NoError(t, err)
}
