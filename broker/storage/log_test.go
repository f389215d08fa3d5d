package storage

import (
	"testing"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// The tests in this file run against both implementations (testAllLogs);
// a reopen is a real close and OpenFile for the file log.

func TestEmptyLog(t *testing.T) {
	t.Parallel()
	testAllLogs(t, func(t *testing.T, h *harness) {
		l := h.open(Options{})
		require.Zero(t, l.NextOffset())
		require.Zero(t, l.FirstOffset())
		b, n, err := l.Read(nil, 0, 10)
		require.NoError(t, err)
		require.Zero(t, n)
		require.Empty(t, b)
		_, ok := l.OffsetAtTime(0)
		require.False(t, ok)
		require.Equal(t, []SegmentInfo{{Active: true}}, l.Segments())
		l = h.reopen()
		require.Equal(t, []SegmentInfo{{Active: true}}, l.Segments())
	})
}

func TestAppendReadRanges(t *testing.T) {
	t.Parallel()
	counts := []int{1, 5, 10, 3, 1, 7} // 27 messages, records at 0 1 6 16 19 20
	const total = 27
	testAllLogs(t, func(t *testing.T, h *harness) {
		l := h.open(Options{})
		recs := appendCounts(t, l, 20, counts...)
		require.EqualValues(t, total, l.NextOffset())
		for pass := range 2 {
			for off := uint64(0); off <= total+1; off++ {
				for _, max := range []uint32{1, 2, 4, 9, total, 1000} {
					end := min(off+uint64(max), total)
					if off >= total {
						end = off
					}
					checkRange(t, readMessages(t, l, off, max), off, end, 20)
				}
			}
			// Whole records come back byte for byte as appended.
			b, n, err := l.Read(nil, 0, total)
			require.NoError(t, err)
			require.EqualValues(t, total, n)
			var want []byte
			for _, r := range recs {
				want = append(want, r...)
			}
			require.Equal(t, want, b, "pass %d", pass)
			l = h.reopen()
		}
	})
}

func TestReadSlicesRecords(t *testing.T) {
	t.Parallel()
	testAllLogs(t, func(t *testing.T, h *harness) {
		l := h.open(Options{})
		appendCounts(t, l, 10, 10, 10, 10) // records at 0, 10, 20
		cases := []struct {
			off   uint64
			max   uint32
			bases []uint64 // base_offset of each returned record
			cnts  []uint32
		}{
			{3, 4, []uint64{0}, []uint32{4}},
			{0, 10, []uint64{0}, []uint32{10}},
			{9, 1, []uint64{0}, []uint32{1}},
			{5, 10, []uint64{0, 10}, []uint32{5, 5}},
			{5, 20, []uint64{0, 10, 20}, []uint32{5, 10, 5}},
			{12, 100, []uint64{10, 20}, []uint32{8, 10}},
			{29, 5, []uint64{20}, []uint32{1}},
		}
		for i, c := range cases {
			b, n, err := l.Read([]byte("prefix"), c.off, c.max)
			require.NoError(t, err, "case %d", i)
			require.Equal(t, "prefix", string(b[:6]), "case %d: dst is appended to", i)
			b = b[6:]
			var got []uint64
			var cnts []uint32
			var sum uint32
			for len(b) > 0 {
				hd, err := wire.DecodeBatchHeader(b)
				require.NoError(t, err, "case %d", i)
				got, cnts = append(got, hd.BaseOffset), append(cnts, hd.Count)
				sum += hd.Count
				var ck wire.BatchChecker
				_, err = ck.Validate(b[:hd.Length])
				require.NoError(t, err, "case %d: sliced record validates", i)
				b = b[hd.Length:]
			}
			require.Equal(t, c.bases, got, "case %d", i)
			require.Equal(t, c.cnts, cnts, "case %d", i)
			require.Equal(t, sum, n, "case %d", i)
			checkRange(t, readMessages(t, l, c.off, c.max), c.off, c.off+uint64(sum), 10)
		}
	})
}

func TestAppendRejects(t *testing.T) {
	t.Parallel()
	testAllLogs(t, func(t *testing.T, h *harness) {
		l := h.open(Options{})
		appendCounts(t, l, 10, 3)
		before := l.Segments()

		err := l.Append(buildRecord(t, 2, 1, 10, 5))
		require.ErrorIs(t, err, ErrOffsetMismatch)
		err = l.Append(buildRecord(t, 4, 1, 10, 5))
		require.ErrorIs(t, err, ErrOffsetMismatch)

		bad := buildRecord(t, 3, 2, 10, 5)
		bad[len(bad)-1]++ // payload no longer matches its frame checksum
		require.ErrorIs(t, l.Append(bad), wire.ErrInvalidMessageChecksum)
		bad = buildRecord(t, 3, 2, 10, 5)
		bad[16]++ // base_timestamp changed after stamping
		require.ErrorIs(t, l.Append(bad), wire.ErrInvalidBatchChecksum)
		require.ErrorIs(t, l.Append(bad[:100]), wire.ErrMalformed)
		require.Error(t, l.Append(nil))

		require.EqualValues(t, 3, l.NextOffset())
		require.Equal(t, before, l.Segments(), "nothing was written")
		l = h.reopen()
		require.Equal(t, before, l.Segments())
		appendCounts(t, l, 10, 2)
		checkRange(t, readMessages(t, l, 0, 100), 0, 5, 10)
	})
}

func TestSegmentRolling(t *testing.T) {
	t.Parallel()
	testAllLogs(t, func(t *testing.T, h *harness) {
		rec := buildRecord(t, 0, 4, 30, 0)
		size := uint64(len(rec))
		l := h.open(Options{SegmentSize: 2*size + 1}) // three records fill a segment
		appendCounts(t, l, 30, 4, 4, 4, 4, 4, 4, 4)   // 7 records
		want := []SegmentInfo{
			{BaseOffset: 0, NextOffset: 12, SizeBytes: 3 * size, Messages: 12, FirstTimestamp: tsFor(0), LastTimestamp: tsFor(8)},
			{BaseOffset: 12, NextOffset: 24, SizeBytes: 3 * size, Messages: 12, FirstTimestamp: tsFor(12), LastTimestamp: tsFor(20)},
			{BaseOffset: 24, NextOffset: 28, SizeBytes: size, Messages: 4, FirstTimestamp: tsFor(24), LastTimestamp: tsFor(24), Active: true},
		}
		require.Equal(t, want, l.Segments())
		checkRange(t, readMessages(t, l, 0, 100), 0, 28, 30)
		checkRange(t, readMessages(t, l, 10, 15), 10, 25, 30)
		l = h.reopen()
		require.Equal(t, want, l.Segments())
		checkRange(t, readMessages(t, l, 0, 100), 0, 28, 30)
		appendCounts(t, l, 30, 4, 4)
		require.Len(t, l.Segments(), 3)
		appendCounts(t, l, 30, 1)
		require.Len(t, l.Segments(), 4)
		checkRange(t, readMessages(t, l, 0, 100), 0, 37, 30)
	})
}

func TestOffsetAtTime(t *testing.T) {
	t.Parallel()
	testAllLogs(t, func(t *testing.T, h *harness) {
		rec := buildRecord(t, 0, 2, 10, 0)
		l := h.open(Options{SegmentSize: uint64(2 * len(rec))})
		// Two records per segment; the clock steps back inside the second.
		stamps := []uint64{100, 200, 300, 250, 250, 400, 500}
		for i, ts := range stamps {
			require.NoError(t, l.Append(buildRecord(t, uint64(2*i), 2, 10, ts)))
		}
		cases := []struct {
			ts   uint64
			want uint64
			ok   bool
		}{
			{0, 0, true}, {100, 0, true}, {101, 2, true}, {200, 2, true}, {201, 4, true},
			{250, 4, true}, {260, 4, true}, {300, 4, true}, {301, 10, true}, {500, 12, true}, {501, 0, false},
		}
		for pass := range 2 {
			for _, c := range cases {
				got, ok := l.OffsetAtTime(c.ts)
				require.Equal(t, c.ok, ok, "pass %d ts %d", pass, c.ts)
				require.Equal(t, c.want, got, "pass %d ts %d", pass, c.ts)
			}
			l = h.reopen()
		}
		n, err := l.DropOldest(1)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		got, ok := l.OffsetAtTime(0)
		require.True(t, ok)
		require.Equal(t, l.FirstOffset(), got)
	})
}

// Records larger than the memory log's 1 MiB chunks, read whole and sliced
// across chunk boundaries.
func TestLargeRecords(t *testing.T) {
	t.Parallel()
	testAllLogs(t, func(t *testing.T, h *harness) {
		l := h.open(Options{SegmentSize: 3 << 20})
		appendCounts(t, l, 1500, 900, 700, 1, 900, 800)
		require.Len(t, l.Segments(), 2)
		for pass := range 2 {
			for _, r := range []struct {
				off uint64
				max uint32
			}{{0, 5000}, {650, 1000}, {899, 2}, {1599, 1}, {1500, 1200}, {2500, 400}} {
				end := min(r.off+uint64(r.max), 3301)
				checkRange(t, readMessages(t, l, r.off, r.max), r.off, end, 1500)
			}
			l = h.reopen()
			require.EqualValues(t, 3301, l.NextOffset(), "pass %d", pass)
		}
	})
}
