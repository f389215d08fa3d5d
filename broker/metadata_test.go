package broker_test

import (
	"bytes"
	"testing"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

func TestLowestFreeIDs(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	for i, name := range []string{"a", "b", "c"} {
		require.Equal(t, uint32(i), createStream(t, c, name).ID)
	}
	ok(t, do(t, c, wire.CmdDeleteStream, &wire.StreamRef{Stream: wire.NamedID("b")}))
	require.Equal(t, uint32(1), createStream(t, c, "d").ID)
	list := decodeAs[wire.StreamList](t, ok(t, do(t, c, wire.CmdGetStreams, nil)))
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"a", "d", "c"}, names, "listed by id")

	sid := wire.NamedID("a")
	for i, name := range []string{"x", "y", "z"} {
		require.Equal(t, uint32(i), createTopic(t, c, sid, name, 1).ID)
	}
	ok(t, do(t, c, wire.CmdDeleteTopic, &wire.TopicRef{Stream: sid, Topic: wire.NumericID(0)}))
	require.Equal(t, uint32(0), createTopic(t, c, sid, "w", 1).ID)
	topics := decodeAs[wire.TopicList](t, ok(t, do(t, c, wire.CmdGetTopics, &wire.StreamRef{Stream: sid})))
	require.Len(t, topics, 3)
	require.Equal(t, "w", topics[0].Name)
}

func TestCommittedRejections(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid, tid := setup(t, c, 2)
	missingS, missingT := wire.NumericID(99), wire.NumericID(99)
	createStream(t, c, "other")
	gref := &wire.GroupRef{Stream: sid, Topic: tid, Group: wire.NamedID("g")}
	ok(t, do(t, c, wire.CmdCreateConsumerGroup, &wire.CreateConsumerGroup{Stream: sid, Topic: tid, Name: "g"}))
	cases := []struct {
		name string
		cmd  wire.Command
		body wire.Encodable
		code wire.Code
	}{
		{"duplicate stream", wire.CmdCreateStream, &wire.CreateStream{Name: "s"}, 1012},
		{"rename stream to a taken name", wire.CmdUpdateStream, &wire.UpdateStream{Stream: sid, Name: "other"}, 1012},
		{"update missing stream", wire.CmdUpdateStream, &wire.UpdateStream{Stream: missingS, Name: "n"}, 1009},
		{"delete missing stream", wire.CmdDeleteStream, &wire.StreamRef{Stream: missingS}, 1009},
		{"purge missing stream", wire.CmdPurgeStream, &wire.StreamRef{Stream: missingS}, 1009},
		{"duplicate topic", wire.CmdCreateTopic, &wire.CreateTopic{Stream: sid, PartitionsCount: 1, Name: "t"}, 2013},
		{"topic in missing stream", wire.CmdCreateTopic, &wire.CreateTopic{Stream: missingS, PartitionsCount: 1, Name: "t"}, 1009},
		{"update missing topic", wire.CmdUpdateTopic, &wire.UpdateTopic{Stream: sid, Topic: missingT, Name: "n"}, 2010},
		{"delete missing topic", wire.CmdDeleteTopic, &wire.TopicRef{Stream: sid, Topic: missingT}, 2010},
		{"purge topic of missing stream", wire.CmdPurgeTopic, &wire.TopicRef{Stream: missingS, Topic: tid}, 1009},
		{"partitions of missing topic", wire.CmdCreatePartitions, &wire.PartitionsChange{Stream: sid, Topic: missingT, Count: 1}, 2010},
		{"delete too many partitions", wire.CmdDeletePartitions, &wire.PartitionsChange{Stream: sid, Topic: tid, Count: 3}, 2019},
		{"duplicate group", wire.CmdCreateConsumerGroup, &wire.CreateConsumerGroup{Stream: sid, Topic: tid, Name: "g"}, 5004},
		{"group of missing topic", wire.CmdCreateConsumerGroup, &wire.CreateConsumerGroup{Stream: sid, Topic: missingT, Name: "h"}, 2010},
		{"join missing group", wire.CmdJoinConsumerGroup, &wire.GroupRef{Stream: sid, Topic: tid, Group: wire.NumericID(7)}, 5000},
		{"delete missing group", wire.CmdDeleteConsumerGroup, &wire.GroupRef{Stream: sid, Topic: tid, Group: wire.NamedID("nope")}, 5000},
		{"leave by a non-member", wire.CmdLeaveConsumerGroup, gref, 5006},
	}
	for i, tc := range cases {
		t.Logf("case %d: %s", i, tc.name)
		committed(t, do(t, c, tc.cmd, tc.body), tc.code)
	}
	rep := do(t, c, wire.CmdDeleteSegments, &wire.DeleteSegments{Stream: sid, Topic: tid, Partition: 9, Count: 1})
	require.Equal(t, wire.OpTruncatePartition, rep.Header.Operation)
	_, code, err := rep.Result()
	require.NoError(t, err)
	require.Equal(t, wire.ErrPartitionNotFound.Code, code)
}

func TestPreCommitDenials(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid, tid := setup(t, c, 1)
	brokenTLV := []byte{2, 1, 0, 0, 0, 'k'} // key without a value
	dupKeys := optionsBlock(wire.TopicOption(wire.OptEnforceFsync, wire.BoolValue(true)), wire.TopicOption(wire.OptEnforceFsync, wire.BoolValue(false)))
	cases := []struct {
		name string
		cmd  wire.Command
		body any
		code wire.Code
	}{
		{"1001 partitions", wire.CmdCreateTopic, &wire.CreateTopic{Stream: sid, PartitionsCount: 1001, Name: "big"}, 2015},
		{"add 0 partitions", wire.CmdCreatePartitions, &wire.PartitionsChange{Stream: sid, Topic: tid, Count: 0}, 2015},
		{"remove 1001 partitions", wire.CmdDeletePartitions, &wire.PartitionsChange{Stream: sid, Topic: tid, Count: 1001}, 2015},
		{"max size below segment", wire.CmdCreateTopic, &wire.CreateTopic{Stream: sid, PartitionsCount: 1, Name: "small",
			Options: optionsBlock(wire.TopicOption(wire.OptMaxTopicSize, wire.Uint64Value(1000)))}, 1019},
		{"broken TLV", wire.CmdCreateTopic, &wire.CreateTopic{Stream: sid, PartitionsCount: 1, Name: "tlv", Options: brokenTLV}, 3},
		{"duplicate option", wire.CmdCreateTopic, &wire.CreateTopic{Stream: sid, PartitionsCount: 1, Name: "dup", Options: dupKeys}, 3},
		{"bad option kind", wire.CmdCreateTopic, &wire.CreateTopic{Stream: sid, PartitionsCount: 1, Name: "kind",
			Options: optionsBlock(wire.TopicOption(wire.OptSegmentSize, wire.BoolValue(true)))}, 4042},
		{"stream option", wire.CmdCreateStream, &wire.CreateStream{Name: "opt",
			Options: optionsBlock(wire.TopicOption("anything", wire.StringValue("x")))}, 4041},
		{"update non-updatable option", wire.CmdUpdateTopic, &wire.UpdateTopic{Stream: sid, Topic: tid, Name: "t",
			Options: optionsBlock(wire.TopicOption(wire.OptSegmentSize, wire.Uint64Value(1<<20)))}, 4041},
		{"update max size below segment", wire.CmdUpdateTopic, &wire.UpdateTopic{Stream: sid, Topic: tid, Name: "t",
			Options: optionsBlock(wire.TopicOption(wire.OptMaxTopicSize, wire.Uint64Value(1000)))}, 1019},
		{"undecodable body", wire.CmdCreateStream, []byte{0}, 3},
		{"undecodable read", wire.CmdGetTopic, []byte{1, 4, 0}, 3},
	}
	for i, tc := range cases {
		t.Logf("case %d: %s", i, tc.name)
		denied(t, do(t, c, tc.cmd, tc.body), tc.code)
	}
}

func TestMissingReadsAnswerEmpty(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid, tid := setup(t, c, 1)
	missing := wire.NumericID(42)
	require.Empty(t, ok(t, do(t, c, wire.CmdGetStream, &wire.StreamRef{Stream: missing})))
	require.Empty(t, ok(t, do(t, c, wire.CmdGetTopic, &wire.TopicRef{Stream: sid, Topic: missing})))
	require.Equal(t, []byte{0, 0, 0, 0}, ok(t, do(t, c, wire.CmdGetTopics, &wire.StreamRef{Stream: missing})))
	require.Empty(t, ok(t, do(t, c, wire.CmdGetConsumerGroup, &wire.GroupRef{Stream: sid, Topic: tid, Group: missing})))
	denied(t, do(t, c, wire.CmdGetConsumerGroup, &wire.GroupRef{Stream: missing, Topic: tid, Group: missing}), 1009)
	denied(t, do(t, c, wire.CmdGetConsumerGroups, &wire.TopicRef{Stream: sid, Topic: missing}), 2010)
	require.Empty(t, ok(t, do(t, c, wire.CmdGetConsumerGroups, &wire.TopicRef{Stream: sid, Topic: tid})))
	require.Empty(t, ok(t, do(t, c, wire.CmdSyncConsumerGroup, &wire.GroupRef{Stream: sid, Topic: tid, Group: missing})))
}

func TestMetadataReplay(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	h := c.Header(wire.CmdCreateStream)
	body := bodyOf(&wire.CreateStream{Name: "once"})
	first, err := c.Exchange(h, body)
	require.NoError(t, err)
	ok(t, first)
	again, err := c.Exchange(h, body)
	require.NoError(t, err)
	require.Equal(t, first.Body, again.Body, "a repeated request id replays the cached reply")
	require.Equal(t, h.Request, again.Header.Request)
	require.Len(t, decodeAs[wire.StreamList](t, ok(t, do(t, c, wire.CmdGetStreams, nil))), 1)

	// Gaps are allowed; an older id whose reply is gone gets 59.
	c.Counter += 10
	createStream(t, c, "later")
	rep, err := c.Exchange(h, body)
	require.NoError(t, err)
	committed(t, rep, wire.ErrRequestAlreadyApplied.Code)
	require.Len(t, decodeAs[wire.StreamList](t, ok(t, do(t, c, wire.CmdGetStreams, nil))), 2)

	// A denied request does not consume its id: retrying it commits.
	h = c.Header(wire.CmdCreateStream)
	bad := bodyOf(&wire.CreateStream{Name: "x", Options: optionsBlock(wire.TopicOption("k", wire.StringValue("v")))})
	rep, err = c.Exchange(h, bad)
	require.NoError(t, err)
	denied(t, rep, wire.ErrUnsupportedOptionKey.Code)
	rep, err = c.Exchange(h, bodyOf(&wire.CreateStream{Name: "x"}))
	require.NoError(t, err)
	ok(t, rep)
}

func TestTopicLifecycle(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid := wire.NumericID(createStream(t, c, "s").ID)
	rep := do(t, c, wire.CmdCreateTopic, &wire.CreateTopic{Stream: sid, PartitionsCount: 3, Name: "t"})
	payload := ok(t, rep)
	created := decodeAs[wire.TopicDetails](t, payload)
	require.Len(t, created.Partitions, 3)
	for i, p := range created.Partitions {
		require.Equal(t, uint32(i), p.ID)
		require.NotZero(t, p.CreatedAt)
		require.Zero(t, p.SegmentsCount+uint32(p.CurrentOffset+p.SizeBytes+p.MessagesCount))
	}
	// The 40-byte entries end the body.
	h := created.TopicHeader
	require.Len(t, payload, len(h.AppendTo(nil))+3*40)
	require.Equal(t, uint64(wire.Unlimited), h.MessageExpiry)
	require.Equal(t, uint64(wire.Unlimited), h.MaxTopicSize)
	require.Equal(t, wire.CompressionNone, h.Compression)
	require.Empty(t, h.Explicit)
	require.Len(t, h.Derived, 8)

	tid := wire.NumericID(created.ID)
	got := getTopic(t, c, sid, tid)
	for _, p := range got.Partitions {
		require.GreaterOrEqual(t, p.SegmentsCount, uint32(1))
	}
	send(t, c, sid, tid, wire.ToPartition(2), "a", "b", "c")
	got = getTopic(t, c, sid, tid)
	require.Equal(t, uint64(2), got.Partitions[2].CurrentOffset)
	require.Equal(t, uint64(3), got.Partitions[2].MessagesCount)
	require.Equal(t, uint64(3), got.MessagesCount)
	require.NotZero(t, got.SizeBytes)
	sd := decodeAs[wire.StreamDetails](t, ok(t, do(t, c, wire.CmdGetStream, &wire.StreamRef{Stream: sid})))
	require.Equal(t, uint64(3), sd.MessagesCount)
	require.Len(t, sd.Topics, 1)

	ok(t, do(t, c, wire.CmdUpdateTopic, &wire.UpdateTopic{Stream: sid, Topic: tid, Name: "renamed",
		Options: optionsBlock(wire.TopicOption(wire.OptMessageExpiry, wire.StringValue("1h")),
			wire.TopicOption(wire.OptCompression, wire.StringValue("gzip")))}))
	got = getTopic(t, c, sid, wire.NamedID("renamed"))
	require.Equal(t, uint64(3600_000_000), got.MessageExpiry)
	require.Equal(t, wire.CompressionGzip, got.Compression)
	v, found := wire.Lookup(got.Explicit, wire.OptMessageExpiry)
	require.True(t, found)
	require.Equal(t, wire.Uint64Value(3600_000_000), v)

	ok(t, do(t, c, wire.CmdPurgeTopic, &wire.TopicRef{Stream: sid, Topic: tid}))
	got = getTopic(t, c, sid, tid)
	require.Zero(t, got.MessagesCount)
	require.Equal(t, uint64(0), send(t, c, sid, tid, wire.ToPartition(2), "again").BaseOffset, "purge resets offsets")

	rep = do(t, c, wire.CmdDeleteSegments, &wire.DeleteSegments{Stream: sid, Topic: tid, Partition: 2, Count: 1})
	require.Equal(t, wire.OpTruncatePartition, rep.Header.Operation)
	require.Equal(t, []byte{0, 0, 0, 0}, rep.Body)
	got = getTopic(t, c, sid, tid)
	require.Zero(t, got.Partitions[2].MessagesCount)
	require.Equal(t, uint64(1), send(t, c, sid, tid, wire.ToPartition(2), "next").BaseOffset, "offsets are never reused")

	ok(t, do(t, c, wire.CmdPurgeStream, &wire.StreamRef{Stream: sid}))
	ok(t, do(t, c, wire.CmdDeleteTopic, &wire.TopicRef{Stream: sid, Topic: tid}))
	require.Empty(t, ok(t, do(t, c, wire.CmdGetTopic, &wire.TopicRef{Stream: sid, Topic: tid})))
	ok(t, do(t, c, wire.CmdUpdateStream, &wire.UpdateStream{Stream: sid, Name: "s2"}))
	require.Equal(t, "s2", decodeAs[wire.StreamDetails](t, ok(t, do(t, c, wire.CmdGetStream, &wire.StreamRef{Stream: sid}))).Name)
}

func TestGroupIDsAreNeverReused(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	sid, tid := setup(t, c, 1)
	mk := func(name string) uint32 {
		return decodeAs[wire.GroupDetails](t, ok(t, do(t, c, wire.CmdCreateConsumerGroup, &wire.CreateConsumerGroup{Stream: sid, Topic: tid, Name: name}))).ID
	}
	require.Equal(t, uint32(0), mk("a"))
	require.Equal(t, uint32(1), mk("b"))
	ok(t, do(t, c, wire.CmdDeleteConsumerGroup, &wire.GroupRef{Stream: sid, Topic: tid, Group: wire.NumericID(1)}))
	require.Equal(t, uint32(2), mk("b"))
	list := decodeAs[wire.GroupList](t, ok(t, do(t, c, wire.CmdGetConsumerGroups, &wire.TopicRef{Stream: sid, Topic: tid})))
	require.Equal(t, wire.GroupList{{ID: 0, PartitionsCount: 1, Name: "a"}, {ID: 2, PartitionsCount: 1, Name: "b"}}, list)
}

func TestDescribeOptionsScopes(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	body := ok(t, do(t, c, wire.CmdDescribeOptions, &wire.DescribeOptions{Scope: wire.ScopeTopic}))
	want := (&wire.DescribeOptionsReply{Options: wire.TopicOptionCatalog}).AppendTo(nil)
	require.True(t, bytes.Equal(want, body))
	require.Len(t, decodeAs[wire.DescribeOptionsReply](t, body).Options, 8)
	require.Equal(t, []byte{0, 0, 0, 0}, ok(t, do(t, c, wire.CmdDescribeOptions, &wire.DescribeOptions{Scope: wire.ScopeUser})))
	denied(t, do(t, c, wire.CmdDescribeOptions, &wire.DescribeOptions{Scope: 4}), 3)
}
