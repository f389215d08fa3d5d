package live

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func admitAll(t *testing.T, tr *tracker, id uint32, offsets ...uint64) []*mark {
	t.Helper()
	var out []*mark
	for _, off := range offsets {
		m, ok := tr.admit(id, off)
		require.True(t, ok, "offset %d", off)
		out = append(out, m)
	}
	return out
}

func pending(tr *tracker) map[uint32]uint64 {
	out := map[uint32]uint64{}
	for _, o := range tr.toStore() {
		out[o.partition] = o.offset
	}
	return out
}

// TestTrackerStoresTheProcessedPrefix: the offset to store is the last of
// the processed prefix, whatever order Done comes in.
func TestTrackerStoresTheProcessedPrefix(t *testing.T) {
	t.Parallel()
	tr := newTracker(false)
	tr.begin(0, 5, 0, false)
	tr.start([]uint32{0})
	ms := admitAll(t, tr, 0, 0, 1, 2, 3, 4)
	ms[2].done()
	ms[1].done()
	require.Empty(t, pending(tr), "offset 0 is not processed")
	ms[0].done()
	require.Equal(t, map[uint32]uint64{0: 2}, pending(tr))
	ms[0].done() // again: no effect
	ms[4].done()
	require.Equal(t, map[uint32]uint64{0: 2}, pending(tr))
	require.False(t, closed(tr.ready))
	ms[3].done()
	require.Equal(t, map[uint32]uint64{0: 4}, pending(tr))
	require.True(t, closed(tr.ready))
	tr.stored(0, 4)
	require.Empty(t, pending(tr))
}

// TestTrackerFloor: without replay, a partition that moved on (another
// member stored further) never takes an older offset back.
func TestTrackerFloor(t *testing.T) {
	t.Parallel()
	tr := newTracker(false)
	tr.begin(0, 0, 3, true)
	tr.start([]uint32{0})
	_, ok := tr.admit(0, 3)
	require.False(t, ok, "offset 3 is stored: not delivered again")
	ms := admitAll(t, tr, 0, 4, 5, 6)
	_, ok = tr.admit(0, 5)
	require.False(t, ok, "offset 5 was delivered")
	require.True(t, tr.gap(0, 30))
	require.False(t, tr.gap(0, 7))
	tr.raiseFloor(0, 29)
	for _, m := range ms {
		m.done()
	}
	require.Empty(t, pending(tr), "6 is below the stored 29: not stored")
	m := admitAll(t, tr, 0, 30)[0]
	m.done()
	require.Equal(t, map[uint32]uint64{0: 30}, pending(tr))
	tr.stored(0, 30)
	tr.stored(0, 12) // a late answer for an older store does not lower the floor
	_, ok = tr.admit(0, 20)
	require.False(t, ok)
}

// TestTrackerReplay: with replay, re-read offsets are delivered and their
// stores may go back.
func TestTrackerReplay(t *testing.T) {
	t.Parallel()
	tr := newTracker(true)
	tr.begin(0, 0, 3, true)
	tr.start(nil)
	require.True(t, closed(tr.ready), "no partition assigned: nothing to wait for")
	first := admitAll(t, tr, 0, 4, 5)
	again := admitAll(t, tr, 0, 4, 5)
	first[0].done()
	first[1].done()
	require.Equal(t, map[uint32]uint64{0: 5}, pending(tr))
	tr.stored(0, 5)
	again[0].done()
	require.Equal(t, map[uint32]uint64{0: 4}, pending(tr), "the replayed 4 is stored, back from 5")
	tr.drop(0, 4)
	require.Empty(t, pending(tr))
}

// TestTrackerReadinessFollowsAssignment: only assigned partitions count.
func TestTrackerReadinessFollowsAssignment(t *testing.T) {
	t.Parallel()
	tr := newTracker(false)
	tr.begin(0, 2, 0, false)
	tr.begin(1, 2, 1, true) // processed by the group before
	tr.start([]uint32{0, 1})
	require.False(t, closed(tr.ready))
	tr.setAssigned([]uint32{1})
	require.True(t, closed(tr.ready), "partition 1 was caught up at the start")
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
