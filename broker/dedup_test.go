package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

// With deduplication on, a batch sent again with the same ids appends only
// the messages not seen before, and an id repeated in one batch once; ids
// pushed out by max_entries, or past the expiry, are appended again.
func TestMessageDeduplication(t *testing.T) {
	b := brokertest.Start(t, brokertest.InMemory(), brokertest.Config(func(c *broker.Config) {
		c.Dedup = broker.Dedup{MaxEntries: 3}
	}))
	ctx := context.Background()
	c, err := iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("s"), "t", 1)
	require.NoError(t, err)
	msg := func(id byte, p string) iggy.Message { return iggy.Message{ID: [16]byte{id}, Payload: []byte(p)} }
	send := func(msgs ...iggy.Message) {
		t.Helper()
		_, err := c.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), msgs)
		require.NoError(t, err)
	}
	payloads := func() []string {
		r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("s"),
			Topic: iggy.NamedID("t"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100})
		require.NoError(t, err)
		var out []string
		for i, m := range r.Messages {
			require.Equal(t, uint64(i), m.Offset, "offsets stay dense")
			out = append(out, string(m.Payload))
		}
		return out
	}
	send(msg(1, "a"), msg(2, "b"))
	send(msg(1, "a again"), msg(2, "b again")) // a replay: nothing appended
	send(msg(2, "b"), msg(3, "c"), msg(3, "c twice"))
	require.Equal(t, []string{"a", "b", "c"}, payloads())
	send(msg(4, "d")) // pushes id 1 out of the three remembered
	send(msg(1, "a, forgotten"), msg(0, "no id"), msg(0, "no id"))
	require.Equal(t, []string{"a", "b", "c", "d", "a, forgotten", "no id", "no id"}, payloads())
}

func TestMessageDeduplicationExpires(t *testing.T) {
	b := brokertest.Start(t, brokertest.InMemory(), brokertest.Config(func(c *broker.Config) {
		c.Dedup = broker.Dedup{MaxEntries: 100, Expiry: 50 * time.Millisecond}
	}))
	ctx := context.Background()
	c, err := iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("s"), "t", 1)
	require.NoError(t, err)
	m := []iggy.Message{{ID: [16]byte{9}, Payload: []byte("x")}}
	_, err = c.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), m)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond) // past the expiry: a lower bound, not a measurement
	_, err = c.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), m)
	require.NoError(t, err)
	r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("s"),
		Topic: iggy.NamedID("t"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
	require.NoError(t, err)
	require.Len(t, r.Messages, 2, "an expired id is appended again")
}
