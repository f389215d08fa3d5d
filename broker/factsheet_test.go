package broker_test

// One test per bullet of §10 of the protocol fact sheet ("client-visible
// behaviours that real clients depend on"), sent the way the Go SDK sends
// them.

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"net"
	"strconv"
	"testing"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

func TestFactSheetSendAndPoll(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	s := createStream(t, c, "orders")
	tp := createTopic(t, c, wire.NumericID(s.ID), "events", 2)
	gs := decodeAs[wire.StreamDetails](t, ok(t, do(t, c, wire.CmdGetStream, &wire.StreamRef{Stream: wire.NumericID(s.ID)})))
	gt := getTopic(t, c, wire.NumericID(s.ID), wire.NumericID(tp.ID))
	require.Equal(t, uint32(2), gt.PartitionsCount)
	for i, want := range []uint64{0, 4, 8} {
		conf := send(t, c, wire.NumericID(gs.ID), wire.NumericID(gt.ID), wire.ToPartition(0), numbered("message ", 4*i, 4)...)
		require.Equal(t, wire.SendConfirmation{Stream: gs.ID, Topic: gt.ID, Partition: 0, BaseOffset: want}, conf)
	}
	r := poll(t, c, wire.PollMessages{
		Consumer: single(0), Stream: wire.NumericID(gs.ID), Topic: wire.NumericID(gt.ID),
		Partition: wire.Partition(0), Strategy: wire.AtOffset(0), Count: 12,
	})
	require.Equal(t, uint32(0), r.PartitionID)
	require.Equal(t, uint64(11), r.CurrentOffset)
	require.Equal(t, numbered("message ", 0, 12), payloads(r))
	require.Equal(t, uint64(5), r.Messages[5].Offset)
}

func TestFactSheetKeyPartitioning(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid, tid := setup(t, c, 3)
	require.Equal(t, uint32(3), getTopic(t, c, sid, tid).PartitionsCount)
	require.Equal(t, uint32(0), send(t, c, sid, tid, wire.ToPartition(0), "first").Partition)
	key := []byte("order-key-1")
	want := wire.PartitionForKey(key, 3)
	// The SDK computes the partition itself (kind 2) ...
	require.Equal(t, want, send(t, c, sid, tid, wire.ToPartition(want), "a").Partition)
	// ... and the broker agrees when asked to (kind 3), every time.
	require.Equal(t, want, send(t, c, sid, tid, wire.ByKey(key), "b").Partition)
	require.Equal(t, want, send(t, c, sid, tid, wire.ByKey(key), "c").Partition)
}

func TestFactSheetRepartitionWhileSending(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid, tid := setup(t, c, 1)
	cursor := uint32(0)
	next := func() wire.Partitioning { // the SDK's balanced cursor over get_topic's count
		n := getTopic(t, c, sid, tid).PartitionsCount
		p := cursor % n
		cursor++
		return wire.ToPartition(p)
	}
	var got []uint32
	got = append(got, send(t, c, sid, tid, next(), "x").Partition)
	ok(t, do(t, c, wire.CmdCreatePartitions, &wire.PartitionsChange{Stream: sid, Topic: tid, Count: 2}))
	require.Equal(t, uint32(3), getTopic(t, c, sid, tid).PartitionsCount)
	got = append(got, send(t, c, sid, tid, next(), "y").Partition)
	ok(t, do(t, c, wire.CmdDeletePartitions, &wire.PartitionsChange{Stream: sid, Topic: tid, Count: 2}))
	require.Equal(t, uint32(1), getTopic(t, c, sid, tid).PartitionsCount)
	got = append(got, send(t, c, sid, tid, next(), "z").Partition)
	require.Equal(t, []uint32{0, 1, 0}, got)
	parts := getTopic(t, c, sid, tid).Partitions
	require.Len(t, parts, 1)
	require.Equal(t, uint32(0), parts[0].ID)
}

func TestFactSheetOffsets(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid, tid := setup(t, c, 1)
	send(t, c, sid, tid, wire.ToPartition(0), numbered("m", 0, 5)...)
	ref := wire.ConsumerOffsetRef{Consumer: single(0), Stream: sid, Topic: tid, Partition: wire.Partition(0)}
	rep := do(t, c, wire.CmdStoreConsumerOffset, &wire.StoreConsumerOffset{ConsumerOffsetRef: ref, Offset: 3, Ack: wire.AckQuorum})
	require.Equal(t, []byte{0, 0, 0, 0}, rep.Body)
	got := ok(t, do(t, c, wire.CmdGetConsumerOffset, &ref))
	require.Len(t, got, 20)
	require.Equal(t, wire.ConsumerOffsetInfo{PartitionID: 0, CurrentOffset: 4, StoredOffset: 3}, decodeAs[wire.ConsumerOffsetInfo](t, got))
	rep = do(t, c, wire.CmdDeleteConsumerOffset, &wire.DeleteConsumerOffset{ConsumerOffsetRef: ref, Ack: wire.AckQuorum})
	require.Equal(t, []byte{0, 0, 0, 0}, rep.Body)
}

func TestFactSheetGroupPolling(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid, tid := setup(t, c, 3)
	gd := decodeAs[wire.GroupDetails](t, ok(t, do(t, c, wire.CmdCreateConsumerGroup, &wire.CreateConsumerGroup{Stream: sid, Topic: tid, Name: "g"})))
	require.Equal(t, wire.GroupHeader{ID: 0, PartitionsCount: 3, MembersCount: 0, Name: "g"}, gd.GroupHeader)
	ref := &wire.GroupRef{Stream: sid, Topic: tid, Group: wire.NumericID(gd.ID)}
	require.Equal(t, []byte{0, 0, 0, 0}, do(t, c, wire.CmdJoinConsumerGroup, ref).Body)
	sync := decodeAs[wire.SyncGroupReply](t, ok(t, do(t, c, wire.CmdSyncConsumerGroup, ref)))
	require.Equal(t, []uint32{0, 1, 2}, sync.Partitions)
	for _, p := range sync.Partitions {
		send(t, c, sid, tid, wire.ToPartition(p), "a"+strconv.Itoa(int(p)), "b"+strconv.Itoa(int(p)))
	}
	seen := map[uint32]bool{}
	for _, p := range sync.Partitions {
		r := poll(t, c, wire.PollMessages{
			Consumer: groupConsumer(gd.ID), Stream: sid, Topic: tid, Partition: wire.Partition(p),
			Strategy: wire.Next(), Count: 2, AutoCommit: true,
		})
		require.Equal(t, p, r.PartitionID)
		require.Len(t, r.Messages, 2)
		seen[r.PartitionID] = true
	}
	require.Len(t, seen, 3)
	require.Equal(t, []byte{0, 0, 0, 0}, do(t, c, wire.CmdLeaveConsumerGroup, ref).Body)
	require.Equal(t, []byte{0, 0, 0, 0}, do(t, c, wire.CmdDeleteConsumerGroup, ref).Body)
}

func TestFactSheetVendorCodeDoesNotConsumeIDs(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	for i := 0; i < 5; i++ {
		h := c.Header(60000)
		require.Equal(t, wire.OpNonReplicated, h.Operation)
		require.Equal(t, uint64(1), h.Request)
		rep, err := c.Exchange(h, nil)
		require.NoError(t, err)
		require.Nil(t, rep.Eviction)
		require.Equal(t, uint64(1), rep.Header.Request)
		denied(t, rep, wire.ErrInvalidCommand.Code)
	}
	h := c.Header(wire.CmdCreateStream)
	require.Equal(t, uint64(1), h.Request)
	rep, err := c.Exchange(h, bodyOf(&wire.CreateStream{Name: "scratch"}))
	require.NoError(t, err)
	sd := decodeAs[wire.StreamDetails](t, ok(t, rep))
	tp := createTopic(t, c, wire.NumericID(sd.ID), "scratch", 1)
	getTopic(t, c, wire.NumericID(sd.ID), wire.NumericID(tp.ID))
}

func TestFactSheetRawOffsetCommands(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid, tid := setup(t, c, 1)
	send(t, c, sid, tid, wire.ToPartition(0), numbered("m", 0, 5)...)
	head := append([]byte{1, 1, 4, 0, 0, 0, 0}, sid.AppendTo(nil)...)
	head = tid.AppendTo(head)
	head = append(head, 1, 0, 0, 0, 0)
	get := func() uint64 {
		info := decodeAs[wire.ConsumerOffsetInfo](t, ok(t, do(t, c, wire.CmdGetConsumerOffset, head)))
		return info.StoredOffset
	}
	store := func(off uint64, ack byte) {
		before := c.Counter
		rep := do(t, c, wire.CmdStoreConsumerOffset, append(binary.LittleEndian.AppendUint64(append([]byte(nil), head...), off), ack))
		require.Equal(t, wire.OpStoreConsumerOffset, rep.Header.Operation)
		require.Equal(t, []byte{0, 0, 0, 0}, rep.Body)
		require.Equal(t, before, c.Counter, "partition ops do not consume request ids")
	}
	store(2, 1)
	require.Equal(t, uint64(2), get())
	store(4, 0)
	require.Equal(t, uint64(4), get())
	rep := do(t, c, wire.CmdDeleteConsumerOffset, append(append([]byte(nil), head...), 1))
	require.Equal(t, []byte{0, 0, 0, 0}, rep.Body)
	require.Empty(t, ok(t, do(t, c, wire.CmdGetConsumerOffset, head)))
}

func TestFactSheetSnapshot(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	body := ok(t, do(t, c, wire.CmdGetSnapshot, []byte{1, 1, 1}))
	require.NotEmpty(t, body)
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	require.NoError(t, err)
	require.Len(t, zr.File, 1)
	require.Equal(t, "filesystem_overview.txt", zr.File[0].Name)

	all := ok(t, do(t, c, wire.CmdGetSnapshot, []byte{2, 1, 100}))
	zr, err = zip.NewReader(bytes.NewReader(all), int64(len(all)))
	require.NoError(t, err)
	require.Len(t, zr.File, 6)
	for _, bad := range [][]byte{{9, 1, 1}, {1, 1, 7}, {1, 2, 100, 1}, {1, 0}, {1}} {
		denied(t, do(t, c, wire.CmdGetSnapshot, bad), wire.ErrInvalidCommand.Code)
	}
}

func TestFactSheetGetStreamsEmpty(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	body := ok(t, do(t, c, wire.CmdGetStreams, nil))
	require.Empty(t, body)
	list := decodeAs[wire.StreamList](t, body)
	require.NotNil(t, list)
	require.Empty(t, list)
}

func TestFactSheetPreLoginPingAndClusterMetadata(t *testing.T) {
	t.Parallel()
	b, _ := start(t)
	c := dial(t, b)
	require.Empty(t, ok(t, do(t, c, wire.CmdPing, nil)))
	denied(t, do(t, c, wire.CmdGetClusterMetadata, nil), wire.ErrUnauthenticated.Code)
	require.Empty(t, ok(t, do(t, c, wire.CmdPing, nil)), "a denial is not an eviction")

	_, err := c.Login("iggy", "iggy")
	require.NoError(t, err)
	md := decodeAs[wire.ClusterMetadata](t, ok(t, do(t, c, wire.CmdGetClusterMetadata, nil)))
	require.Equal(t, "single-node", md.Name)
	require.Len(t, md.Nodes, 1)
	host, port, err := net.SplitHostPort(b.Addr())
	require.NoError(t, err)
	n := md.Nodes[0]
	require.Equal(t, host, n.IP)
	require.Equal(t, port, strconv.Itoa(int(n.TCP)))
	require.Equal(t, uint8(0), n.Role)
	require.Equal(t, uint8(0), n.Status)
}

func TestFactSheetLogoutAndLoginAgain(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	first := c.Session
	ok(t, do(t, c, wire.CmdGetStreams, nil))
	h := c.Header(wire.CmdLogoutUser)
	require.Equal(t, wire.OpLogout, h.Operation)
	require.Equal(t, uint64(1), h.Request)
	rep, err := c.Exchange(h, nil)
	require.NoError(t, err)
	require.Nil(t, rep.Eviction)
	require.Equal(t, wire.OpLogout, rep.Header.Operation)
	require.Zero(t, rep.Status())
	require.Empty(t, rep.Body)

	c.NewClientID()
	rep, err = c.Login("iggy", "iggy")
	require.NoError(t, err)
	require.Nil(t, rep.Eviction)
	require.Equal(t, uint64(0), rep.Header.Request)
	require.NotEqual(t, first, c.Session)
	ok(t, do(t, c, wire.CmdGetStreams, nil))
	require.Equal(t, uint64(1), c.Header(wire.CmdGetStreams).Request, "the counter restarts at 1")
	createStream(t, c, "after-relogin") // request 1 must commit, not replay
}

func TestFactSheetTopicOptionsFsync(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	cat := decodeAs[wire.DescribeOptionsReply](t, ok(t, do(t, c, wire.CmdDescribeOptions, &wire.DescribeOptions{Scope: wire.ScopeTopic})))
	kinds := map[string]wire.ValueKind{}
	for _, o := range cat.Options {
		require.NotEmpty(t, o.Description, o.Key)
		kinds[o.Key] = o.Kind
	}
	require.Equal(t, wire.KindBool, kinds[wire.OptEnforceFsync])
	require.Equal(t, wire.KindUint64, kinds[wire.OptSegmentSize])
	require.Equal(t, []byte{0, 0, 0, 0}, ok(t, do(t, c, wire.CmdDescribeOptions, &wire.DescribeOptions{Scope: wire.ScopeStream})))

	s := createStream(t, c, "s")
	sid := wire.NumericID(s.ID)
	tp := createTopic(t, c, sid, "fsynced", 1, wire.TopicOption(wire.OptEnforceFsync, wire.StringValue("true")))
	got := getTopic(t, c, sid, wire.NumericID(tp.ID))
	v, found := wire.Lookup(got.Explicit, wire.OptEnforceFsync)
	require.True(t, found)
	require.Equal(t, wire.BoolValue(true), v)
	_, found = wire.Lookup(got.Derived, wire.OptMaxTopicSize)
	require.True(t, found)
	_, found = wire.Lookup(got.Derived, wire.OptEnforceFsync)
	require.False(t, found)

	rep := do(t, c, wire.CmdCreateTopic, &wire.CreateTopic{Stream: sid, PartitionsCount: 1, Name: "bad",
		Options: optionsBlock(wire.TopicOption("not_a_real_option", wire.StringValue("x")))})
	denied(t, rep, wire.ErrUnsupportedOptionKey.Code)
}

func TestFactSheetTopicOptionsRoundTrip(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	cat := decodeAs[wire.DescribeOptionsReply](t, ok(t, do(t, c, wire.CmdDescribeOptions, &wire.DescribeOptions{Scope: wire.ScopeTopic})))
	kinds := map[string]wire.ValueKind{}
	for _, o := range cat.Options {
		kinds[o.Key] = o.Kind
	}
	opts := []wire.Entry{
		wire.TopicOption(wire.OptSegmentSize, wire.Uint64Value(1048576)),
		wire.TopicOption(wire.OptEnforceFsync, wire.BoolValue(true)),
		wire.TopicOption(wire.OptMessagesRequiredToSave, wire.Uint32Value(7)),
		wire.TopicOption(wire.OptSizeOfMessagesRequiredToSave, wire.Uint64Value(4096)),
		wire.TopicOption(wire.OptPreallocateSegments, wire.BoolValue(false)),
	}
	for _, e := range opts {
		require.Equal(t, e.Value.Kind, kinds[string(e.Key.Data)], string(e.Key.Data))
	}
	sid := wire.NumericID(createStream(t, c, "s").ID)
	tp := createTopic(t, c, sid, "tuned", 1, opts...)
	got := getTopic(t, c, sid, wire.NumericID(tp.ID))
	for _, e := range opts {
		v, found := wire.Lookup(got.Explicit, string(e.Key.Data))
		require.True(t, found, string(e.Key.Data))
		require.Equal(t, e.Value, v, string(e.Key.Data))
		_, found = wire.Lookup(got.Derived, string(e.Key.Data))
		require.False(t, found, string(e.Key.Data))
	}
	for i, bad := range []wire.Entry{
		wire.TopicOption(wire.OptMessagesRequiredToSave, wire.Uint32Value(0)),
		wire.TopicOption(wire.OptSegmentSize, wire.Uint64Value(1048577)),
	} {
		rep := do(t, c, wire.CmdCreateTopic, &wire.CreateTopic{Stream: sid, PartitionsCount: 1, Name: "bad" + strconv.Itoa(i), Options: optionsBlock(bad)})
		denied(t, rep, wire.ErrInvalidOptionValue.Code)
	}
	zero := createTopic(t, c, sid, "zero", 1, wire.TopicOption(wire.OptSegmentSize, wire.Uint64Value(0)))
	_, found := wire.Lookup(zero.Explicit, wire.OptSegmentSize)
	require.False(t, found)
	v, found := wire.Lookup(zero.Derived, wire.OptSegmentSize)
	require.True(t, found)
	require.Equal(t, wire.Uint64Value(1<<30), v)
}
