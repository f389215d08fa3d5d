package redis

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/redistest"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func newSource(t *testing.T, values map[string]any) connector.Source {
	t.Helper()
	s, err := NewSource(cfg(values))
	require.NoError(t, err)
	return s
}

// The conformance suite over a stream (consumer group, stable ids from
// the entry ids) and over a list (reliable LMOVE).
func TestSourceConformance(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	ctx := context.Background()
	t.Run("streams", func(t *testing.T) {
		p := redistest.Prefix(t)
		var n atomic.Int64
		connectortest.Source(t, connectortest.SourceSuite{
			New: func(t *testing.T) connector.Source {
				return newSource(t, map[string]any{"url": url, "stream": p + "in", "batch_size": 5, "block": "50ms"})
			},
			Add: func(t *testing.T, count int) []string {
				var out []string
				for range count {
					v := fmt.Sprintf(`{"n":%d}`, n.Add(1))
					require.NoError(t, c.XAdd(ctx, &goredis.XAddArgs{Stream: p + "in", Values: []any{"body", v, "extra", "x"}}).Err())
					out = append(out, v)
				}
				return out
			},
			StableIDs:     true,
			AckedPosition: true,
		})
	})
	t.Run("lists", func(t *testing.T) {
		p := redistest.Prefix(t)
		var n atomic.Int64
		connectortest.Source(t, connectortest.SourceSuite{
			New: func(t *testing.T) connector.Source {
				return newSource(t, map[string]any{"url": url, "mode": "lists", "key": p + "jobs", "batch_size": 5, "block": "50ms"})
			},
			Add: func(t *testing.T, count int) []string {
				var out []string
				for range count {
					v := fmt.Sprintf(`{"n":%d}`, n.Add(1))
					require.NoError(t, c.RPush(ctx, p+"jobs", v).Err())
					out = append(out, v)
				}
				return out
			},
			AckedPosition: true,
		})
	})
}

// An entry without the body field is sent as a JSON object of its
// fields; its other fields become headers; the id is the entry id.
func TestSourceEntryShape(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	ctx := context.Background()
	require.NoError(t, c.XAdd(ctx, &goredis.XAddArgs{Stream: p + "s", ID: "5-7", Values: []any{"a", "1", "b\x00\"", "{\"$x\":}"}}).Err())
	s := newSource(t, map[string]any{"url": url, "stream": p + "s", "block": "50ms"})
	require.NoError(t, s.Open(ctx, nil))
	defer s.Close(ctx)
	b, err := s.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b.Messages, 1)
	m := b.Messages[0]
	require.JSONEq(t, `{"a":"1","b\u0000\"":"{\"$x\":}"}`, string(m.Payload))
	require.Equal(t, entryID("5-7"), m.ID)
	require.Equal(t, byte(5), m.ID[7])
	require.Equal(t, byte(7), m.ID[15])
	v, ok := m.Header("a")
	require.True(t, ok)
	require.Equal(t, "1", v.String())
	require.NoError(t, s.(connector.Acker).Ack(ctx, b))
	pend, err := c.XPending(ctx, p+"s", "ferry").Result()
	require.NoError(t, err)
	require.Zero(t, pend.Count, "acknowledged")
}

// Bad configuration fails naming the key.
func TestSourceBadConfig(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{}, "stream"},
		{map[string]any{"mode": "lists"}, "key"},
		{map[string]any{"mode": "lists", "key": "a", "processing_key": "a"}, "processing_key"},
		{map[string]any{"stream": "s", "batch_size": 0}, "batch_size"},
		{map[string]any{"stream": "s", "block": "0s"}, "block"},
	} {
		_, err := NewSource(cfg(c.values))
		require.Error(t, err, "%v", c.values)
		require.Contains(t, err.Error(), c.key, "%v", c.values)
	}
}
