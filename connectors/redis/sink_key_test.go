package redis

import (
	"context"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/redistest"
	"github.com/stretchr/testify/require"
)

// Keys mode reads Ferry's key convention (docs/keys.md): iggy.KeyHeader
// as a string or raw bytes (a binary key is its bytes, NUL and all),
// iggy.DeletedHeader as the deletion marker.
func TestSinkKeysModeBinaryKeys(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	c := redistest.Client(t, url)
	p := redistest.Prefix(t)
	s := newSink(t, map[string]any{"url": url, "mode": "keys", "key": p + "{key}"})
	bin := []byte{0xff, 0x00, 'a'}
	msg := func(v header.Value, payload string, del bool) connector.Message {
		m := connector.Message{Payload: []byte(payload)}
		m.SetHeader(iggy.KeyHeader, v)
		if del {
			m.SetHeader(iggy.DeletedHeader, header.BoolValue(true))
		}
		return m
	}
	ctx := context.Background()
	require.NoError(t, s.Consume(ctx, &connector.SinkBatch{Stream: "s", Topic: "t", Messages: []connector.Message{
		msg(header.RawValue(bin), "raw", false), msg(header.StringValue("str"), "text", false), msg(header.StringValue("gone"), "x", false),
	}}))
	require.Equal(t, "raw", c.Get(ctx, p+string(bin)).Val())
	require.Equal(t, "text", c.Get(ctx, p+"str").Val())
	require.Equal(t, int64(1), c.Exists(ctx, p+"gone").Val())

	require.NoError(t, s.Consume(ctx, &connector.SinkBatch{Stream: "s", Topic: "t", Messages: []connector.Message{
		msg(header.RawValue(bin), "null", true), msg(header.StringValue("gone"), "null", true),
	}}))
	require.Equal(t, int64(0), c.Exists(ctx, p+string(bin), p+"gone").Val(), "deletion markers deleted both")
	require.Equal(t, "text", c.Get(ctx, p+"str").Val())
}
