package iggystate

import (
	"context"

	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/state"
	"github.com/ferryhq/ferry/state/statetest"
	"github.com/stretchr/testify/require"
)

func dial(t testing.TB, b *broker.Broker) *iggy.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var topicSeq atomic.Int64

// openTestStore opens a store on a fresh topic of b.
func openTestStore(t testing.TB, c *iggy.Client, topic string, opts ...Option) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, c, "ferry", topic, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestStoreSuite is the state.Store contract (a copy of package state's
// runStoreSuite, which is not exported) run against the Iggy store on
// the embedded broker.
func TestStoreSuite(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	c := dial(t, b)
	statetest.Run(t, func(t *testing.T) state.Store {
		return openTestStore(t, c, fmt.Sprintf("suite-%d", topicSeq.Add(1)))
	})
}

// Beyond the contract: versions outlive a Delete (a version from before it
// is refused, a new one is not reused), and "@" in a key, which the
// records' message keys use to add the epoch, is an ordinary character.
func TestVersionsOutliveDeleteAndAtInKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := brokertest.Start(t, brokertest.InMemory())
	s := openTestStore(t, dial(t, b), "beyond")
	v0, err := s.Save(ctx, "src", []byte("one"), "")
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, "src"))
	_, err = s.Save(ctx, "src", []byte("stale"), v0)
	require.ErrorIs(t, err, state.ErrConflict, "a version from before the delete is not current")
	v, err := s.Save(ctx, "src", []byte("reborn"), "")
	require.NoError(t, err)
	require.NotEqual(t, v0, v, "versions are not reused after a delete")

	_, err = s.Save(ctx, "a@1", []byte("at"), "")
	require.NoError(t, err)
	st, err := s.Load(ctx, "a@1")
	require.NoError(t, err)
	require.Equal(t, []byte("at"), st.Data)
	_, err = s.Load(ctx, "a")
	require.ErrorIs(t, err, state.ErrNotFound)
}

// TestReopenReadsState: a store opened again on the topic (by another
// client, as another process would) loads what the first saved and
// deleted, and continues its versions.
func TestReopenReadsState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := brokertest.Start(t)
	s1 := openTestStore(t, dial(t, b), "reopen")
	v, err := s1.Save(ctx, "a", []byte("a1"), "")
	require.NoError(t, err)
	v, err = s1.Save(ctx, "a", []byte("a2"), v)
	require.NoError(t, err)
	_, err = s1.Save(ctx, "gone", []byte("x"), "")
	require.NoError(t, err)
	require.NoError(t, s1.Delete(ctx, "gone"))

	s2 := openTestStore(t, dial(t, b), "reopen")
	st, err := s2.Load(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, state.State{Data: []byte("a2"), Version: v}, st)
	_, err = s2.Load(ctx, "gone")
	require.ErrorIs(t, err, state.ErrNotFound)
	v2, err := s2.Save(ctx, "a", []byte("a3"), v)
	require.NoError(t, err)
	// The first store reads what the second wrote before its next save.
	_, err = s1.Save(ctx, "a", []byte("lost update"), v)
	require.ErrorIs(t, err, state.ErrConflict)
	st, err = s1.Load(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, state.State{Data: []byte("a3"), Version: v2}, st)
}

// TestEpochFencing: two writers of one key at different epochs, as an old
// and a new lease holder. The older is refused once the newer has
// claimed or saved, even with the version it last had, and the newer's
// state is what a reopened store loads.
func TestEpochFencing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := brokertest.Start(t)
	old := openTestStore(t, dial(t, b), "fence")
	require.NoError(t, old.SetEpoch("src", 3))
	vOld, err := old.Save(ctx, "src", []byte("old-1"), "")
	require.NoError(t, err)
	require.Equal(t, state.Version("3:1"), vOld)

	// The new holder, epoch 7, starts from the old holder's state.
	nw := openTestStore(t, dial(t, b), "fence")
	require.NoError(t, nw.SetEpoch("src", 7))
	st, err := nw.Load(ctx, "src")
	require.NoError(t, err)
	require.Equal(t, state.State{Data: []byte("old-1"), Version: vOld}, st)
	// Until the new holder writes, the old one may continue.
	vOld, err = old.Save(ctx, "src", []byte("old-2"), vOld)
	require.NoError(t, err)
	_, err = nw.Save(ctx, "src", []byte("new-1"), st.Version)
	require.ErrorIs(t, err, state.ErrConflict, "the new holder's view was stale")
	require.NotErrorIs(t, err, ErrFenced, "a plain version conflict")
	st, err = nw.Load(ctx, "src")
	require.NoError(t, err)
	vNew, err := nw.Save(ctx, "src", []byte("new-1"), st.Version)
	require.NoError(t, err)
	require.Equal(t, state.Version("7:1"), vNew)

	// The old holder is refused, with its own version or the new one.
	_, err = old.Save(ctx, "src", []byte("old-3"), vOld)
	require.ErrorIs(t, err, state.ErrConflict)
	require.ErrorIs(t, err, ErrFenced)
	var ce *state.ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, vNew, ce.Actual)
	require.Contains(t, err.Error(), "epoch 7")
	_, err = old.Save(ctx, "src", []byte("old-3"), vNew)
	require.ErrorIs(t, err, state.ErrConflict)
	require.ErrorIs(t, old.Delete(ctx, "src"), state.ErrConflict)
	require.ErrorIs(t, old.Claim(ctx, "src", 5), state.ErrConflict)
	require.Error(t, nw.SetEpoch("src", 6), "an epoch never goes down")

	re := openTestStore(t, dial(t, b), "fence")
	st, err = re.Load(ctx, "src")
	require.NoError(t, err)
	require.Equal(t, state.State{Data: []byte("new-1"), Version: vNew}, st)
	// The old epoch's records got a deletion marker with the new record.
	r := re.keys["src"].byEpoch[3]
	require.NotNil(t, r)
	require.True(t, r.deleted)
}

// TestClaimFencesAtOnce: Claim writes the state again at the new epoch,
// so the old holder is refused before the new one saves anything.
func TestClaimFencesAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := brokertest.Start(t)
	old := openTestStore(t, dial(t, b), "claim")
	require.NoError(t, old.SetEpoch("src", 1))
	v, err := old.Save(ctx, "src", []byte("pos=10"), "")
	require.NoError(t, err)

	nw := openTestStore(t, dial(t, b), "claim")
	require.NoError(t, nw.Claim(ctx, "src", 2))
	st, err := nw.Load(ctx, "src")
	require.NoError(t, err)
	require.Equal(t, state.State{Data: []byte("pos=10"), Version: "2:1"}, st)
	_, err = old.Save(ctx, "src", []byte("pos=11"), v)
	require.ErrorIs(t, err, state.ErrConflict)
	require.NoError(t, nw.Claim(ctx, "src", 2), "claiming again at the same epoch changes nothing")
	st2, err := nw.Load(ctx, "src")
	require.NoError(t, err)
	require.Equal(t, st, st2)
	// A key without state: Claim writes nothing.
	require.NoError(t, nw.Claim(ctx, "fresh", 2))
	_, err = nw.Load(ctx, "fresh")
	require.ErrorIs(t, err, state.ErrNotFound)
}

// TestCorruptRecordIsReported: a message that is not an envelope on the
// state topic is reported as corrupt, naming its offset, not skipped.
func TestCorruptRecordIsReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := brokertest.Start(t, brokertest.InMemory())
	c := dial(t, b)
	s := openTestStore(t, c, "corrupt")
	_, err := s.Save(ctx, "src", []byte("x"), "")
	require.NoError(t, err)
	_, err = c.SendMessages(ctx, iggy.NamedID("ferry"), iggy.NamedID("corrupt"), iggy.ToPartition(0),
		[]iggy.Message{{Payload: []byte("not a state record")}})
	require.NoError(t, err)
	_, err = s.Load(ctx, "src")
	require.ErrorIs(t, err, state.ErrCorrupt)
	require.Contains(t, err.Error(), "offset 1")
	_, err = Open(ctx, c, "ferry", "corrupt")
	require.ErrorIs(t, err, state.ErrCorrupt)
}

// TestOpenRefusesManyPartitions: a state topic must have one partition.
func TestOpenRefusesManyPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := brokertest.Start(t, brokertest.InMemory())
	c := dial(t, b)
	_, err := c.CreateStream(ctx, "ferry")
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("ferry"), "three", 3)
	require.NoError(t, err)
	_, err = Open(ctx, c, "ferry", "three")
	require.ErrorContains(t, err, "3 partitions")
	_, err = Open(ctx, nil, "ferry", "x")
	require.Error(t, err)
	_, err = Open(ctx, c, "", "x")
	require.Error(t, err)
}
