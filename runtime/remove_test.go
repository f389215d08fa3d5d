package runtime

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// closeSink counts Close calls.
type closeSink struct{ closed *atomic.Int32 }

func (s closeSink) Open(context.Context) error                          { return nil }
func (s closeSink) Consume(context.Context, *connector.SinkBatch) error { return nil }
func (s closeSink) Close(context.Context) error                         { s.closed.Add(1); return nil }

func TestRemoveStopsAndForgetsAConnector(t *testing.T) {
	e := newEnv(t)
	var closed atomic.Int32
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "closer",
		NewSink: func(connector.Config) (connector.Sink, error) { return closeSink{&closed}, nil }}))
	e.connector("gone", "type = \"sink\"\nkey = \"gone\"\npath = \"closer\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n")
	e.connector("kept", "type = \"sink\"\nkey = \"kept\"\npath = \"closer\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n")
	rt := e.start()
	ctx := context.Background()
	eventually(t, "both running", func() bool {
		a, _ := rt.Connector(connector.KindSink, "gone")
		b, _ := rt.Connector(connector.KindSink, "kept")
		return a.Status == StatusRunning && b.Status == StatusRunning
	})

	require.NoError(t, rt.Remove(ctx, connector.KindSink, "gone"))
	require.Equal(t, int32(1), closed.Load(), "the removed sink was closed; the other was not")
	_, err := rt.Connector(connector.KindSink, "gone")
	require.ErrorIs(t, err, ErrNotFound)
	require.Len(t, rt.Connectors(connector.KindSink), 1)
	kept, err := rt.Connector(connector.KindSink, "kept")
	require.NoError(t, err)
	require.Equal(t, StatusRunning, kept.Status)
	require.ErrorIs(t, rt.Remove(ctx, connector.KindSink, "gone"), ErrNotFound)
	require.ErrorIs(t, rt.Remove(ctx, connector.KindSource, "kept"), ErrNotFound, "kinds are separate")

	// The configuration is still there: a restart brings it back.
	require.NoError(t, rt.Restart(ctx, connector.KindSink, "gone"))
	eventually(t, "back and running", func() bool {
		i, err := rt.Connector(connector.KindSink, "gone")
		return err == nil && i.Status == StatusRunning
	})

	require.NoError(t, rt.Stop(ctx))
	require.ErrorIs(t, rt.Remove(ctx, connector.KindSink, "kept"), ErrStopped)
}
