package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// Declared event types are checked at both edges in the real pipeline:
// a source's message that does not match its type is dead-lettered with
// the validation error and the rest are sent; a sink's is dead-lettered
// and the rest written.
func TestDeclaredEventTypesAreValidatedAtTheEdges(t *testing.T) {
	e := newEnv(t)
	e.write("order.json", `{"type":"object","required":["n"],"properties":{"n":{"type":"integer","maximum":15}}}`)
	e.write("config.toml", runtimeTOML+`
[events."order.created"]
schema_path = "order.json"
`)
	// The source produces n = 0..19; n > 15 does not match the schema.
	e.sources["orders"] = &seqSource{max: 20, batch: 20}
	e.connector("orders", `
type = "source"
key = "orders"
path = "seq"
[[streams]]
stream = "s"
topic = "t"
produces = ["order.created"]
dead_letter_topic = "bad_orders"
`)
	// The sink's type is stricter (n ≤ 9), so 10..15 pass the source and
	// fail the sink.
	e.write("small.json", `{"type":"object","required":["n"],"properties":{"n":{"type":"integer","maximum":9}}}`)
	cfg, err := os.ReadFile(filepath.Join(e.dir, "config.toml"))
	require.NoError(t, err)
	e.write("config.toml", string(cfg)+"[events.\"order.small\"]\nschema_path = \"small.json\"\n")
	sink := &collectSink{}
	e.sinks["small"] = sink
	e.connector("small", `
type = "sink"
key = "small"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
consumes = ["order.small"]
on_error = "dead_letter"
dead_letter_topic = "not_small"
`)
	rt := e.start()
	eventually(t, "the ten small orders", func() bool { return len(sink.messages()) >= 10 })
	require.Equal(t, seqRange(0, 10), sink.ns(t))

	ctx := context.Background()
	var admin *iggy.Client
	admin, err = iggy.Dial(ctx, rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	read := func(topic string, n int) []iggy.Message {
		var got []iggy.Message
		eventually(t, topic, func() bool {
			reply, err := admin.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
				Stream: iggy.NamedID("s"), Topic: iggy.NamedID(topic), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100})
			if err != nil {
				return false
			}
			got = reply.Messages
			return len(got) >= n
		})
		return got
	}
	atSource := read("bad_orders", 4)
	require.Len(t, atSource, 4, "n = 16..19 refused by the source")
	v, ok := wire.Lookup(atSource[0].Headers, HeaderDLQError)
	require.True(t, ok)
	require.Contains(t, v.String(), `event type "order.created"`)
	require.Contains(t, v.String(), "/n")
	atSink := read("not_small", 6)
	require.Len(t, atSink, 6, "n = 10..15 refused by the sink")
	v, ok = wire.Lookup(atSink[0].Headers, HeaderDLQError)
	require.True(t, ok)
	require.Contains(t, v.String(), `event type "order.small"`)
	require.Equal(t, `{"n":10}`, string(atSink[0].Payload))
}
