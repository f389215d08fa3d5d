package iggybench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

// Both poll modes read back every message sent, and the run leaves no
// stream behind.
func TestRunSendsAndPollsEveryMessage(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	for _, o := range []Options{
		{Messages: 5000, Size: 64, Batch: 300, Partitions: 3, Producers: 2, Consumers: 2, Poll: PollPartition},
		{Messages: 4321, Size: 1024, Batch: 500, Partitions: 2, Producers: 3, Consumers: 2, Poll: PollGroup},
	} {
		o.Address = b.Addr()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		send, poll, err := Run(ctx, o)
		cancel()
		require.NoError(t, err, "%+v", o)
		require.Equal(t, o.Messages, send.Messages)
		require.Equal(t, o.Messages, poll.Messages, "%s: every message polled once", o.Poll)
		require.Equal(t, int64(o.Messages*o.Size), poll.Bytes)
		require.Positive(t, send.Elapsed)
		require.Positive(t, poll.MessagesPerSecond())
	}
	c, err := iggy.Dial(context.Background(), b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer c.Close()
	streams, err := c.ListStreams(context.Background())
	require.NoError(t, err)
	for _, s := range streams {
		require.False(t, strings.HasPrefix(s.Name, "ferry-bench-"), "stream %s left behind", s.Name)
	}
}

func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{},
		{Address: "x", Size: -1},
		{Address: "x", Poll: "both"},
		{Address: "x", Consumers: 3, Partitions: 2},
		{Address: "x", Producers: 1000},
	} {
		require.Error(t, o.Check(), "%+v", o)
	}
	o := Options{Address: "x"}
	require.NoError(t, o.Check())
	require.Equal(t, Options{Address: "x", Username: "iggy", Password: "iggy", Size: 100, Batch: 1000, Messages: 1_000_000,
		Partitions: 1, Producers: 1, Consumers: 1, Poll: PollPartition}, o)
}
