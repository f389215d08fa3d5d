package nats

import (
	"context"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/natstest"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// Iggy names that would make a wildcard, an extra protocol line or an
// empty token in the subject: every message of the batch is refused for
// good with the reason, and nothing is published.
func TestSinkHostileNamesMakeNoSubject(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n)
	s := openSink(t, map[string]any{"url": url, "subject": n.Subject + ".{stream}.{topic}"})
	for _, names := range [][2]string{{"*", "t"}, {"s", ">"}, {"s", "a b"}, {"s", "x\r\nPUB evil 1\r\nx"}, {"", "t"}, {"s.", "t"}, {"s", "t\x00"}} {
		b := &connector.SinkBatch{Stream: names[0], Topic: names[1],
			Messages: []connector.Message{{ID: uuid.New(), Payload: []byte(`{}`)}, {ID: uuid.New(), Payload: []byte(`{}`)}}}
		err := s.Consume(context.Background(), b)
		var me connector.MessageErrors
		require.ErrorAs(t, err, &me, "%q", names)
		require.Len(t, me, 2)
		require.True(t, connector.IsPermanent(me[0]))
		require.ErrorContains(t, me[0], "no subject for stream")
	}
	require.Empty(t, stored(t, js, n.Stream))
}

// Hostile headers are left out (CR/LF in a value or key, ':' or a space
// in a key, JetStream's own Nats-* headers such as Nats-Rollup, which
// would purge the stream); payloads that look like protocol lines or are
// binary are stored byte for byte.
func TestSinkHostileHeadersAndPayloads(t *testing.T) {
	t.Parallel()
	url, n := natstest.URL(t), natstest.NewNames(t)
	js := natstest.Stream(t, url, n, jetstream.StreamConfig{AllowRollup: true})
	s := openSink(t, map[string]any{"url": url, "subject": n.Subject + ".out", "include_metadata": false})
	payloads := [][]byte{
		[]byte("PUB x 1\r\nA\r\nHPUB y 12 12\r\nNATS/1.0\r\n\r\n"),
		{0, 1, 2, 0xff, '\r', '\n', 0xc3},
		[]byte(`{"a":"\u0000","b":"` + "\u202e" + `"}`),
	}
	var msgs []connector.Message
	for _, p := range payloads {
		m := connector.Message{ID: uuid.New(), Payload: p}
		m.SetHeader("ok", header.StringValue("fine"))
		m.SetHeader("bad\r\nNats-Msg-Id", header.StringValue("x"))
		m.SetHeader("bad:key", header.StringValue("x"))
		m.SetHeader("bad key", header.StringValue("x"))
		m.SetHeader("inject", header.StringValue("v\r\nNats-Rollup: all"))
		m.SetHeader("Nats-Rollup", header.StringValue("all"))
		m.SetHeader("nats-msg-id", header.StringValue("same"))
		m.SetHeader("Nats-Expected-Stream", header.StringValue("OTHER"))
		m.Headers = append(m.Headers, connector.Header{Key: header.BinaryKey([]byte{0xff}), Value: header.StringValue("x")})
		msgs = append(msgs, m)
	}
	require.NoError(t, s.Consume(context.Background(), &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaRaw, Messages: msgs}))
	got := stored(t, js, n.Stream)
	require.Len(t, got, len(payloads), "no rollup purged the stream, no Nats-Msg-Id made them one")
	for i, m := range got {
		require.Equal(t, payloads[i], m.Data)
		require.Equal(t, "fine", m.Header.Get("ok"))
		require.Equal(t, uuid.UUID(msgs[i].ID).String(), m.Header.Get(jetstream.MsgIDHeader))
		for k := range m.Header {
			require.Contains(t, []string{"ok", jetstream.MsgIDHeader}, k, "header %q should have been left out", k)
		}
	}
}

// Subject and header checks never panic, and what they accept is a
// subject NATS can publish to.
func FuzzRenderSubject(f *testing.F) {
	for _, s := range []string{"orders", "a.b", "*", ">", "a b", "\r\n", "", "ü"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, stream, topic string) {
		s, err := renderSubject("iggy.{stream}.{topic}.{partition}", stream, topic, 7)
		if err != nil {
			return
		}
		if checkSubject(s) != nil {
			t.Fatalf("rendered %q, which checkSubject refuses", s)
		}
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] == '*' || s[i] == '>' {
				t.Fatalf("subject %q holds byte %q", s, s[i])
			}
		}
	})
}
