package random_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/random"
	"github.com/stretchr/testify/require"
)

func newSource(t *testing.T, values map[string]any) connector.Source {
	t.Helper()
	s, err := random.New(connector.Config{Key: "r", Plugin: connector.PluginConfig{Values: values, Source: "random.toml"}})
	require.NoError(t, err)
	return s
}

func TestRecordsAndState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSource(t, map[string]any{"interval": "1ms", "max_count": int64(7), "messages_range": []any{int64(3), int64(3)}, "payload_size": int64(12)})
	require.NoError(t, s.Open(ctx, nil))
	var total int
	for {
		b, err := s.Poll(ctx)
		if err == connector.ErrEndOfInput {
			break
		}
		require.NoError(t, err)
		require.Equal(t, connector.SchemaJSON, b.Schema)
		for _, m := range b.Messages {
			var rec map[string]string
			require.NoError(t, json.Unmarshal(m.Payload, &rec))
			require.Equal(t, "Hello", rec["title"])
			require.Equal(t, "World", rec["name"])
			require.Len(t, rec["text"], 12)
			require.Len(t, rec["id"], 36)
		}
		total += len(b.Messages)
		require.Equal(t, uint64(total), binary.LittleEndian.Uint64(b.State))
	}
	require.Equal(t, 7, total, "max_count caps the last batch")

	// A restart with the saved state continues the count: nothing more to do.
	again := newSource(t, map[string]any{"interval": "1ms", "max_count": int64(7)})
	require.NoError(t, again.Open(ctx, binary.LittleEndian.AppendUint64(nil, 7)))
	_, err := again.Poll(ctx)
	require.ErrorIs(t, err, connector.ErrEndOfInput)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for i, values := range []map[string]any{
		{"interval": "fast"},
		{"messages_range": []any{int64(5), int64(1)}},
		{"messages_range": []any{int64(5)}},
		{"payload": int64(5)},
	} {
		_, err := random.New(connector.Config{Plugin: connector.PluginConfig{Values: values, Source: "random.toml"}})
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), "random.toml", "case %d", i)
	}
}

func TestPollHonoursContext(t *testing.T) {
	t.Parallel()
	s := newSource(t, map[string]any{"interval": "1h"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Poll(ctx)
	require.ErrorIs(t, err, context.Canceled)
}
