package broker_test

import (
	"sort"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

type groupFixture struct {
	sid, tid wire.Identifier
	gid      uint32
	ref      *wire.GroupRef
}

func newGroup(t *testing.T, c *rawclient.Client, parts uint32) groupFixture {
	t.Helper()
	sid, tid := setup(t, c, parts)
	gd := decodeAs[wire.GroupDetails](t, ok(t, do(t, c, wire.CmdCreateConsumerGroup, &wire.CreateConsumerGroup{Stream: sid, Topic: tid, Name: "workers"})))
	return groupFixture{sid, tid, gd.ID, &wire.GroupRef{Stream: sid, Topic: tid, Group: wire.NumericID(gd.ID)}}
}

func (f groupFixture) sync(t *testing.T, c *rawclient.Client) wire.SyncGroupReply {
	t.Helper()
	body := ok(t, do(t, c, wire.CmdSyncConsumerGroup, f.ref))
	require.NotEmpty(t, body, "not a member")
	return decodeAs[wire.SyncGroupReply](t, body)
}

func (f groupFixture) poll(t *testing.T, c *rawclient.Client, part uint32, count uint32, commit bool) wire.PollReply {
	t.Helper()
	return poll(t, c, wire.PollMessages{
		Consumer: groupConsumer(f.gid), Stream: f.sid, Topic: f.tid, Partition: wire.Partition(part),
		Strategy: wire.Next(), Count: count, AutoCommit: commit,
	})
}

func (f groupFixture) store(t *testing.T, c *rawclient.Client, part uint32, off uint64) *rawclient.Reply {
	t.Helper()
	return do(t, c, wire.CmdStoreConsumerOffset, &wire.StoreConsumerOffset{ConsumerOffsetRef: wire.ConsumerOffsetRef{
		Consumer: groupConsumer(f.gid), Stream: f.sid, Topic: f.tid, Partition: wire.Partition(part)}, Offset: off, Ack: 1})
}

func (f groupFixture) details(t *testing.T, c *rawclient.Client) wire.GroupDetails {
	t.Helper()
	return decodeAs[wire.GroupDetails](t, ok(t, do(t, c, wire.CmdGetConsumerGroup, f.ref)))
}

// requirePartition checks that the assignments are disjoint and cover 0..n-1.
func requirePartition(t *testing.T, n int, assignments ...[]uint32) {
	t.Helper()
	var all []uint32
	for _, a := range assignments {
		all = append(all, a...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	want := make([]uint32, n)
	for i := range want {
		want[i] = uint32(i)
	}
	require.Equal(t, want, all, "assignments must be disjoint and cover every partition")
}

func TestGroupThreeMembersAndTakeover(t *testing.T) {
	t.Parallel()
	b, admin := start(t)
	f := newGroup(t, admin, 6)
	members := []*rawclient.Client{login(t, b), login(t, b), login(t, b)}
	var lastGen uint64
	for i, m := range members {
		ok(t, do(t, m, wire.CmdJoinConsumerGroup, f.ref))
		ok(t, do(t, m, wire.CmdJoinConsumerGroup, f.ref)) // idempotent
		gen := f.sync(t, m).Generation
		require.Greater(t, gen, lastGen, "member %d: a join bumps the generation", i)
		lastGen = gen
	}
	var assigned [][]uint32
	for _, m := range members {
		s := f.sync(t, m)
		require.Equal(t, lastGen, s.Generation)
		require.Len(t, s.Partitions, 2)
		assigned = append(assigned, s.Partitions)
	}
	requirePartition(t, 6, assigned...)
	require.Len(t, f.details(t, admin).Members, 3)
	require.Empty(t, ok(t, do(t, admin, wire.CmdSyncConsumerGroup, f.ref)), "a non-member syncs empty")

	for p := uint32(0); p < 6; p++ {
		send(t, admin, f.sid, f.tid, wire.ToPartition(p), numbered("p"+itoa(uint64(p))+"-", 0, 3)...)
	}
	for i, m := range members {
		for _, p := range assigned[i] {
			r := f.poll(t, m, p, 2, true)
			require.Equal(t, p, r.PartitionID)
			require.Equal(t, []uint64{0, 1}, offsetsOf(r))
		}
	}
	// The fence: another member's partition gives the resync sentinel.
	foreign := f.poll(t, members[0], assigned[1][0], 2, true)
	require.Equal(t, wire.PollResync, foreign.PartitionID)
	require.Empty(t, foreign.Messages)
	denied(t, f.store(t, members[0], assigned[1][0], 0), 20)

	// Member 1 leaves: the others take its partitions over and resume
	// after its committed offsets.
	ok(t, do(t, members[1], wire.CmdLeaveConsumerGroup, f.ref))
	committed(t, do(t, members[1], wire.CmdLeaveConsumerGroup, f.ref), wire.ErrConsumerGroupMemberNotFound.Code)
	s0, s2 := f.sync(t, members[0]), f.sync(t, members[2])
	require.Greater(t, s0.Generation, lastGen)
	requirePartition(t, 6, s0.Partitions, s2.Partitions)
	for _, m := range []struct {
		c     *rawclient.Client
		parts []uint32
	}{{members[0], s0.Partitions}, {members[2], s2.Partitions}} {
		for _, p := range m.parts {
			r := f.poll(t, m.c, p, 5, true)
			require.Equal(t, []uint64{2}, offsetsOf(r), "partition %d resumes after the committed offset", p)
		}
	}
}

func TestGroupPendingRevocation(t *testing.T) {
	t.Parallel()
	b, admin := start(t)
	f := newGroup(t, admin, 2)
	a, bm := login(t, b), login(t, b)
	ok(t, do(t, a, wire.CmdJoinConsumerGroup, f.ref))
	require.Equal(t, []uint32{0, 1}, f.sync(t, a).Partitions)
	send(t, admin, f.sid, f.tid, wire.ToPartition(1), "x", "y", "z")
	r := f.poll(t, a, 1, 2, false) // in flight: polled up to 1, nothing committed
	require.Equal(t, []uint64{0, 1}, offsetsOf(r))

	ok(t, do(t, bm, wire.CmdJoinConsumerGroup, f.ref))
	sa := f.sync(t, a)
	require.Equal(t, []uint32{0}, sa.Partitions, "partition 1 is pending revocation")
	require.Empty(t, f.sync(t, bm).Partitions, "not yet handed over")
	require.Equal(t, wire.PollResync, f.poll(t, a, 1, 1, false).PartitionID)
	require.Equal(t, wire.PollResync, f.poll(t, bm, 1, 1, false).PartitionID)
	details := f.details(t, admin)
	require.Len(t, details.Members, 2)

	ok(t, f.store(t, a, 1, 0)) // the old owner may still commit, but 0 < 1
	require.Empty(t, f.sync(t, bm).Partitions)
	ok(t, f.store(t, a, 1, 1)) // committed what it polled: handed over
	sb := f.sync(t, bm)
	require.Equal(t, []uint32{1}, sb.Partitions)
	require.Greater(t, sb.Generation, sa.Generation)
	require.Equal(t, []uint64{2}, offsetsOf(f.poll(t, bm, 1, 5, true)))
	denied(t, f.store(t, a, 1, 2), 20) // no longer the owner
}

func TestGroupRevocationTimeout(t *testing.T) {
	t.Parallel()
	b, admin := start(t, brokertest.InMemory(), brokertest.Config(func(c *broker.Config) {
		c.RebalancingTimeout = 100 * time.Millisecond
	}))
	f := newGroup(t, admin, 2)
	a, bm := login(t, b), login(t, b)
	ok(t, do(t, a, wire.CmdJoinConsumerGroup, f.ref))
	send(t, admin, f.sid, f.tid, wire.ToPartition(1), "x")
	f.poll(t, a, 1, 1, false)
	ok(t, do(t, bm, wire.CmdJoinConsumerGroup, f.ref))
	require.Empty(t, f.sync(t, bm).Partitions)
	require.Eventually(t, func() bool {
		return len(f.sync(t, bm).Partitions) == 1
	}, 10*time.Second, 20*time.Millisecond, "the revocation completes after the timeout")
	require.Equal(t, []uint64{0}, offsetsOf(f.poll(t, bm, 1, 5, false)), "nothing was committed: redelivered")
}

func TestGroupMembershipEndsWithTheSession(t *testing.T) {
	t.Parallel()
	b, admin := start(t, brokertest.InMemory())
	f := newGroup(t, admin, 4)
	a, bm := login(t, b), login(t, b)
	ok(t, do(t, a, wire.CmdJoinConsumerGroup, f.ref))
	ok(t, do(t, bm, wire.CmdJoinConsumerGroup, f.ref))
	me := decodeAs[wire.ClientInfo](t, ok(t, do(t, a, wire.CmdGetMe, nil)))
	require.Equal(t, []wire.ClientGroup{{Stream: 0, Topic: 0, Group: f.gid}}, me.Groups)

	ok(t, do(t, a, wire.CmdLogoutUser, nil))
	require.Len(t, f.details(t, admin).Members, 1, "logout leaves every group")
	require.Equal(t, []uint32{0, 1, 2, 3}, f.sync(t, bm).Partitions)

	c := login(t, b)
	ok(t, do(t, c, wire.CmdJoinConsumerGroup, f.ref))
	require.Len(t, f.details(t, admin).Members, 2)
	c.Close()
	require.Eventually(t, func() bool { return len(f.details(t, admin).Members) == 1 },
		10*time.Second, 10*time.Millisecond, "a disconnect leaves every group")
	require.Equal(t, []uint32{0, 1, 2, 3}, f.sync(t, bm).Partitions)

	ok(t, do(t, admin, wire.CmdDeleteConsumerGroup, f.ref))
	me = decodeAs[wire.ClientInfo](t, ok(t, do(t, bm, wire.CmdGetMe, nil)))
	require.Empty(t, me.Groups)
}

func TestStaleMemberIsEvicted(t *testing.T) {
	t.Parallel()
	b, admin := start(t, brokertest.InMemory(), brokertest.Config(func(c *broker.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
	}))
	f := newGroup(t, admin, 1)
	idle := login(t, b) // silent but in no group: never evicted
	m := login(t, b)
	ok(t, do(t, m, wire.CmdJoinConsumerGroup, f.ref))
	rep, err := m.ReadWithin(10 * time.Second)
	require.NoError(t, err)
	require.NotNil(t, rep.Eviction)
	require.Equal(t, wire.EvictStaleClient, rep.Eviction.Reason)
	_, err = m.Read()
	require.Error(t, err)
	require.NotErrorIs(t, err, rawclient.ErrTimeout, "the connection is closed")
	require.Eventually(t, func() bool { return len(f.details(t, admin).Members) == 0 },
		10*time.Second, 10*time.Millisecond)
	require.Empty(t, ok(t, do(t, idle, wire.CmdPing, nil)))
}
