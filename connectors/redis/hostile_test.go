package redis

import (
	"context"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/redistest"
	"github.com/stretchr/testify/require"
)

// Hostile stream/topic names and payloads (RESP framing, Lua, glob and
// template characters, NUL, invalid UTF-8) are stored byte for byte as
// one stream name and one field value each: nothing is parsed as a
// command, a script or a template, and nothing panics.
func TestSinkHostileNamesAndPayloads(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	payloads := []string{
		"*1\r\n$8\r\nFLUSHALL\r\n",
		"'); redis.call('FLUSHALL') --",
		"]] .. redis.call('DEL', KEYS[1]) .. [[",
		"{stream}{key}{partition} * ? [a-z]",
		"\x00\xff\xfe not utf-8",
		"FERRY 0 WRONGTYPE fake error text",
	}
	b := &connector.SinkBatch{Stream: "s \r\nPING\r\n", Topic: "{topic}*?", Partition: 3}
	for i, pl := range payloads {
		m := connector.Message{Payload: []byte(pl), Offset: uint64(i)}
		m.Headers = append(m.Headers, connector.StringHeader("x\r\n", "')\x00"))
		b.Messages = append(b.Messages, m)
	}
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, p+"canary", "alive", 0).Err())
	s := newSink(t, map[string]any{"url": url, "stream": p + "{stream}:{topic}:{partition}"})
	require.NoError(t, s.Consume(ctx, b))
	stream := p + "s \r\nPING\r\n:{topic}*?:3"
	es, err := c.XRange(ctx, stream, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, es, len(payloads))
	for i, e := range es {
		require.Equal(t, payloads[i], e.Values["body"], "entry %d", i)
		require.Equal(t, "')\x00", e.Values["header:x\r\n"])
	}
	require.Equal(t, "alive", c.Get(ctx, p+"canary").Val(), "no command ran from a payload")

	for _, mode := range []string{"lists", "pubsub", "keys"} {
		values := map[string]any{"url": url, "mode": mode, "channel": p + "{stream}"}
		if mode != "pubsub" {
			values["key"] = p + map[string]string{"lists": "{stream}", "keys": "{key}"}[mode]
		}
		s := newSink(t, values)
		kb := *b
		kb.Messages = append([]connector.Message(nil), b.Messages...)
		for i := range kb.Messages {
			kb.Messages[i] = keyed(string(kb.Messages[i].Payload), string(kb.Messages[i].Payload), false)
		}
		require.NoError(t, s.Consume(ctx, &kb), mode)
	}
	got, err := c.LRange(ctx, p+b.Stream, 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, payloads, got)
	for _, pl := range payloads {
		require.Equal(t, pl, c.Get(ctx, p+pl).Val())
	}
	require.Equal(t, "alive", c.Get(ctx, p+"canary").Val())
}
