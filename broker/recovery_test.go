package broker_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// onlyTopicDir returns DataDir/topics/<uid> of the data directory's only
// topic.
func onlyTopicDir(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "topics", "*"))
	require.NoError(t, err)
	require.Len(t, m, 1)
	return m[0]
}

// copyDir copies src (a directory tree) to dst, which must not exist.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
}

func pollFirst(t *testing.T, c *rawclient.Client, sid, tid wire.Identifier, p uint32) wire.PollReply {
	t.Helper()
	return poll(t, c, wire.PollMessages{Consumer: single(1), Stream: sid, Topic: tid, Partition: wire.Partition(p), Strategy: wire.First(), Count: 100})
}

// A crash between saving metadata and removing the files of
// delete_partitions leaves the partition directory behind. Recovery
// removes it, so a later create_partitions starts empty.
func TestDeletedPartitionStaysDeletedAfterACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b1 := brokertest.Start(t, brokertest.DataDir(dir))
	c := login(t, b1)
	sid, tid := setup(t, c, 2)
	send(t, c, sid, tid, wire.ToPartition(1), "OLD-1", "OLD-2")
	ref := wire.ConsumerOffsetRef{Consumer: single(9), Stream: sid, Topic: tid, Partition: wire.Partition(1)}
	ok(t, do(t, c, wire.CmdStoreConsumerOffset, &wire.StoreConsumerOffset{ConsumerOffsetRef: ref, Offset: 1}))
	require.NoError(t, b1.Close())
	part1 := filepath.Join(onlyTopicDir(t, dir), "1")
	backup := filepath.Join(t.TempDir(), "p1")
	copyDir(t, part1, backup)

	b2 := brokertest.Start(t, brokertest.DataDir(dir))
	ok(t, do(t, login(t, b2), wire.CmdDeletePartitions, &wire.PartitionsChange{Stream: sid, Topic: tid, Count: 1}))
	require.NoError(t, b2.Close())
	require.NoError(t, os.Rename(backup, part1)) // the crash: the files are still there

	b3 := brokertest.Start(t, brokertest.DataDir(dir))
	_, err := os.Stat(part1)
	require.ErrorIs(t, err, os.ErrNotExist, "recovery keeps the directory of a deleted partition")
	c3 := login(t, b3)
	ok(t, do(t, c3, wire.CmdCreatePartitions, &wire.PartitionsChange{Stream: sid, Topic: tid, Count: 1}))
	require.Empty(t, pollFirst(t, c3, sid, tid, 1).Messages, "a new partition serves a deleted one's messages")
	require.Empty(t, ok(t, do(t, c3, wire.CmdGetConsumerOffset, &ref)), "a new partition has a deleted one's offsets")
}

// A new partition starts from an empty directory even when files are left
// where it goes (a delete whose file removal failed).
func TestNewPartitionIgnoresLeftoverFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := brokertest.Start(t, brokertest.DataDir(dir))
	c := login(t, b)
	sid, tid := setup(t, c, 2)
	send(t, c, sid, tid, wire.ToPartition(1), "OLD-1", "OLD-2")
	part1 := filepath.Join(onlyTopicDir(t, dir), "1")
	backup := filepath.Join(t.TempDir(), "p1")
	copyDir(t, part1, backup)
	ok(t, do(t, c, wire.CmdDeletePartitions, &wire.PartitionsChange{Stream: sid, Topic: tid, Count: 1}))
	require.NoError(t, os.Rename(backup, part1))

	ok(t, do(t, c, wire.CmdCreatePartitions, &wire.PartitionsChange{Stream: sid, Topic: tid, Count: 1}))
	require.Empty(t, pollFirst(t, c, sid, tid, 1).Messages, "a new partition serves leftover messages")
	require.Equal(t, uint64(0), send(t, c, sid, tid, wire.ToPartition(1), "new").BaseOffset)
}

// Offsets stored past the end of a log that lost its tail come back to
// the log's last offset (or go when the log is empty), so "next" does not
// skip the messages that get those offsets again.
func TestStoredOffsetsAreClampedToTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b1 := brokertest.Start(t, brokertest.DataDir(dir))
	c := login(t, b1)
	sid, tid := setup(t, c, 2)
	send(t, c, sid, tid, wire.ToPartition(0), numbered("a", 0, 5)...)
	require.NoError(t, b1.Close())
	topicDir := onlyTopicDir(t, dir)
	log0 := filepath.Join(topicDir, "0", "log")
	backup := filepath.Join(t.TempDir(), "log0")
	copyDir(t, log0, backup)

	b2 := brokertest.Start(t, brokertest.DataDir(dir))
	c2 := login(t, b2)
	send(t, c2, sid, tid, wire.ToPartition(0), numbered("a", 5, 5)...)
	send(t, c2, sid, tid, wire.ToPartition(1), numbered("b", 0, 3)...)
	ref0 := wire.ConsumerOffsetRef{Consumer: single(3), Stream: sid, Topic: tid, Partition: wire.Partition(0)}
	ref1 := ref0
	ref1.Partition = wire.Partition(1)
	ok(t, do(t, c2, wire.CmdStoreConsumerOffset, &wire.StoreConsumerOffset{ConsumerOffsetRef: ref0, Offset: 9}))
	ok(t, do(t, c2, wire.CmdStoreConsumerOffset, &wire.StoreConsumerOffset{ConsumerOffsetRef: ref1, Offset: 2}))
	require.NoError(t, b2.Close())
	// Partition 0's log goes back to 5 messages, partition 1's is lost.
	require.NoError(t, os.RemoveAll(log0))
	require.NoError(t, os.Rename(backup, log0))
	require.NoError(t, os.RemoveAll(filepath.Join(topicDir, "1", "log")))

	for round := 0; round < 2; round++ { // the clamp is saved, not only applied
		b3 := brokertest.Start(t, brokertest.DataDir(dir))
		c3 := login(t, b3)
		info := decodeAs[wire.ConsumerOffsetInfo](t, ok(t, do(t, c3, wire.CmdGetConsumerOffset, &ref0)))
		require.Equal(t, uint64(4), info.StoredOffset, "round %d: the stored offset is past the log's end", round)
		require.Equal(t, uint64(4), info.CurrentOffset)
		require.Empty(t, ok(t, do(t, c3, wire.CmdGetConsumerOffset, &ref1)), "round %d: an offset on an empty log", round)
		require.NoError(t, b3.Close())
	}
	b4 := brokertest.Start(t, brokertest.DataDir(dir))
	c4 := login(t, b4)
	require.Equal(t, uint64(5), send(t, c4, sid, tid, wire.ToPartition(0), "after").BaseOffset)
	r := poll(t, c4, wire.PollMessages{Consumer: single(3), Stream: sid, Topic: tid, Partition: wire.Partition(0), Strategy: wire.Next(), Count: 10})
	require.Equal(t, []string{"after"}, payloads(r), "next resumes at the new message")
}

// A data directory with topic data but no metadata.json is refused, not
// wiped.
func TestMissingMetadataWithTopicsRefusesToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b1 := brokertest.Start(t, brokertest.DataDir(dir))
	c := login(t, b1)
	sid, tid := setup(t, c, 1)
	send(t, c, sid, tid, wire.ToPartition(0), "keep me")
	require.NoError(t, b1.Close())
	topicDir := onlyTopicDir(t, dir)
	meta := filepath.Join(dir, "metadata.json")
	require.NoError(t, os.Rename(meta, meta+".lost"))

	_, err := broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0", DataDir: dir})
	require.Error(t, err)
	require.ErrorContains(t, err, meta)
	require.ErrorContains(t, err, filepath.Join(dir, "topics"))
	_, err = os.Stat(topicDir)
	require.NoError(t, err, "the topic data was removed")

	require.NoError(t, os.Rename(meta+".lost", meta))
	b2 := brokertest.Start(t, brokertest.DataDir(dir))
	require.Equal(t, []string{"keep me"}, payloads(pollFirst(t, login(t, b2), sid, tid, 0)))
}

// A fresh data directory gets its metadata.json at once, so a crash during
// the first create_topic does not look like lost metadata.
func TestFreshDataDirWritesMetadata(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	brokertest.Start(t, brokertest.DataDir(dir))
	_, err := os.Stat(filepath.Join(dir, "metadata.json"))
	require.NoError(t, err)
}

// delete_segments that fails after dropping some segments commits what it
// did: a retry with the same request id replays the reply and drops
// nothing more.
func TestDeleteSegmentsPartialFailureIsIdempotent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := brokertest.Start(t, brokertest.DataDir(dir))
	c := login(t, b)
	sid := wire.NumericID(createStream(t, c, "s").ID)
	tid := wire.NumericID(createTopic(t, c, sid, "t", 1, wire.TopicOption(wire.OptSegmentSize, wire.Uint64Value(1<<20))).ID)
	big := strings.Repeat("x", 600<<10)
	for i := 0; i < 8; i++ { // two batches per 1 MiB segment
		send(t, c, sid, tid, wire.ToPartition(0), big)
	}
	segments := func() uint32 { return getTopic(t, c, sid, tid).Partitions[0].SegmentsCount }
	before := segments()
	require.GreaterOrEqual(t, before, uint32(4))

	// Make the second segment's removal fail: its index becomes a
	// non-empty directory.
	idx, err := filepath.Glob(filepath.Join(onlyTopicDir(t, dir), "0", "log", "*.index"))
	require.NoError(t, err)
	sort.Strings(idx)
	require.NoError(t, os.Remove(idx[1]))
	require.NoError(t, os.Mkdir(idx[1], 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(idx[1], "x"), nil, 0o644))

	h := c.Header(wire.CmdDeleteSegments)
	body := bodyOf(&wire.DeleteSegments{Stream: sid, Topic: tid, Partition: 0, Count: 2})
	rep, err := c.Exchange(h, body)
	require.NoError(t, err)
	require.Zero(t, rep.Status(), "a partly done delete_segments is not committed")
	ok(t, rep)
	after := segments()
	require.Less(t, after, before)

	again, err := c.Exchange(h, body) // the client retries the same request id
	require.NoError(t, err)
	require.Equal(t, rep.Body, again.Body)
	require.Equal(t, after, segments(), "the retry dropped more segments")
}
