package runtime

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
)

// onceSource returns one batch, then waits; it records its acks.
type onceSource struct {
	batch *connector.Batch
	done  bool
	acked chan struct{}
}

func (s *onceSource) Open(context.Context, []byte) error { return nil }

func (s *onceSource) Poll(ctx context.Context) (*connector.Batch, error) {
	if s.done {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s.done = true
	return s.batch, nil
}

func (s *onceSource) Ack(context.Context, *connector.Batch) error   { close(s.acked); return nil }
func (s *onceSource) Nack(context.Context, *connector.Batch, error) {}
func (s *onceSource) Close(context.Context) error                   { return nil }

// An empty payload (Iggy refuses those) does not stop a source: with a
// key it is the key's deletion marker (a Kafka tombstone), without one it
// is dead-lettered, the letter carrying the JSON null and saying so.
func TestEmptyPayloadsFromASource(t *testing.T) {
	e := newEnv(t)
	src := &onceSource{acked: make(chan struct{}), batch: &connector.Batch{Schema: connector.SchemaRaw, Messages: []connector.Message{
		{Payload: []byte("a")},
		{Headers: []connector.Header{header.New(iggy.KeyHeader, header.StringValue("k1"))}},
		{},
		{Payload: []byte("b")},
	}}}
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSource, Name: "once",
		NewSource: func(connector.Config) (connector.Source, error) { return src, nil }}))
	e.connector("empties", `
type = "source"
key = "empties"
path = "once"
[[streams]]
stream = "s"
topic = "t"
schema = "raw"
`)
	rt := e.start()
	<-src.acked

	cl, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	poll := func(topic string) []iggy.Message {
		r, err := cl.PollMessages(context.Background(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("s"), Topic: iggy.NamedID(topic), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
		require.NoError(t, err)
		return r.Messages
	}
	got := poll("t")
	require.Len(t, got, 3)
	require.Equal(t, "a", string(got[0].Payload))
	require.Equal(t, iggy.DeletedPayload, string(got[1].Payload))
	k, ok := got[1].Key()
	require.True(t, ok)
	require.Equal(t, "k1", string(k.Data))
	deleted, _ := header.Get(got[1].Headers, iggy.DeletedHeader)
	require.True(t, deleted.Bool(), "a keyed empty message is its key's deletion marker")
	require.Equal(t, "b", string(got[2].Payload))

	dl := poll("empties_dead_letter")
	require.Len(t, dl, 1)
	require.Equal(t, iggy.DeletedPayload, string(dl[0].Payload))
	empty, _ := header.Get(dl[0].Headers, HeaderDLQEmptyPayload)
	require.True(t, empty.Bool())
	reason, _ := header.Get(dl[0].Headers, HeaderDLQError)
	require.Contains(t, reason.String(), "empty")
	i, err := rt.Connector(connector.KindSource, "empties")
	require.NoError(t, err)
	require.Equal(t, StatusRunning, i.Status)
}
