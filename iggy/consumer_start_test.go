package iggy_test

import (
	"context"
	"testing"

	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

func TestGroupConsumerStartAtEnd(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	admin := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, admin, 2)
	fill(t, admin, s, tp, 1, 0, 10) // partition 0 holds 0..9; partition 1 is empty

	g := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithStartAtEnd())
	require.NoError(t, g.Join(ctx))
	fill(t, admin, s, tp, 2, 10, 3) // after the start: 10..12 on p0, 0..2 on p1
	got := map[uint32][]uint64{}
	for len(got[0])+len(got[1]) < 6 {
		batch, err := g.Poll(ctx)
		require.NoError(t, err)
		for _, m := range batch.Messages {
			got[batch.Partition] = append(got[batch.Partition], m.Offset)
		}
	}
	require.Equal(t, []uint64{10, 11, 12}, got[0], "what partition 0 held before the first poll is skipped")
	require.Equal(t, []uint64{0, 1, 2}, got[1], "an empty partition starts at its first message")

	// The start was stored: a new member of the group, with nothing
	// committed on partition 0, starts there too and not at the (new) end.
	group := iggy.ConsumerGroup(iggy.NamedID("g"))
	o, err := admin.GetConsumerOffset(ctx, group, s, tp, iggy.Partition(0))
	require.NoError(t, err)
	require.EqualValues(t, 9, o.StoredOffset)
	// (An empty partition had nothing to store; what this member commits
	// there is where the group goes on.)
	require.NoError(t, g.Commit(ctx, 1, 2))
	require.NoError(t, g.Close(ctx))
	fill(t, admin, s, tp, 2, 13, 1)
	g2 := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithStartAtEnd())
	first := map[uint32]uint64{}
	for len(first) < 2 {
		batch, err := g2.Poll(ctx)
		require.NoError(t, err)
		first[batch.Partition] = batch.Messages[0].Offset
	}
	require.Equal(t, map[uint32]uint64{0: 10, 1: 3}, first)
}

func TestGroupConsumerStartAt(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	admin := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, admin, 1)
	fill(t, admin, s, tp, 1, 0, 10)

	g := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithStartAt(4))
	batch, err := g.Poll(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, batch.Messages[0].Offset)
	require.NoError(t, g.Commit(ctx, 0, 6))
	require.NoError(t, g.Close(context.Background()))

	// A group with a stored offset goes on from it whatever the option says.
	g2 := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithStartAt(2))
	batch, err = g2.Poll(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 7, batch.Messages[0].Offset)

	// An offset past the end starts at the end.
	g3, err := iggy.NewGroupConsumer(dial(t, b.Addr()), s, tp, iggy.NamedID("other"), iggy.WithCreateGroup(), iggy.WithStartAt(1000))
	require.NoError(t, err)
	t.Cleanup(func() { _ = g3.Close(context.Background()) })
	require.NoError(t, g3.Join(ctx))
	fill(t, admin, s, tp, 1, 10, 1)
	batch, err = g3.Poll(ctx)
	require.NoError(t, err)
	require.EqualValues(t, []uint64{10}, []uint64{batch.Messages[0].Offset})
}
