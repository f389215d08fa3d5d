package runtime

import (
	"context"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

// The embedded broker deduplicates by message id by default
// ([iggy] embedded_dedup_entries): a batch sent again with the same ids,
// as after a crash, is stored once; embedded_dedup_entries = 0 turns it off.
func TestEmbeddedBrokerDeduplicatesByID(t *testing.T) {
	for _, c := range []struct {
		extra string
		want  int
	}{{"", 2}, {"embedded_dedup_entries = 0\n", 4}} {
		e := newEnv(t)
		e.write("config.toml", strings.Replace(runtimeTOML, "[iggy]\n", "[iggy]\n"+c.extra, 1))
		rt := e.start()
		ctx := context.Background()
		admin, err := iggy.Dial(ctx, rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
		require.NoError(t, err)
		_, err = admin.CreateStream(ctx, "s")
		require.NoError(t, err)
		_, err = admin.CreateTopic(ctx, iggy.NamedID("s"), "t", 1)
		require.NoError(t, err)
		batch := []iggy.Message{{ID: [16]byte{1}, Payload: []byte("a")}, {ID: [16]byte{2}, Payload: []byte("b")}}
		for range 2 {
			_, err = admin.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), batch)
			require.NoError(t, err)
		}
		reply, err := admin.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("s"), Topic: iggy.NamedID("t"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
		require.NoError(t, err)
		require.Len(t, reply.Messages, c.want, "config %q", c.extra)
		admin.Close()
		require.NoError(t, rt.Stop(ctx))
	}
}
