package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// startChildBroker runs a broker on dir in a child process (see
// TestHelperBrokerProcess) and returns its address and a function that
// SIGKILLs it and waits for it.
func startChildBroker(t *testing.T, dir, fsync string) (string, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBrokerProcess$")
	cmd.Env = append(os.Environ(), "FERRY_BROKER_CHILD_DIR="+dir, "FERRY_BROKER_CHILD_FSYNC="+fsync)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var once sync.Once
	kill := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(kill)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, found := strings.CutPrefix(sc.Text(), "ADDR "); found {
			return a, kill
		}
		require.False(t, strings.HasPrefix(sc.Text(), "ERROR"), sc.Text())
	}
	t.Fatal("the child broker did not start")
	return "", nil
}

// killState is what the broker acknowledged across the kill loop, and
// what was in flight when it was killed (applied or not, both are fine).
type killState struct {
	mu      sync.Mutex
	batches map[uint32][]ackedBatch // per partition, in ack order
	next    map[uint32]uint64       // per partition: offsets below were acknowledged
	offsets map[[2]uint32]uint64    // (consumer, partition) -> acknowledged offset
	pending map[[2]uint32]uint64    // a store in flight at the kill
	topics  map[string]bool         // tmp topics acknowledged as existing
	topicOp string                  // a create/delete in flight at the kill: the topic's name
	seq     int
}

type ackedBatch struct {
	base     uint64
	payloads []string
}

const killParts = 2

func openKillClient(t *testing.T, addr string) *rawclient.Client {
	t.Helper()
	c, err := rawclient.Dial(context.Background(), addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	rep, err := c.Login("iggy", "iggy")
	require.NoError(t, err)
	require.Nil(t, rep.Eviction)
	return c
}

// The broker is SIGKILLed at random points while clients send batches,
// store offsets and create and delete topics; with FsyncAlways everything
// it acknowledged must be there after each restart: every message once,
// in order, at its offset; every stored offset; every metadata change.
func TestKillLoop(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills and restarts a broker process several times")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	dir := t.TempDir()
	st := &killState{
		batches: map[uint32][]ackedBatch{}, next: map[uint32]uint64{},
		offsets: map[[2]uint32]uint64{}, pending: map[[2]uint32]uint64{}, topics: map[string]bool{},
	}
	sid, tid := wire.NamedID("s"), wire.NamedID("main")
	for round := 0; round < 5; round++ {
		addr, kill := startChildBroker(t, dir, "always")
		admin := openKillClient(t, addr)
		if round == 0 {
			setupNamed(t, admin)
		} else {
			verifyKillState(t, admin, st, round)
		}
		var wg sync.WaitGroup
		for p := uint32(0); p < killParts; p++ {
			c := openKillClient(t, addr)
			wg.Go(func() { killSender(t, c, st, round, p, sid, tid) })
		}
		oc := openKillClient(t, addr)
		wg.Go(func() { killOffsets(t, oc, st, rand.New(rand.NewPCG(seed+uint64(round), 1)), sid, tid) })
		mc := openKillClient(t, addr)
		wg.Go(func() { killTopics(t, mc, st, rand.New(rand.NewPCG(seed+uint64(round), 2)), sid) })
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		kill()
		wg.Wait()
		if t.Failed() {
			return
		}
	}
	b := brokertest.Start(t, brokertest.DataDir(dir))
	verifyKillState(t, login(t, b), st, 5)
	for p := uint32(0); p < killParts; p++ {
		require.NotEmpty(t, st.batches[p], "partition %d: no batch was acknowledged in the whole run", p)
	}
}

func setupNamed(t *testing.T, c *rawclient.Client) {
	createStream(t, c, "s")
	createTopic(t, c, wire.NamedID("s"), "main", killParts)
}

// killSender sends numbered batches to partition p until the broker dies,
// recording each acknowledged one.
func killSender(t *testing.T, c *rawclient.Client, st *killState, round int, p uint32, sid, tid wire.Identifier) {
	for seq := 0; ; seq++ {
		n := 1 + seq%4
		payloads := make([]string, n)
		for i := range payloads {
			payloads[i] = fmt.Sprintf("r%d-p%d-s%d-%d", round, p, seq, i)
		}
		body, err := wire.AppendSendMessages(nil, sid, tid, wire.ToPartition(p), messages(payloads...))
		if err != nil {
			t.Errorf("encode: %v", err)
			return
		}
		rep, err := c.Do(wire.CmdSendMessages, body)
		if err != nil || rep.Eviction != nil {
			return // killed: this batch may or may not be stored
		}
		var conf wire.SendReply
		if rep.Status() != 0 || wire.Unmarshal(rep.Body, &conf) != nil || len(conf) != 1 {
			t.Errorf("partition %d: send refused: status %d", p, rep.Status())
			return
		}
		st.mu.Lock()
		st.batches[p] = append(st.batches[p], ackedBatch{conf[0].BaseOffset, payloads})
		st.next[p] = conf[0].BaseOffset + uint64(n)
		st.mu.Unlock()
	}
}

func killOffsets(t *testing.T, c *rawclient.Client, st *killState, rng *rand.Rand, sid, tid wire.Identifier) {
	for {
		k := [2]uint32{1 + rng.Uint32N(3), rng.Uint32N(killParts)}
		st.mu.Lock()
		limit := st.next[k[1]]
		st.mu.Unlock()
		if limit == 0 {
			if _, err := c.Do(wire.CmdPing, nil); err != nil {
				return
			}
			continue
		}
		off := rng.Uint64N(limit)
		st.mu.Lock()
		st.pending[k] = off
		st.mu.Unlock()
		ref := wire.ConsumerOffsetRef{Consumer: single(k[0]), Stream: sid, Topic: tid, Partition: wire.Partition(k[1])}
		rep, err := c.Do(wire.CmdStoreConsumerOffset, bodyOf(&wire.StoreConsumerOffset{ConsumerOffsetRef: ref, Offset: off}))
		if err != nil || rep.Eviction != nil {
			return
		}
		if _, code, err := rep.Result(); rep.Status() != 0 || code != 0 || err != nil {
			t.Errorf("store offset %d for %v refused: status %d code %d", off, k, rep.Status(), code)
			return
		}
		st.mu.Lock()
		st.offsets[k] = off
		delete(st.pending, k)
		st.mu.Unlock()
	}
}

func killTopics(t *testing.T, c *rawclient.Client, st *killState, rng *rand.Rand, sid wire.Identifier) {
	for {
		st.mu.Lock()
		var name string
		create := len(st.topics) < 3 || rng.IntN(2) == 0
		if create {
			st.seq++
			name = fmt.Sprintf("tmp-%d", st.seq)
		} else {
			names := make([]string, 0, len(st.topics))
			for n := range st.topics {
				names = append(names, n)
			}
			sort.Strings(names)
			name = names[rng.IntN(len(names))]
		}
		st.topicOp = name
		st.mu.Unlock()
		var rep *rawclient.Reply
		var err error
		if create {
			rep, err = c.Do(wire.CmdCreateTopic, bodyOf(&wire.CreateTopic{Stream: sid, PartitionsCount: 1, Name: name}))
		} else {
			rep, err = c.Do(wire.CmdDeleteTopic, bodyOf(&wire.TopicRef{Stream: sid, Topic: wire.NamedID(name)}))
		}
		if err != nil || rep.Eviction != nil {
			return
		}
		if _, code, err := rep.Result(); rep.Status() != 0 || code != 0 || err != nil {
			t.Errorf("create %v / delete of topic %s refused: status %d code %d", create, name, rep.Status(), code)
			return
		}
		st.mu.Lock()
		if create {
			st.topics[name] = true
		} else {
			delete(st.topics, name)
		}
		st.topicOp = ""
		st.mu.Unlock()
	}
}

// verifyKillState checks a restarted broker against st, then settles what
// was in flight at the kill to what the broker kept.
func verifyKillState(t *testing.T, c *rawclient.Client, st *killState, round int) {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	sid, tid := wire.NamedID("s"), wire.NamedID("main")
	for p := uint32(0); p < killParts; p++ {
		var log []wire.Message
		for {
			r := poll(t, c, wire.PollMessages{Consumer: single(1), Stream: sid, Topic: tid, Partition: wire.Partition(p),
				Strategy: wire.AtOffset(uint64(len(log))), Count: 1000})
			if len(r.Messages) == 0 {
				break
			}
			log = append(log, r.Messages...)
		}
		seen := map[string]bool{}
		for i, m := range log {
			require.Equal(t, uint64(i), m.Offset, "round %d partition %d: offsets are not contiguous", round, p)
			require.False(t, seen[string(m.Payload)], "round %d partition %d: %q stored twice", round, p, m.Payload)
			seen[string(m.Payload)] = true
		}
		for _, b := range st.batches[p] {
			for i, want := range b.payloads {
				at := b.base + uint64(i)
				require.Less(t, at, uint64(len(log)), "round %d partition %d: acknowledged %q at offset %d is gone", round, p, want, at)
				require.Equal(t, want, string(log[at].Payload), "round %d partition %d offset %d", round, p, at)
			}
		}
		t.Logf("round %d partition %d: %d messages, %d batches acknowledged", round, p, len(log), len(st.batches[p]))
		// An unacknowledged batch the broker kept moves the next offset on.
		st.next[p] = max(st.next[p], uint64(len(log)))
	}
	for _, k := range offsetKeys(st) {
		ref := wire.ConsumerOffsetRef{Consumer: single(k[0]), Stream: sid, Topic: tid, Partition: wire.Partition(k[1])}
		body := ok(t, do(t, c, wire.CmdGetConsumerOffset, &ref))
		acked, hasAcked := st.offsets[k]
		pend, hasPend := st.pending[k]
		if len(body) == 0 {
			require.False(t, hasAcked, "round %d: acknowledged offset %d of %v is gone", round, acked, k)
			delete(st.pending, k)
			continue
		}
		got := decodeAs[wire.ConsumerOffsetInfo](t, body).StoredOffset
		if !(hasAcked && got == acked) && !(hasPend && got == pend) {
			t.Fatalf("round %d: offset of %v is %d, acknowledged %d (%v), in flight %d (%v)", round, k, got, acked, hasAcked, pend, hasPend)
		}
		st.offsets[k] = got
		delete(st.pending, k)
	}
	list := decodeAs[wire.TopicList](t, ok(t, do(t, c, wire.CmdGetTopics, &wire.StreamRef{Stream: sid})))
	got := map[string]bool{}
	for _, h := range list {
		if strings.HasPrefix(h.Name, "tmp-") {
			got[h.Name] = true
		}
	}
	for name := range got {
		require.True(t, st.topics[name] || name == st.topicOp, "round %d: topic %s exists but its creation was not acknowledged (or its deletion was)", round, name)
	}
	for name := range st.topics {
		require.True(t, got[name] || name == st.topicOp, "round %d: acknowledged topic %s is gone", round, name)
	}
	t.Logf("round %d: %d offsets, %d tmp topics", round, len(st.offsets), len(got))
	st.topics, st.topicOp = got, ""
}

func offsetKeys(st *killState) [][2]uint32 {
	set := map[[2]uint32]bool{}
	for k := range st.offsets {
		set[k] = true
	}
	for k := range st.pending {
		set[k] = true
	}
	out := make([][2]uint32, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	return out
}
