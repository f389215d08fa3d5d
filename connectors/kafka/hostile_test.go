package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Hostile records reach Iggy without a panic: headers Iggy cannot carry
// (empty, over 255 bytes, named `key`) are left out, duplicates keep the
// first value, binary values stay raw, a long key is left out, and the
// payload is kept byte for byte.
func TestSourceHostileRecords(t *testing.T) {
	t.Parallel()
	c := startCluster(t, []string{"in"}, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrOf(c)), kgo.DefaultProduceTopic("in"))
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()
	payload := []byte("\x00\xff{\"a\":\"'; DROP TABLE x; --\"}\n\r")
	recs := []*kgo.Record{
		{Key: []byte(strings.Repeat("k", 300)), Value: payload, Headers: []kgo.RecordHeader{
			{Key: "", Value: []byte("empty key")}, {Key: "empty", Value: nil}, {Key: "long", Value: []byte(strings.Repeat("v", 256))},
			{Key: "key", Value: []byte("spoof")}, {Key: "dup", Value: []byte("first")}, {Key: "dup", Value: []byte("second")},
			{Key: "bin", Value: []byte{0xff, 0x00, 0xfe}}, {Key: strings.Repeat("h", 300), Value: []byte("x")},
		}},
		{Key: []byte{0xc3, 0x28}, Value: nil},
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())

	src, err := NewSource(cfg(map[string]any{"brokers": []any{addrOf(c)}, "topics": []any{"in"}, "consumer_group": "g",
		"fetch_max_wait": "20ms", "session_timeout": "6s", "schema": "raw"}))
	require.NoError(t, err)
	require.NoError(t, src.Open(ctx, nil))
	defer src.Close(ctx)
	var got []connector.Message
	for len(got) < 2 {
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		b, err := src.Poll(pctx)
		cancel()
		require.NoError(t, err)
		got = append(got, b.Messages...)
	}
	m := got[0]
	require.Equal(t, payload, m.Payload)
	_, hasKey := m.Header("key")
	require.False(t, hasKey, "a key over 255 bytes is left out, and a `key` header never stands in for it")
	v, _ := m.Header("dup")
	require.Equal(t, "first", v.String())
	v, _ = m.Header("bin")
	require.Equal(t, header.KindRaw, v.Kind)
	for _, h := range m.Headers {
		require.True(t, fitsIggy(string(h.Key.Data), h.Value.Data), "header %q fits Iggy", h.Key.Data)
		require.NotEqual(t, "empty", string(h.Key.Data))
		require.NotEqual(t, "long", string(h.Key.Data))
	}
	k, ok := got[1].Header("key")
	require.True(t, ok)
	require.Equal(t, header.KindRaw, k.Kind, "a key that is not UTF-8 stays raw bytes")
	require.Equal(t, []byte{0xc3, 0x28}, k.Data)
	require.Empty(t, got[1].Payload)
	require.NotEqual(t, got[0].ID, got[1].ID)
}

// Hostile Iggy headers and payloads to Kafka: binary header keys and
// values, a raw key, control characters; the record carries them as
// bytes.
func TestSinkHostileHeaders(t *testing.T) {
	t.Parallel()
	c := startCluster(t, []string{"out"})
	s, err := NewSink(cfg(map[string]any{"brokers": []any{addrOf(c)}, "topic": "out", "include_metadata": false}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	defer s.Close(ctx)
	m := connector.Message{Payload: []byte("\x00\x01{\"x\":\"\u2028\"}")}
	m.Headers = append(m.Headers,
		connector.Header{Key: header.BinaryKey([]byte{0, 1, 2}), Value: header.RawValue([]byte{0xff})},
		header.New("key", header.RawValue([]byte{0x00, 0xff})),
		header.New("crlf\r\n", header.StringValue("a\r\nb")),
		header.New("f", header.Float64Value(1.5)),
	)
	require.NoError(t, s.Consume(ctx, &connector.SinkBatch{Stream: "s", Topic: "t", Messages: []connector.Message{m}}))
	r := newReader(t, addrOf(c), "out")
	recs := r.all(t, addrOf(c), "out")
	require.Len(t, recs, 1)
	rec := recs[0]
	require.Equal(t, m.Payload, rec.Value)
	require.Equal(t, []byte{0x00, 0xff}, rec.Key)
	require.Equal(t, []kgo.RecordHeader{{Key: "\x00\x01\x02", Value: []byte{0xff}}, {Key: "crlf\r\n", Value: []byte("a\r\nb")},
		{Key: "f", Value: []byte("1.5")}}, rec.Headers)
}
