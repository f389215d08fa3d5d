package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/redistest"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func cfg(values map[string]any) connector.Config {
	return connector.Config{Key: "redis", Plugin: connector.PluginConfig{Source: "redis.toml", Values: values}}
}

func newSink(t testing.TB, values map[string]any) *Sink {
	t.Helper()
	s, err := NewSink(cfg(values))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.Open(ctx))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s.(*Sink)
}

func streamBodies(t *testing.T, c *goredis.Client, stream string) []string {
	t.Helper()
	es, err := c.XRange(context.Background(), stream, "-", "+").Result()
	require.NoError(t, err)
	out := []string{}
	for _, e := range es {
		out = append(out, e.Values["body"].(string))
	}
	return out
}

// The conformance suite in each mode that stores: streams with offset
// ids dedupe a replayed batch; streams with auto ids and lists keep both
// copies (at-least-once, as documented).
func TestSinkConformance(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	t.Run("streams", func(t *testing.T) {
		p := redistest.Prefix(t)
		connectortest.Sink(t, connectortest.SinkSuite{
			New: func(t *testing.T) connector.Sink {
				s, _ := NewSink(cfg(map[string]any{"url": url, "stream": p + "{stream}:{topic}:{partition}"}))
				return s
			},
			Read:       func(t *testing.T) []string { return streamBodies(t, c, p+"conformance:t:0") },
			Idempotent: true,
		})
	})
	t.Run("streams with auto ids", func(t *testing.T) {
		p := redistest.Prefix(t)
		connectortest.Sink(t, connectortest.SinkSuite{
			New: func(t *testing.T) connector.Sink {
				s, _ := NewSink(cfg(map[string]any{"url": url, "stream": p + "all", "entry_id": "auto"}))
				return s
			},
			Read: func(t *testing.T) []string { return streamBodies(t, c, p+"all") },
		})
	})
	t.Run("lists", func(t *testing.T) {
		p := redistest.Prefix(t)
		connectortest.Sink(t, connectortest.SinkSuite{
			New: func(t *testing.T) connector.Sink {
				s, _ := NewSink(cfg(map[string]any{"url": url, "mode": "lists", "key": p + "{topic}"}))
				return s
			},
			Read: func(t *testing.T) []string {
				v, err := c.LRange(context.Background(), p+"t", 0, -1).Result()
				require.NoError(t, err)
				return v
			},
		})
	})
}

// Bad configuration fails naming the key.
func TestSinkBadConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{"url": "http://x"}, "url"},
		{map[string]any{"mode": "hash"}, "mode"},
		{map[string]any{"stream": "iggy:{topic}"}, "stream"},
		{map[string]any{"stream": "{payload}", "entry_id": "auto"}, "stream"},
		{map[string]any{"mode": "lists", "key": "l:{key}"}, "key"},
		{map[string]any{"mode": "keys", "key": "k:{topic}"}, "key"},
		{map[string]any{"mode": "pubsub", "channel": "c:{"}, "channel"},
		{map[string]any{"mode": "keys", "ttl": "-1s"}, "ttl"},
		{map[string]any{"max_length": -1}, "max_length"},
	} {
		_, err := NewSink(cfg(c.values))
		require.Error(t, err, "%v", c.values)
		require.Contains(t, err.Error(), c.key, "%v", c.values)
	}
	_, err := NewSink(cfg(map[string]any{"url": "redis://:hunter2@localhost:1/0", "mode": "nope"}))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
}

func keyed(key string, payload string, del bool) connector.Message {
	m := connector.Message{Payload: []byte(payload)}
	if key != "" {
		m.SetHeader("key", header.StringValue(key))
	}
	if del {
		m.SetHeader("deleted", header.BoolValue(true))
	}
	return m
}

// Keys mode: each message sets its key (the "key" header), a deletion
// marker deletes it, ttl expires it, and a message without a key is
// refused for good while its neighbours are written.
func TestSinkKeysModeAndDeletionMarkers(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	s := newSink(t, map[string]any{"url": url, "mode": "keys", "key": p + "{topic}:{key}", "ttl": "1h"})
	b := &connector.SinkBatch{Stream: "s", Topic: "users", Messages: []connector.Message{
		keyed("a", `{"v":1}`, false), keyed("b", `{"v":2}`, false), keyed("", `{"v":3}`, false),
		keyed("a", `{"v":4}`, false), keyed("b", `{"gone":true}`, true), keyed("c*?[x] \r\n", `{"v":5}`, false),
	}}
	for i := range b.Messages {
		b.Messages[i].Offset = uint64(i)
	}
	err := s.Consume(context.Background(), b)
	var per connector.MessageErrors
	require.True(t, errors.As(err, &per), "%v", err)
	require.Len(t, per, 1)
	require.True(t, connector.IsPermanent(per[2]))
	require.Contains(t, per[2].Error(), `no "key" header`)
	ctx := context.Background()
	require.Equal(t, `{"v":4}`, c.Get(ctx, p+"users:a").Val())
	require.Equal(t, int64(0), c.Exists(ctx, p+"users:b").Val(), "the deletion marker deleted b")
	require.Equal(t, `{"v":5}`, c.Get(ctx, p+"users:c*?[x] \r\n").Val(), "a hostile key is one key, byte for byte")
	ttl := c.TTL(ctx, p+"users:a").Val()
	require.True(t, ttl > 50*time.Minute && ttl <= time.Hour, "ttl %s", ttl)
	// Replayed, the batch ends in the same state.
	_ = s.Consume(ctx, b)
	require.Equal(t, `{"v":4}`, c.Get(ctx, p+"users:a").Val())
	require.Equal(t, int64(0), c.Exists(ctx, p+"users:b").Val())
}

// Pub/sub: a subscriber receives every message in order.
func TestSinkPubSub(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	ctx := context.Background()
	sub := c.Subscribe(ctx, p+"events")
	defer sub.Close()
	_, err := sub.Receive(ctx) // the subscription is confirmed
	require.NoError(t, err)
	s := newSink(t, map[string]any{"url": url, "mode": "pubsub", "channel": p + "{topic}"})
	b := &connector.SinkBatch{Stream: "s", Topic: "events"}
	for i := range 5 {
		b.Messages = append(b.Messages, connector.Message{Payload: []byte{byte('a' + i)}, Offset: uint64(i)})
	}
	require.NoError(t, s.Consume(ctx, b))
	var got []string
	for range 5 {
		m, err := sub.ReceiveMessage(ctx)
		require.NoError(t, err)
		got = append(got, m.Payload)
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, got)
}

// A stream key that holds another type: Redis's WRONGTYPE refusal is a
// permanent error of every message, with the server's reason.
func TestSinkStreamRefusedWithServerReason(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	require.NoError(t, c.Set(context.Background(), p+"s:t:0", "a string", 0).Err())
	s := newSink(t, map[string]any{"url": url, "stream": p + "{stream}:{topic}:{partition}"})
	b := &connector.SinkBatch{Stream: "s", Topic: "t", Messages: []connector.Message{{Payload: []byte("1")}, {Payload: []byte("2"), Offset: 1}}}
	err := s.Consume(context.Background(), b)
	var per connector.MessageErrors
	require.True(t, errors.As(err, &per), "%v", err)
	require.Len(t, per, 2)
	require.True(t, connector.IsPermanent(per[0]))
	require.True(t, strings.Contains(per[0].Error(), "WRONGTYPE"), "%v", per[0])
}
