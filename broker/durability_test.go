package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

func TestRestartRestoresEverything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b1 := brokertest.Start(t, brokertest.DataDir(dir))
	c := login(t, b1)
	createStream(t, c, "first")
	gone := createStream(t, c, "gone")
	sid := wire.NumericID(createStream(t, c, "keep").ID)
	ok(t, do(t, c, wire.CmdDeleteStream, &wire.StreamRef{Stream: wire.NumericID(gone.ID)}))
	tp := createTopic(t, c, sid, "events", 3,
		wire.TopicOption(wire.OptSegmentSize, wire.Uint64Value(1<<20)),
		wire.TopicOption(wire.OptEnforceFsync, wire.BoolValue(true)),
		wire.TopicOption(wire.OptMessageExpiry, wire.StringValue("1d")))
	tid := wire.NumericID(tp.ID)
	for i := 0; i < 4; i++ {
		send(t, c, sid, tid, wire.ToPartition(uint32(i%3)), numbered("m", 10*i, 5)...)
	}
	mkGroup := func(c *rawclient.Client, name string) uint32 {
		return decodeAs[wire.GroupDetails](t, ok(t, do(t, c, wire.CmdCreateConsumerGroup, &wire.CreateConsumerGroup{Stream: sid, Topic: tid, Name: name}))).ID
	}
	gid := mkGroup(c, "g")
	ok(t, do(t, c, wire.CmdDeleteConsumerGroup, &wire.GroupRef{Stream: sid, Topic: tid, Group: wire.NumericID(mkGroup(c, "h"))}))
	gref := &wire.GroupRef{Stream: sid, Topic: tid, Group: wire.NumericID(gid)}
	ok(t, do(t, c, wire.CmdJoinConsumerGroup, gref))
	poll(t, c, wire.PollMessages{Consumer: groupConsumer(gid), Stream: sid, Topic: tid, Partition: wire.Partition(1), Strategy: wire.Next(), Count: 3, AutoCommit: true})
	single7 := wire.ConsumerOffsetRef{Consumer: single(7), Stream: sid, Topic: tid, Partition: wire.Partition(0)}
	ok(t, do(t, c, wire.CmdStoreConsumerOffset, &wire.StoreConsumerOffset{ConsumerOffsetRef: single7, Offset: 8, Ack: 0}))
	token := decodeAs[wire.CreatePATReply](t, ok(t, do(t, c, wire.CmdCreatePAT, &wire.CreatePAT{Name: "ci-token"}))).Token

	snapshot := func(c *rawclient.Client) map[string][]byte {
		out := map[string][]byte{
			"streams": ok(t, do(t, c, wire.CmdGetStreams, nil)),
			"topic":   ok(t, do(t, c, wire.CmdGetTopic, &wire.TopicRef{Stream: sid, Topic: tid})),
			"groups":  ok(t, do(t, c, wire.CmdGetConsumerGroups, &wire.TopicRef{Stream: sid, Topic: tid})),
			"offset":  ok(t, do(t, c, wire.CmdGetConsumerOffset, &single7)),
			"group offset": ok(t, do(t, c, wire.CmdGetConsumerOffset, &wire.ConsumerOffsetRef{
				Consumer: groupConsumer(gid), Stream: sid, Topic: tid, Partition: wire.Partition(1)})),
			"pats": ok(t, do(t, c, wire.CmdGetPATs, nil)),
		}
		for p := uint32(0); p < 3; p++ {
			out["poll"+itoa(uint64(p))] = ok(t, do(t, c, wire.CmdPollMessages, &wire.PollMessages{
				Consumer: single(1), Stream: sid, Topic: tid, Partition: wire.Partition(p), Strategy: wire.First(), Count: 100}))
		}
		return out
	}
	// Drop the membership first: members are not durable.
	ok(t, do(t, c, wire.CmdLeaveConsumerGroup, gref))
	before := snapshot(c)
	require.NoError(t, b1.Close())

	b2 := brokertest.Start(t, brokertest.DataDir(dir))
	c2 := dial(t, b2)
	_, err := c2.LoginPAT(token)
	require.NoError(t, err)
	require.NotZero(t, c2.Session, "the PAT survives the restart")
	after := snapshot(c2)
	for k := range before {
		require.Equal(t, before[k], after[k], "%s after the restart", k)
	}
	require.Equal(t, uint64(2), decodeAs[wire.ConsumerOffsetInfo](t, after["group offset"]).StoredOffset)
	require.Equal(t, uint64(10), send(t, c2, sid, tid, wire.ToPartition(0), "new").BaseOffset)
	require.Equal(t, uint32(2), mkGroup(c2, "i"), "group ids continue")
	require.Equal(t, gone.ID, createStream(t, c2, "again").ID, "the lowest free stream id")
}

// TestHelperBrokerProcess is the child process of
// TestKilledBrokerKeepsAcknowledgedData and TestKillLoop; it does nothing
// in a normal run. FERRY_BROKER_CHILD_FSYNC names the fsync policy
// (default never).
func TestHelperBrokerProcess(t *testing.T) {
	dir := os.Getenv("FERRY_BROKER_CHILD_DIR")
	if dir == "" {
		t.Skip("helper process for TestKilledBrokerKeepsAcknowledgedData")
	}
	policy := broker.FsyncNever
	if s := os.Getenv("FERRY_BROKER_CHILD_FSYNC"); s != "" {
		p, err := broker.ParseFsyncPolicy(s)
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		policy = p
	}
	b, err := broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0", DataDir: dir, Fsync: policy})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("ADDR", b.Addr())
	time.Sleep(5 * time.Minute) // until killed
	os.Exit(2)
}

func TestKilledBrokerKeepsAcknowledgedData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBrokerProcess$")
	cmd.Env = append(os.Environ(), "FERRY_BROKER_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(out)
	var addr string
	for sc.Scan() {
		if a, found := strings.CutPrefix(sc.Text(), "ADDR "); found {
			addr = a
			break
		}
		require.False(t, strings.HasPrefix(sc.Text(), "ERROR"), sc.Text())
	}
	require.NotEmpty(t, addr, "the child broker did not start")

	c, err := rawclient.Dial(context.Background(), addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Login("iggy", "iggy")
	require.NoError(t, err)
	sid, tid := setup(t, c, 2)
	for i := 0; i < 10; i++ {
		send(t, c, sid, tid, wire.ToPartition(uint32(i%2)), numbered("k", 3*i, 3)...)
	}
	ref := wire.ConsumerOffsetRef{Consumer: single(3), Stream: sid, Topic: tid, Partition: wire.Partition(1)}
	ok(t, do(t, c, wire.CmdStoreConsumerOffset, &wire.StoreConsumerOffset{ConsumerOffsetRef: ref, Offset: 11, Ack: 0}))
	poll(t, c, wire.PollMessages{Consumer: single(4), Stream: sid, Topic: tid, Partition: wire.Partition(0),
		Strategy: wire.Next(), Count: 7, AutoCommit: true})

	require.NoError(t, cmd.Process.Kill())
	cmd.Wait()

	b := brokertest.Start(t, brokertest.DataDir(dir))
	c2 := login(t, b)
	require.Equal(t, uint64(11), decodeAs[wire.ConsumerOffsetInfo](t, ok(t, do(t, c2, wire.CmdGetConsumerOffset, &ref))).StoredOffset)
	auto := ref
	auto.Consumer, auto.Partition = single(4), wire.Partition(0)
	require.Equal(t, uint64(6), decodeAs[wire.ConsumerOffsetInfo](t, ok(t, do(t, c2, wire.CmdGetConsumerOffset, &auto))).StoredOffset)
	for p := uint32(0); p < 2; p++ {
		r := poll(t, c2, wire.PollMessages{Consumer: single(1), Stream: sid, Topic: tid, Partition: wire.Partition(p), Strategy: wire.First(), Count: 100})
		require.Len(t, r.Messages, 15, "partition %d keeps every acknowledged message", p)
	}
	_, err = os.Stat(filepath.Join(dir, "metadata.json"))
	require.NoError(t, err)
}

func TestDataDirIsExclusive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	brokertest.Start(t, brokertest.DataDir(dir))
	_, err := broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0", DataDir: dir})
	require.ErrorContains(t, err, "in use")
}

func TestCorruptMetadataRefusesToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "metadata.json"), []byte(`{"version":1,"streams":[{"id":0,"name":""}]}`), 0o644))
	_, err := broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0", DataDir: dir})
	require.ErrorContains(t, err, "metadata")
	// The failed start released the directory.
	require.NoError(t, os.Remove(filepath.Join(dir, "metadata.json")))
	brokertest.Start(t, brokertest.DataDir(dir))
}
