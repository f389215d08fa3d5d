package iggy_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
)

// requireIggyError checks that err is an *iggy.Error for cmd matching target.
func requireIggyError(t *testing.T, err error, cmd wire.Command, target error) {
	t.Helper()
	require.ErrorIs(t, err, target)
	var ie *iggy.Error
	require.ErrorAs(t, err, &ie)
	require.Equal(t, cmd, ie.Command)
}

func TestStreams(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)

	l, err := c.ListStreams(ctx)
	require.NoError(t, err)
	require.NotNil(t, l)
	require.Empty(t, l)

	s, err := c.CreateStream(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, "orders", s.Name)
	require.Zero(t, s.TopicsCount)

	_, err = c.CreateStream(ctx, "orders")
	requireIggyError(t, err, wire.CmdCreateStream, iggy.ErrStreamNameAlreadyExists)

	got, err := c.GetStream(ctx, iggy.NamedID("orders"))
	require.NoError(t, err)
	require.Equal(t, s.ID, got.ID)
	got, err = c.GetStream(ctx, iggy.NumericID(s.ID))
	require.NoError(t, err)
	require.Equal(t, "orders", got.Name)

	_, err = c.GetStream(ctx, iggy.NamedID("missing"))
	requireIggyError(t, err, wire.CmdGetStream, iggy.ErrStreamNotFound)
	_, err = c.GetStream(ctx, iggy.NumericID(999))
	requireIggyError(t, err, wire.CmdGetStream, iggy.ErrStreamNotFound)

	require.NoError(t, c.UpdateStream(ctx, iggy.NumericID(s.ID), "orders-v2"))
	got, err = c.GetStream(ctx, iggy.NumericID(s.ID))
	require.NoError(t, err)
	require.Equal(t, "orders-v2", got.Name)
	require.ErrorIs(t, c.UpdateStream(ctx, iggy.NumericID(999), "x"), iggy.ErrStreamNotFound)

	_, err = c.CreateTopic(ctx, iggy.NumericID(s.ID), "t", 1)
	require.NoError(t, err)
	_, err = c.SendMessages(ctx, iggy.NumericID(s.ID), iggy.NamedID("t"), iggy.ToPartition(0), payloads("m", 3))
	require.NoError(t, err)
	require.NoError(t, c.PurgeStream(ctx, iggy.NumericID(s.ID)))
	r, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NumericID(s.ID), Topic: iggy.NamedID("t"),
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10,
	})
	require.NoError(t, err)
	require.Empty(t, r.Messages)
	require.ErrorIs(t, c.PurgeStream(ctx, iggy.NumericID(999)), iggy.ErrStreamNotFound)

	l, err = c.ListStreams(ctx)
	require.NoError(t, err)
	require.Len(t, l, 1)
	require.Equal(t, "orders-v2", l[0].Name)
	require.EqualValues(t, 1, l[0].TopicsCount)

	require.NoError(t, c.DeleteStream(ctx, iggy.NumericID(s.ID)))
	requireIggyError(t, c.DeleteStream(ctx, iggy.NumericID(s.ID)), wire.CmdDeleteStream, iggy.ErrStreamNotFound)
	_, err = c.GetStream(ctx, iggy.NumericID(s.ID))
	require.ErrorIs(t, err, iggy.ErrStreamNotFound)

	// Bad input is refused before anything is sent.
	_, err = c.CreateStream(ctx, "")
	require.ErrorContains(t, err, "stream name must be 1..255 bytes")
	_, err = c.GetStream(ctx, iggy.Identifier{})
	require.ErrorContains(t, err, "stream id")
}

func TestTopics(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, err := c.CreateStream(ctx, "s")
	require.NoError(t, err)
	sid := iggy.NumericID(s.ID)

	tp, err := c.CreateTopic(ctx, sid, "events", 3,
		iggy.TopicCompression(iggy.CompressionGzip),
		iggy.TopicMessageExpiry(time.Hour),
		iggy.TopicSegmentSize(1<<20),
		iggy.TopicMaxSize(10<<20),
		iggy.TopicEnforceFsync(true),
		iggy.TopicRawOption(wire.OptMessagesRequiredToSave, iggy.Uint32Value(7)),
	)
	require.NoError(t, err)
	require.Equal(t, "events", tp.Name)
	require.EqualValues(t, 3, tp.PartitionsCount)
	require.Len(t, tp.Partitions, 3)
	require.Equal(t, wire.CompressionGzip, tp.Compression)
	require.EqualValues(t, time.Hour/time.Microsecond, tp.MessageExpiry)
	require.EqualValues(t, 10<<20, tp.MaxTopicSize)

	got, err := c.GetTopic(ctx, sid, iggy.NamedID("events"))
	require.NoError(t, err)
	require.Equal(t, tp.ID, got.ID)
	for key, want := range map[string]string{
		wire.OptCompression: "gzip", wire.OptSegmentSize: "1048576", wire.OptEnforceFsync: "true",
		wire.OptMessagesRequiredToSave: "7", wire.OptMessageExpiry: "3600000000",
	} {
		v, ok := wire.Lookup(got.Explicit, key)
		require.True(t, ok, "explicit option %s", key)
		require.Equal(t, want, v.String(), key)
	}
	_, ok := wire.Lookup(got.Derived, wire.OptPreallocateSegments)
	require.True(t, ok)

	// A key given twice keeps its last value.
	tp2, err := c.CreateTopic(ctx, sid, "twice", 1, iggy.TopicEnforceFsync(true), iggy.TopicEnforceFsync(false))
	require.NoError(t, err)
	v, ok := tp2.Option(wire.OptEnforceFsync)
	require.True(t, ok)
	require.Equal(t, "false", v.String())

	_, err = c.CreateTopic(ctx, sid, "events", 1)
	requireIggyError(t, err, wire.CmdCreateTopic, iggy.ErrTopicNameAlreadyExists)
	_, err = c.CreateTopic(ctx, iggy.NumericID(99), "x", 1)
	require.ErrorIs(t, err, iggy.ErrStreamNotFound)
	_, err = c.CreateTopic(ctx, sid, "bad-key", 1, iggy.TopicRawOption("not_a_real_option", iggy.StringValue("x")))
	requireIggyError(t, err, wire.CmdCreateTopic, iggy.ErrUnsupportedOptionKey)
	_, err = c.CreateTopic(ctx, sid, "bad-value", 1, iggy.TopicSegmentSize(1048577))
	requireIggyError(t, err, wire.CmdCreateTopic, iggy.ErrInvalidOptionValue)
	_, err = c.CreateTopic(ctx, sid, "bad-kind", 1, iggy.TopicRawOption(wire.OptSegmentSize, iggy.Value{Kind: wire.KindUint64, Data: []byte{1}}))
	require.ErrorContains(t, err, "option segment_size")

	_, err = c.GetTopic(ctx, sid, iggy.NamedID("missing"))
	requireIggyError(t, err, wire.CmdGetTopic, iggy.ErrTopicNotFound)
	_, err = c.GetTopic(ctx, iggy.NumericID(99), iggy.NumericID(0))
	require.ErrorIs(t, err, iggy.ErrTopicNotFound)

	l, err := c.ListTopics(ctx, sid)
	require.NoError(t, err)
	require.Len(t, l, 2)
	l, err = c.ListTopics(ctx, iggy.NumericID(99))
	require.NoError(t, err)
	require.Empty(t, l)

	tid := iggy.NumericID(tp.ID)
	require.NoError(t, c.UpdateTopic(ctx, sid, tid, "events-v2", iggy.TopicMessageExpiry(2*time.Hour)))
	got, err = c.GetTopic(ctx, sid, tid)
	require.NoError(t, err)
	require.Equal(t, "events-v2", got.Name)
	require.EqualValues(t, 2*time.Hour/time.Microsecond, got.MessageExpiry)
	err = c.UpdateTopic(ctx, sid, tid, "events-v2", iggy.TopicSegmentSize(2<<20))
	require.ErrorIs(t, err, iggy.ErrUnsupportedOptionKey)
	require.ErrorIs(t, c.UpdateTopic(ctx, sid, iggy.NumericID(77), "x"), iggy.ErrTopicNotFound)

	_, err = c.SendMessages(ctx, sid, tid, iggy.ToPartition(1), payloads("m", 5))
	require.NoError(t, err)
	require.NoError(t, c.PurgeTopic(ctx, sid, tid))
	got, err = c.GetTopic(ctx, sid, tid)
	require.NoError(t, err)
	require.Zero(t, got.MessagesCount)
	require.ErrorIs(t, c.PurgeTopic(ctx, sid, iggy.NumericID(77)), iggy.ErrTopicNotFound)

	require.NoError(t, c.DeleteTopic(ctx, sid, tid))
	requireIggyError(t, c.DeleteTopic(ctx, sid, tid), wire.CmdDeleteTopic, iggy.ErrTopicNotFound)
}

func TestPartitionsAndSegments(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)

	require.NoError(t, c.CreatePartitions(ctx, s, tp, 2))
	got, err := c.GetTopic(ctx, s, tp)
	require.NoError(t, err)
	require.EqualValues(t, 3, got.PartitionsCount)
	_, err = c.SendMessages(ctx, s, tp, iggy.ToPartition(2), payloads("m", 1))
	require.NoError(t, err)

	require.NoError(t, c.DeletePartitions(ctx, s, tp, 1))
	got, err = c.GetTopic(ctx, s, tp)
	require.NoError(t, err)
	require.EqualValues(t, 2, got.PartitionsCount)
	_, err = c.SendMessages(ctx, s, tp, iggy.ToPartition(2), payloads("m", 1))
	require.ErrorIs(t, err, iggy.ErrResourceNotFound, "send to a deleted partition")

	err = c.CreatePartitions(ctx, s, iggy.NumericID(42), 1)
	requireIggyError(t, err, wire.CmdCreatePartitions, iggy.ErrTopicNotFound)
	err = c.CreatePartitions(ctx, s, tp, 0)
	var ie *iggy.Error
	require.ErrorAs(t, err, &ie, "zero partitions")
	require.ErrorIs(t, c.DeletePartitions(ctx, iggy.NumericID(42), tp, 1), iggy.ErrStreamNotFound)

	_, err = c.SendMessages(ctx, s, tp, iggy.ToPartition(0), payloads("m", 10))
	require.NoError(t, err)
	require.NoError(t, c.DeleteSegments(ctx, s, tp, 0, 1))
	err = c.DeleteSegments(ctx, s, tp, 9, 1)
	requireIggyError(t, err, wire.CmdDeleteSegments, iggy.ErrPartitionNotFound)
	require.ErrorIs(t, c.DeleteSegments(ctx, s, iggy.NumericID(42), 0, 1), iggy.ErrTopicNotFound)
}

func TestConsumerGroupsAdmin(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 3)

	g, err := c.CreateConsumerGroup(ctx, s, tp, "g1")
	require.NoError(t, err)
	require.Equal(t, "g1", g.Name)
	require.EqualValues(t, 3, g.PartitionsCount)
	require.Empty(t, g.Members)
	gid := iggy.NumericID(g.ID)

	_, err = c.CreateConsumerGroup(ctx, s, tp, "g1")
	requireIggyError(t, err, wire.CmdCreateConsumerGroup, iggy.ErrConsumerGroupNameAlreadyExists)
	_, err = c.CreateConsumerGroup(ctx, s, iggy.NumericID(9), "g1")
	require.ErrorIs(t, err, iggy.ErrTopicNotFound)

	_, err = c.GetConsumerGroup(ctx, s, tp, iggy.NamedID("missing"))
	requireIggyError(t, err, wire.CmdGetConsumerGroup, iggy.ErrConsumerGroupNotFound)
	_, err = c.GetConsumerGroup(ctx, s, iggy.NumericID(9), gid)
	require.ErrorIs(t, err, iggy.ErrTopicNotFound)

	// Not a member yet.
	_, err = c.SyncConsumerGroup(ctx, s, tp, gid)
	requireIggyError(t, err, wire.CmdSyncConsumerGroup, iggy.ErrConsumerGroupMemberNotFound)
	err = c.LeaveConsumerGroup(ctx, s, tp, gid)
	requireIggyError(t, err, wire.CmdLeaveConsumerGroup, iggy.ErrConsumerGroupMemberNotFound)
	err = c.JoinConsumerGroup(ctx, s, tp, iggy.NumericID(77))
	requireIggyError(t, err, wire.CmdJoinConsumerGroup, iggy.ErrConsumerGroupNotFound)

	require.NoError(t, c.JoinConsumerGroup(ctx, s, tp, gid))
	require.NoError(t, c.JoinConsumerGroup(ctx, s, tp, gid), "join is idempotent")
	a, err := c.SyncConsumerGroup(ctx, s, tp, gid)
	require.NoError(t, err)
	require.ElementsMatch(t, []uint32{0, 1, 2}, a.Partitions)

	got, err := c.GetConsumerGroup(ctx, s, tp, iggy.NamedID("g1"))
	require.NoError(t, err)
	require.Len(t, got.Members, 1)
	require.Len(t, got.Members[0].Partitions, 3)
	me, err := c.Me(ctx)
	require.NoError(t, err)
	require.Len(t, me.Groups, 1)

	l, err := c.ListConsumerGroups(ctx, s, tp)
	require.NoError(t, err)
	require.Len(t, l, 1)
	_, err = c.ListConsumerGroups(ctx, iggy.NumericID(99), tp)
	require.ErrorIs(t, err, iggy.ErrStreamNotFound)

	require.NoError(t, c.LeaveConsumerGroup(ctx, s, tp, gid))
	got, err = c.GetConsumerGroup(ctx, s, tp, gid)
	require.NoError(t, err)
	require.Empty(t, got.Members)

	require.NoError(t, c.DeleteConsumerGroup(ctx, s, tp, gid))
	requireIggyError(t, c.DeleteConsumerGroup(ctx, s, tp, gid), wire.CmdDeleteConsumerGroup, iggy.ErrConsumerGroupNotFound)
}

func TestConsumerOffsets(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 2)
	consumer := iggy.SingleConsumer(iggy.NamedID("reader"))

	_, err := c.GetConsumerOffset(ctx, consumer, s, tp, iggy.Partition(0))
	requireIggyError(t, err, wire.CmdGetConsumerOffset, iggy.ErrConsumerOffsetNotFound)
	err = c.StoreConsumerOffset(ctx, consumer, s, tp, iggy.Partition(0), 0)
	requireIggyError(t, err, wire.CmdStoreConsumerOffset, iggy.ErrInvalidOffset)

	_, err = c.SendMessages(ctx, s, tp, iggy.ToPartition(0), payloads("m", 5))
	require.NoError(t, err)
	require.NoError(t, c.StoreConsumerOffset(ctx, consumer, s, tp, iggy.Partition(0), 3))
	o, err := c.GetConsumerOffset(ctx, consumer, s, tp, iggy.Partition(0))
	require.NoError(t, err)
	require.EqualValues(t, 3, o.StoredOffset)
	require.EqualValues(t, 4, o.CurrentOffset)

	// Next resumes after the stored offset.
	r, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: consumer, Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.Next(), Count: 10,
	})
	require.NoError(t, err)
	require.Len(t, r.Messages, 1)
	require.EqualValues(t, 4, r.Messages[0].Offset)

	err = c.StoreConsumerOffset(ctx, consumer, s, tp, iggy.Partition(0), 5)
	require.ErrorIs(t, err, iggy.ErrInvalidOffset, "beyond the current offset")
	_, err = c.GetConsumerOffset(ctx, consumer, s, tp, iggy.Partition(7))
	requireIggyError(t, err, wire.CmdGetConsumerOffset, iggy.ErrPartitionNotFound)

	require.NoError(t, c.DeleteConsumerOffset(ctx, consumer, s, tp, iggy.Partition(0)))
	err = c.DeleteConsumerOffset(ctx, consumer, s, tp, iggy.Partition(0))
	requireIggyError(t, err, wire.CmdDeleteConsumerOffset, iggy.ErrConsumerOffsetNotFound)
	_, err = c.GetConsumerOffset(ctx, consumer, s, tp, iggy.Partition(0))
	require.ErrorIs(t, err, iggy.ErrConsumerOffsetNotFound)

	// A group offset needs ownership of the partition.
	g, err := c.CreateConsumerGroup(ctx, s, tp, "g")
	require.NoError(t, err)
	group := iggy.ConsumerGroup(iggy.NumericID(g.ID))
	err = c.StoreConsumerOffset(ctx, group, s, tp, iggy.Partition(0), 1)
	requireIggyError(t, err, wire.CmdStoreConsumerOffset, iggy.ErrResourceNotFound)
	require.NoError(t, c.JoinConsumerGroup(ctx, s, tp, iggy.NumericID(g.ID)))
	require.NoError(t, c.StoreConsumerOffset(ctx, group, s, tp, iggy.Partition(0), 1))
	o, err = c.GetConsumerOffset(ctx, group, s, tp, iggy.Partition(0))
	require.NoError(t, err)
	require.EqualValues(t, 1, o.StoredOffset)

	err = c.StoreConsumerOffset(ctx, iggy.Consumer{Kind: 9, ID: iggy.NumericID(1)}, s, tp, iggy.Partition(0), 1)
	require.ErrorContains(t, err, "consumer kind 9")
}

func TestPersonalAccessTokens(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)

	token, err := c.CreatePAT(ctx, "ci-token", 0)
	require.NoError(t, err)
	require.NotEmpty(t, token)
	_, err = c.CreatePAT(ctx, "ci-token", 0)
	requireIggyError(t, err, wire.CmdCreatePAT, iggy.ErrPATAlreadyExists)
	_, err = c.CreatePAT(ctx, "short", time.Hour)
	require.NoError(t, err)

	l, err := c.ListPATs(ctx)
	require.NoError(t, err)
	names := []string{}
	for _, p := range l {
		names = append(names, p.Name)
	}
	require.ElementsMatch(t, []string{"ci-token", "short"}, names)

	for _, target := range []string{"iggy://" + token + "@" + b.Addr(), "iggy://:" + token + "@" + b.Addr(), b.Addr() + "?pat=" + token} {
		if target[0] != 'i' {
			target = "iggy://" + target
		}
		pc, err := iggy.Dial(ctx, target)
		require.NoError(t, err, "login with a token")
		_, err = pc.ListStreams(ctx)
		require.NoError(t, err)
		require.NoError(t, pc.Close())
	}
	pc, err := iggy.Dial(ctx, b.Addr(), iggy.WithToken(token))
	require.NoError(t, err)
	require.NoError(t, pc.Ping(ctx))
	require.NoError(t, pc.Close())

	require.NoError(t, c.DeletePAT(ctx, "ci-token"))
	requireIggyError(t, c.DeletePAT(ctx, "ci-token"), wire.CmdDeletePAT, iggy.ErrResourceNotFound)
	_, err = iggy.Dial(ctx, b.Addr(), iggy.WithToken(token))
	requireIggyError(t, err, wire.CmdLoginRegisterWithPAT, iggy.ErrInvalidPAT)
	var ev *wire.EvictionError
	require.ErrorAs(t, err, &ev)
	require.Equal(t, wire.EvictInvalidToken, ev.Reason)
}

func TestSystemCommands(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	newTopic(t, c, 2)

	require.NoError(t, c.Ping(ctx))
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.StreamsCount)
	require.EqualValues(t, 2, st.PartitionsCount)

	md, err := c.ClusterMetadata(ctx)
	require.NoError(t, err)
	require.Len(t, md.Nodes, 1)
	require.Zero(t, md.Nodes[0].Role, "leader")

	me, err := c.Me(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 0, me.UserID, "root")
	other := dial(t, b.Addr())
	require.NoError(t, other.Ping(ctx))
	l, err := c.ListClients(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(l), 2)
	one, err := c.GetClient(ctx, me.ClientID)
	require.NoError(t, err)
	require.Equal(t, me.ClientID, one.ClientID)
	_, err = c.GetClient(ctx, 0xFFFFFFF0)
	require.Error(t, err)

	snap, err := c.Snapshot(ctx, iggy.SnapshotStored, iggy.SnapshotFilesystemOverview)
	require.NoError(t, err)
	require.Greater(t, len(snap), 4)
	require.Equal(t, "PK", string(snap[:2]), "a ZIP archive")
	_, err = c.Snapshot(ctx, 99, iggy.SnapshotTest)
	requireIggyError(t, err, wire.CmdGetSnapshot, iggy.ErrInvalidCommand)

	opts, err := c.DescribeOptions(ctx, iggy.ScopeTopic)
	require.NoError(t, err)
	require.Len(t, opts, 8)
	require.Equal(t, wire.OptCompression, opts[0].Key)
	for _, o := range opts {
		require.NotEmpty(t, o.Description, o.Key)
	}
	opts, err = c.DescribeOptions(ctx, iggy.ScopeStream)
	require.NoError(t, err)
	require.NotNil(t, opts)
	require.Empty(t, opts)
	_, err = c.DescribeOptions(ctx, 9)
	require.ErrorIs(t, err, iggy.ErrInvalidCommand)
}

func TestNotLoggedIn(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testCtx(t)
	c, err := iggy.Dial(ctx, b.Addr())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Ping(ctx), "ping works before login")
	_, err = c.ClusterMetadata(ctx)
	requireIggyError(t, err, wire.CmdGetClusterMetadata, iggy.ErrUnauthenticated)
	_, err = c.CreateStream(ctx, "x")
	require.ErrorIs(t, err, iggy.ErrNotLoggedIn)
	require.ErrorIs(t, err, iggy.ErrUnauthenticated)
	_, err = c.SendMessages(ctx, iggy.NumericID(0), iggy.NumericID(0), iggy.ToPartition(0), payloads("m", 1))
	require.ErrorIs(t, err, iggy.ErrUnauthenticated)
	require.NoError(t, c.Ping(ctx), "the connection is still fine")
}

// TestThreeErrorsAreDistinct: a wrong password, a missing stream and a
// network failure are told apart with errors.Is and errors.As.
func TestThreeErrorsAreDistinct(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	ctx := testCtx(t)

	_, wrongPassword := iggy.Dial(ctx, "iggy://iggy:wrong-password@"+b.Addr())
	c := dial(t, b.Addr(), iggy.WithoutReconnect())
	_, missingStream := c.GetStream(ctx, iggy.NamedID("nope"))
	b.Close()
	networkFailure := c.Ping(ctx)
	if networkFailure == nil { // the first request may only see the close on the next
		networkFailure = c.Ping(ctx)
	}

	for i, tc := range []struct {
		err                  error
		creds, stream, netwk bool
	}{
		{wrongPassword, true, false, false},
		{missingStream, false, true, false},
		{networkFailure, false, false, true},
	} {
		require.Error(t, tc.err, "case %d", i)
		require.Equal(t, tc.creds, errors.Is(tc.err, iggy.ErrInvalidCredentials), "case %d: %v", i, tc.err)
		require.Equal(t, tc.stream, errors.Is(tc.err, iggy.ErrStreamNotFound), "case %d: %v", i, tc.err)
		require.Equal(t, tc.netwk, errors.Is(tc.err, iggy.ErrConnection), "case %d: %v", i, tc.err)
		var ne *iggy.NetError
		require.Equal(t, tc.netwk, errors.As(tc.err, &ne), "case %d", i)
		var ie *iggy.Error
		require.Equal(t, !tc.netwk, errors.As(tc.err, &ie), "case %d", i)
	}
	var ie *iggy.Error
	require.ErrorAs(t, wrongPassword, &ie)
	require.Equal(t, wire.CmdLoginRegister, ie.Command)
	require.False(t, iggy.IsRetriable(wrongPassword))
	require.False(t, iggy.IsRetriable(missingStream))
	require.True(t, iggy.IsRetriable(networkFailure))
}
