package storage

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// A backend whose files fail on demand, to drive the error paths of the
// shared engine (the file backend behaves the same way on real I/O errors).

var errInjected = errors.New("injected fault")

type faults struct{ logWrite, logTruncate, logSync, idxWrite bool }

type faultBlob struct {
	memBlob
	f     *faults
	isLog bool
}

func (b *faultBlob) WriteAt(p []byte, off int64) (int, error) {
	if (b.isLog && b.f.logWrite) || (!b.isLog && b.f.idxWrite) {
		n, _ := b.memBlob.WriteAt(p[:len(p)/2], off) // a torn write
		return n, errInjected
	}
	return b.memBlob.WriteAt(p, off)
}

func (b *faultBlob) Truncate(size int64) error {
	if b.isLog && b.f.logTruncate {
		return errInjected
	}
	return b.memBlob.Truncate(size)
}

func (b *faultBlob) Sync() error {
	if b.isLog && b.f.logSync {
		return errInjected
	}
	return nil
}

type faultBackend struct {
	f    *faults
	segs map[uint64]*segment
}

func (fb faultBackend) create(base uint64) (*segment, error) {
	lb, ib := &faultBlob{f: fb.f, isLog: true}, &faultBlob{f: fb.f}
	var h [fileHeaderSize]byte
	putFileHeader(h[:], logMagic, base)
	_, _ = lb.memBlob.WriteAt(h[:], 0)
	putFileHeader(h[:], indexMagic, base)
	_, _ = ib.memBlob.WriteAt(h[:], 0)
	s := newSegment(base, lb, ib, name("fault segment %d", base))
	fb.segs[base] = s
	return s, nil
}

func (fb faultBackend) remove(s *segment) error { return s.closeFiles() }
func (fb faultBackend) close() error            { return nil }

func newFaultLog(t *testing.T) (*partitionLog, *faults, map[uint64]*segment) {
	f := &faults{}
	be := faultBackend{f: f, segs: map[uint64]*segment{}}
	l := newPartitionLog(Options{}.withDefaults(), be, nil)
	_, err := l.activeFor(0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l, f, be.segs
}

func blobBytes(t *testing.T, b blob) []byte {
	mb := &b.(*faultBlob).memBlob
	out := make([]byte, mb.size)
	_, err := mb.ReadAt(out, 0)
	require.NoError(t, err)
	return out
}

func TestAppendWriteFailureCutsBack(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		set  func(f *faults)
	}{
		{"write", func(f *faults) { f.logWrite = true }},
		{"fsync", func(f *faults) { f.logSync = true }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l, f, segs := newFaultLog(t)
			l.opts.Fsync = true
			appendCounts(t, l, 10, 2)
			size := segs[0].log.(*faultBlob).size
			c.set(f)
			require.ErrorIs(t, l.Append(buildRecord(t, 2, 3, 10, tsFor(2))), errInjected)
			require.EqualValues(t, 2, l.NextOffset())
			require.Equal(t, size, segs[0].log.(*faultBlob).size, "the torn record was cut off")
			*f = faults{}
			appendCounts(t, l, 10, 3)
			checkRange(t, readMessages(t, l, 0, 10), 0, 5, 10)
		})
	}
}

func TestAppendFailsUntilReopenWhenCutBackFails(t *testing.T) {
	t.Parallel()
	l, f, _ := newFaultLog(t)
	appendCounts(t, l, 10, 2)
	f.logWrite, f.logTruncate = true, true
	require.ErrorIs(t, l.Append(buildRecord(t, 2, 3, 10, tsFor(2))), errInjected)
	*f = faults{}
	err := l.Append(buildRecord(t, 2, 3, 10, tsFor(2)))
	require.ErrorContains(t, err, "unusable until reopened")
	checkRange(t, readMessages(t, l, 0, 10), 0, 2, 10)
	require.NoError(t, l.Purge())
	appendCounts(t, l, 10, 1)
	checkRange(t, readMessages(t, l, 0, 10), 0, 1, 10)
}

func TestIndexWriteFailureIsRepairedOnSync(t *testing.T) {
	t.Parallel()
	l, f, segs := newFaultLog(t)
	appendCounts(t, l, 10, 2)
	f.idxWrite = true
	appendCounts(t, l, 10, 3, 1) // the log is the truth: appends succeed
	require.True(t, segs[0].idxStale)
	f.idxWrite = false
	appendCounts(t, l, 10, 4)
	require.NoError(t, l.Sync())
	require.False(t, segs[0].idxStale)
	want := appendIndex(nil, 0, segs[0].entries)
	require.Equal(t, want, blobBytes(t, segs[0].idx))
	entries, err := parseIndex(want, 0, segs[0].endPos())
	require.NoError(t, err)
	require.Len(t, entries, 4)
}
