package iggy_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
)

// pollArrivals signals on the returned channel each time a poll request
// reaches b.
func pollArrivals(t *testing.T, b *broker.Broker) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{}, 1000)
	t.Cleanup(b.Control(wire.CmdPollMessages, func(broker.Request) broker.Action {
		select {
		case ch <- struct{}{}:
		default:
		}
		return broker.Action{}
	}))
	return ch
}

func awaitArrival(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no poll reached the broker: %s", what)
	}
}

func TestPrefetchDeliversEachMessageOnceInOrder(t *testing.T) {
	b := startBroker(t)
	c := dial(t, b.Addr())
	s, tp := newTopic(t, c, 3)
	fill(t, c, s, tp, 3, 0, 1000)
	g := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithPrefetch())
	next := map[uint32]uint64{}
	total := 0
	for total < 3000 {
		batch, err := g.Poll(testCtx(t))
		require.NoError(t, err)
		for _, m := range batch.Messages {
			require.Equal(t, next[batch.Partition], m.Offset, "partition %d", batch.Partition)
			next[batch.Partition]++
		}
		total += len(batch.Messages)
		require.NoError(t, batch.Commit(testCtx(t)))
	}
	require.Equal(t, 3000, total)
	// Caught up, the read ahead waits for data; what arrives then comes
	// next, in order.
	fill(t, c, s, tp, 3, 1000, 10)
	for total < 3030 {
		batch, err := g.Poll(testCtx(t))
		require.NoError(t, err)
		for _, m := range batch.Messages {
			require.Equal(t, next[batch.Partition], m.Offset, "partition %d", batch.Partition)
			next[batch.Partition]++
		}
		total += len(batch.Messages)
	}
	require.Equal(t, map[uint32]uint64{0: 1010, 1: 1010, 2: 1010}, next)
}

func TestPrefetchReadsTheNextBatchBeforePollIsCalled(t *testing.T) {
	b := startBroker(t)
	c := dial(t, b.Addr())
	s, tp := newTopic(t, c, 1)
	fill(t, c, s, tp, 1, 0, 300)
	g := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithPrefetch())
	require.NoError(t, g.Join(testCtx(t)))
	arrivals := pollArrivals(t, b)
	first, err := g.Poll(testCtx(t))
	require.NoError(t, err)
	require.Len(t, first.Messages, 100)
	awaitArrival(t, arrivals, "the first poll")
	awaitArrival(t, arrivals, "the read ahead, before the second Poll")
	second, err := g.Poll(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(100), second.Messages[0].Offset)
}

func TestPrefetchedBatchDroppedByCloseIsDeliveredAgain(t *testing.T) {
	b := startBroker(t)
	c := dial(t, b.Addr())
	s, tp := newTopic(t, c, 1)
	fill(t, c, s, tp, 1, 0, 300)
	g := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithPrefetch())
	require.NoError(t, g.Join(testCtx(t)))
	arrivals := pollArrivals(t, b)
	first, err := g.Poll(testCtx(t))
	require.NoError(t, err)
	require.NoError(t, first.Commit(testCtx(t)))
	awaitArrival(t, arrivals, "the first poll")
	awaitArrival(t, arrivals, "the read ahead")
	require.NoError(t, g.Close(testCtx(t)))
	_, err = g.Poll(testCtx(t))
	require.ErrorIs(t, err, iggy.ErrClosed)

	again := newGroupConsumer(t, b.Addr(), s, tp)
	batch, err := again.Poll(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(100), batch.Messages[0].Offset, "the batch read ahead was not committed")
}

func TestPrefetchKeepsWhatItReadWhenPollsContextEnds(t *testing.T) {
	b := startBroker(t)
	c := dial(t, b.Addr())
	s, tp := newTopic(t, c, 1)
	fill(t, c, s, tp, 1, 0, 100)
	g := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithPrefetch())
	first, err := g.Poll(testCtx(t))
	require.NoError(t, err)
	require.Len(t, first.Messages, 100)
	// Nothing more yet: the read ahead waits, and a Poll that gives up
	// leaves it running.
	short, cancel := context.WithTimeout(testCtx(t), 50*time.Millisecond)
	_, err = g.Poll(short)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	fill(t, c, s, tp, 1, 100, 5)
	batch, err := g.Poll(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(100), batch.Messages[0].Offset)
	require.Len(t, batch.Messages, 5)
}

func TestPrefetchReturnsALostConnectionAndResumesFromTheGroupsOffset(t *testing.T) {
	b := startBroker(t)
	c := dial(t, b.Addr())
	s, tp := newTopic(t, c, 1)
	fill(t, c, s, tp, 1, 0, 300)
	g := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithPrefetch())
	require.NoError(t, g.Join(testCtx(t)))
	var polls atomic.Int32
	t.Cleanup(b.Control(wire.CmdPollMessages, func(broker.Request) broker.Action {
		if polls.Add(1) == 2 {
			return broker.Action{Drop: true} // the read ahead's connection goes
		}
		return broker.Action{}
	}))
	first, err := g.Poll(testCtx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(0), first.Messages[0].Offset)
	var batch *iggy.Batch
	for {
		batch, err = g.Poll(testCtx(t))
		if err == nil {
			break
		}
		require.True(t, errors.Is(err, iggy.ErrConnection), "poll: %v", err)
	}
	require.Equal(t, uint64(0), batch.Messages[0].Offset, "read again from the group's offset: nothing was committed")
}

func TestPrefetchRefusesAutoCommit(t *testing.T) {
	b := startBroker(t)
	c := dial(t, b.Addr())
	_, err := iggy.NewGroupConsumer(c, iggy.NamedID("s"), iggy.NamedID("t"), iggy.NamedID("g"),
		iggy.WithPrefetch(), iggy.WithAutoCommit())
	require.ErrorContains(t, err, "WithPrefetch and WithAutoCommit")
}
