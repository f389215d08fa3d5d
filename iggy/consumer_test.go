package iggy_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
)

// fill sends n messages to each partition, payload "p<partition>-<offset>".
func fill(t *testing.T, c *iggy.Client, s, tp iggy.Identifier, partitions, from, n int) {
	t.Helper()
	for p := range partitions {
		msgs := make([]iggy.Message, n)
		for i := range msgs {
			msgs[i].Payload = fmt.Appendf(nil, "p%d-%d", p, from+i)
		}
		_, err := c.SendMessages(testCtx(t), s, tp, iggy.ToPartition(uint32(p)), msgs)
		require.NoError(t, err)
	}
}

func newGroupConsumer(t *testing.T, addr string, s, tp iggy.Identifier, opts ...iggy.ConsumerOption) *iggy.GroupConsumer {
	t.Helper()
	c := dial(t, addr)
	opts = append([]iggy.ConsumerOption{iggy.WithCreateGroup(), iggy.WithPollInterval(5 * time.Millisecond),
		iggy.WithResyncInterval(50 * time.Millisecond), iggy.WithPollCount(100)}, opts...)
	g, err := iggy.NewGroupConsumer(c, s, tp, iggy.NamedID("g"), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = g.Close(context.Background()) })
	return g
}

// delivery is one message handed out by a consumer.
type delivery struct {
	member    int
	partition uint32
	offset    uint64
}

// consumeUntil polls with every member until done says stop, recording
// what each one received.
func consumeUntil(t *testing.T, members map[int]*iggy.GroupConsumer, done func([]delivery) bool) []delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []delivery
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var once sync.Once
	for id, g := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
				b, err := g.Poll(pctx)
				pcancel()
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					continue
				}
				mu.Lock()
				for _, m := range b.Messages {
					require.Equal(t, fmt.Sprintf("p%d-%d", b.Partition, m.Offset), string(m.Payload))
					got = append(got, delivery{id, b.Partition, m.Offset})
				}
				if done(got) {
					once.Do(func() { close(stop) })
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "consumers did not finish: got %d deliveries", len(got))
	return got
}

func TestGroupConsumersShareAndTakeOver(t *testing.T) {
	t.Parallel()
	b := startBrokerWith(t, broker.Config{RebalancingTimeout: 300 * time.Millisecond})
	admin := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, admin, 6)
	fill(t, admin, s, tp, 6, 0, 10)

	members := map[int]*iggy.GroupConsumer{}
	for i := range 3 {
		members[i] = newGroupConsumer(t, b.Addr(), s, tp)
		require.NoError(t, members[i].Join(ctx))
	}
	details, err := admin.GetConsumerGroup(ctx, s, tp, iggy.NamedID("g"))
	require.NoError(t, err)
	require.Len(t, details.Members, 3)
	owned := map[uint32]bool{}
	for _, m := range details.Members {
		require.Len(t, m.Partitions, 2, "member %d", m.ID)
		for _, p := range m.Partitions {
			require.False(t, owned[p], "partition %d assigned twice", p)
			owned[p] = true
		}
	}

	// Phase 1: every message once, each partition read by one member.
	got := consumeUntil(t, members, func(d []delivery) bool { return len(d) >= 60 })
	require.Len(t, got, 60, "no message twice")
	reader := map[uint32]int{}
	for _, d := range got {
		if r, ok := reader[d.partition]; ok {
			require.Equal(t, r, d.member, "partition %d read by two members", d.partition)
		}
		reader[d.partition] = d.member
	}
	require.Len(t, reader, 6)

	// Each member commits offset 4 of its partitions: it finished 0..4.
	for p, m := range reader {
		require.NoError(t, members[m].Commit(ctx, p, 4))
	}
	var leaverParts []uint32
	for p, m := range reader {
		if m == 2 {
			leaverParts = append(leaverParts, p)
		}
	}
	require.NoError(t, members[2].Close(ctx))
	delete(members, 2)

	// Phase 2: the two left take over; a partition that changed hands
	// resumes after the committed offset 4.
	fill(t, admin, s, tp, 6, 10, 5)
	got = consumeUntil(t, members, func(d []delivery) bool {
		seen := map[uint32]bool{}
		for _, x := range d {
			if x.offset == 14 {
				seen[x.partition] = true
			}
		}
		return len(seen) == 6
	})
	first := map[uint32]uint64{}
	newReader := map[uint32]int{}
	perPartition := map[uint32][]uint64{}
	for _, d := range got {
		if _, ok := first[d.partition]; !ok {
			first[d.partition] = d.offset
			newReader[d.partition] = d.member
		}
		perPartition[d.partition] = append(perPartition[d.partition], d.offset)
	}
	for _, p := range leaverParts {
		require.EqualValues(t, 5, first[p], "partition %d resumes after the leaver's commit", p)
	}
	for p, offs := range perPartition {
		if newReader[p] == reader[p] {
			require.EqualValues(t, 10, first[p], "partition %d kept its reader, who had read to 9", p)
		} else {
			require.EqualValues(t, 5, first[p], "partition %d changed hands", p)
		}
		require.Equal(t, offs[len(offs)-1], uint64(14))
		// The reader after the handover delivered each offset once.
		require.Len(t, offs, int(15-first[p]), "partition %d: %v", p, offs)
	}
	details, err = admin.GetConsumerGroup(ctx, s, tp, iggy.NamedID("g"))
	require.NoError(t, err)
	require.Len(t, details.Members, 2)
	for _, m := range details.Members {
		require.Len(t, m.Partitions, 3, "six partitions shared by two")
	}
}

func TestGroupConsumerCommitsOnlyWhatTheCallerCommits(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	admin := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, admin, 1)
	fill(t, admin, s, tp, 1, 0, 10)

	g := newGroupConsumer(t, b.Addr(), s, tp)
	batch, err := g.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, batch.Messages, 10)
	require.EqualValues(t, 9, batch.LastOffset())

	group := iggy.ConsumerGroup(iggy.NamedID("g"))
	_, err = admin.GetConsumerOffset(ctx, group, s, tp, iggy.Partition(0))
	require.ErrorIs(t, err, iggy.ErrConsumerOffsetNotFound, "polling stores nothing")

	require.NoError(t, g.Commit(ctx, 0, 3))
	o, err := admin.GetConsumerOffset(ctx, group, s, tp, iggy.Partition(0))
	require.NoError(t, err)
	require.EqualValues(t, 3, o.StoredOffset, "exactly what the caller committed")
	err = g.Commit(ctx, 0, 10)
	require.ErrorIs(t, err, iggy.ErrInvalidOffset)
	require.ErrorContains(t, err, "only offsets below 10 were delivered")
	o, err = admin.GetConsumerOffset(ctx, group, s, tp, iggy.Partition(0))
	require.NoError(t, err)
	require.EqualValues(t, 3, o.StoredOffset)

	// Polling further does not move the committed offset either.
	fill(t, admin, s, tp, 1, 10, 5)
	batch, err = g.Poll(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 10, batch.Messages[0].Offset, "reads ahead from its own position")
	o, err = admin.GetConsumerOffset(ctx, group, s, tp, iggy.Partition(0))
	require.NoError(t, err)
	require.EqualValues(t, 3, o.StoredOffset)
	require.NoError(t, g.Close(ctx))
	require.NoError(t, g.Close(ctx), "idempotent")
	_, err = g.Poll(ctx)
	require.ErrorIs(t, err, iggy.ErrClosed)

	// A new member starts after the committed offset: 4..14 come again.
	g2 := newGroupConsumer(t, b.Addr(), s, tp)
	batch, err = g2.Poll(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 4, batch.Messages[0].Offset)
	require.NoError(t, batch.Commit(ctx))
	o, err = admin.GetConsumerOffset(ctx, group, s, tp, iggy.Partition(0))
	require.NoError(t, err)
	require.Equal(t, batch.LastOffset(), o.StoredOffset)
}

func TestGroupConsumerAutoCommit(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	admin := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, admin, 2)
	fill(t, admin, s, tp, 2, 0, 3)
	g := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithAutoCommit())
	batch, err := g.Poll(ctx)
	require.NoError(t, err)
	o, err := admin.GetConsumerOffset(ctx, iggy.ConsumerGroup(iggy.NamedID("g")), s, tp, iggy.Partition(batch.Partition))
	require.NoError(t, err)
	require.Equal(t, batch.LastOffset(), o.StoredOffset)
}

func TestGroupConsumerGroupMustExist(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)
	g, err := iggy.NewGroupConsumer(c, s, tp, iggy.NamedID("absent"))
	require.NoError(t, err)
	_, err = g.Poll(ctx)
	require.ErrorIs(t, err, iggy.ErrConsumerGroupNotFound)

	_, err = iggy.NewGroupConsumer(c, s, tp, iggy.NumericID(3), iggy.WithCreateGroup())
	require.ErrorContains(t, err, "needs the group by name")
	_, err = iggy.NewGroupConsumer(c, s, tp, iggy.NamedID("g"), iggy.WithPollCount(0))
	require.ErrorContains(t, err, "must be positive")
}

func TestGroupConsumerAfterReconnect(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	admin := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, admin, 2)
	fill(t, admin, s, tp, 2, 0, 5)
	g := newGroupConsumer(t, b.Addr(), s, tp)
	first, err := g.Poll(ctx)
	require.NoError(t, err)
	require.NoError(t, first.Commit(ctx))

	// The broker drops the consumer's connection on its next poll.
	b.ControlOnce(wire.CmdPollMessages, func(broker.Request) broker.Action { return broker.Action{Drop: true} })
	var batches []*iggy.Batch
	for len(batches) < 1 {
		batch, err := g.Poll(ctx)
		if err != nil {
			require.ErrorIs(t, err, iggy.ErrConnection)
			continue
		}
		batches = append(batches, batch)
	}
	// The new session rejoined; the committed partition has nothing new,
	// the other is read from its start again.
	got := map[uint32][]uint64{}
	for _, batch := range batches {
		for _, m := range batch.Messages {
			got[batch.Partition] = append(got[batch.Partition], m.Offset)
		}
	}
	require.NotContains(t, got, first.Partition)
	require.Len(t, got, 1)
	for p, offs := range got {
		require.Equal(t, []uint64{0, 1, 2, 3, 4}, offs, "partition %d", p)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = g.Poll(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing committed is delivered again")
	_, parts := g.Assignment()
	require.True(t, slices.Equal(parts, []uint32{0, 1}) || slices.Equal(parts, []uint32{1, 0}))
}

func TestGroupConsumerRereadsUncommittedAfterConnectionLoss(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	admin := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, admin, 1)
	fill(t, admin, s, tp, 1, 0, 10)
	g := newGroupConsumer(t, b.Addr(), s, tp)
	first, err := g.Poll(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(9), first.LastOffset()) // read ahead, nothing committed
	fill(t, admin, s, tp, 1, 10, 5)

	// The connection drops on the next poll. The very next batch must start
	// at the committed offset (none: 0), not at this member's read-ahead
	// position, whether or not the client has reconnected by then.
	b.ControlOnce(wire.CmdPollMessages, func(broker.Request) broker.Action { return broker.Action{Drop: true} })
	_, err = g.Poll(ctx)
	require.ErrorIs(t, err, iggy.ErrConnection)
	var batch *iggy.Batch
	for batch == nil {
		if batch, err = g.Poll(ctx); err != nil {
			require.ErrorIs(t, err, iggy.ErrConnection)
		}
	}
	require.Equal(t, uint64(0), batch.Messages[0].Offset, "uncommitted messages are delivered again")
}

// A Close whose context ends before the leave is sent must not leave the
// member in the group for good: a later Close sends the leave.
func TestGroupConsumerCloseRetriesTheLeave(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	admin := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, admin, 1)
	g := newGroupConsumer(t, b.Addr(), s, tp)
	require.NoError(t, g.Join(ctx))
	members := func() int {
		d, err := admin.GetConsumerGroup(ctx, s, tp, iggy.NamedID("g"))
		require.NoError(t, err)
		return len(d.Members)
	}
	require.Equal(t, 1, members())

	expired, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, g.Close(expired), context.Canceled)
	require.Equal(t, 1, members(), "the leave was not sent")
	_, err := g.Poll(ctx)
	require.ErrorIs(t, err, iggy.ErrClosed, "closed even though the leave is still to do")

	require.NoError(t, g.Close(ctx))
	require.Equal(t, 0, members(), "the second Close did not leave the group")
	require.NoError(t, g.Close(ctx), "idempotent once left")
}

// A commit on a partition a rebalance gave to another member fails with
// ErrConsumerGroupPartitionNotOwned naming the partition, not with a bare
// "resource not found".
func TestGroupConsumerCommitAfterRebalance(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	admin := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, admin, 2)
	fill(t, admin, s, tp, 2, 0, 3)
	g1 := newGroupConsumer(t, b.Addr(), s, tp, iggy.WithResyncInterval(time.Hour))
	var batch *iggy.Batch
	for batch == nil || batch.Partition != 1 {
		var err error
		batch, err = g1.Poll(ctx)
		require.NoError(t, err)
	}
	g2 := newGroupConsumer(t, b.Addr(), s, tp)
	require.NoError(t, g2.Join(ctx))
	// A repartition resets the assignment round robin: partition 1 is g2's.
	require.NoError(t, admin.CreatePartitions(ctx, s, tp, 1))

	err := batch.Commit(ctx)
	require.ErrorIs(t, err, iggy.ErrConsumerGroupPartitionNotOwned)
	require.ErrorIs(t, err, iggy.ErrResourceNotFound, "the server's error is kept")
	require.ErrorContains(t, err, "partition 1")
	_, parts := g1.Assignment()
	require.Contains(t, parts, uint32(1), "the assignment is re-read at the next poll, not by Commit")
	require.NoError(t, g1.Commit(ctx, 0, 0), "a partition it still owns")
	// The next poll re-reads the assignment.
	fill(t, admin, s, tp, 3, 3, 2)
	next, err := g1.Poll(ctx)
	require.NoError(t, err)
	require.NotEqual(t, uint32(1), next.Partition)
	_, parts = g1.Assignment()
	require.NotContains(t, parts, uint32(1))
}
