package storage

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// DropOldest, Purge, Close and concurrency, against both implementations.

func TestDropOldest(t *testing.T) {
	t.Parallel()
	testAllLogs(t, func(t *testing.T, h *harness) {
		rec := buildRecord(t, 0, 5, 10, 0)
		l := h.open(Options{SegmentSize: uint64(len(rec))}) // one record per segment
		appendCounts(t, l, 10, 5, 5, 5, 5)                  // segments at 0 5 10 15
		require.Len(t, l.Segments(), 4)

		n, err := l.DropOldest(0)
		require.NoError(t, err)
		require.Zero(t, n)
		n, err = l.DropOldest(2)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.EqualValues(t, 10, l.FirstOffset())
		require.EqualValues(t, 20, l.NextOffset())
		checkRange(t, readMessages(t, l, 0, 7), 10, 17, 10) // before the first starts at the first
		l = h.reopen()
		require.EqualValues(t, 10, l.FirstOffset())
		checkRange(t, readMessages(t, l, 0, 100), 10, 20, 10)

		// Reaching the active segment removes it and starts a new one at
		// NextOffset: nothing is left, and offsets do not go back.
		n, err = l.DropOldest(10)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Equal(t, []SegmentInfo{{BaseOffset: 20, NextOffset: 20, Active: true}}, l.Segments())
		require.EqualValues(t, 20, l.NextOffset())
		require.EqualValues(t, 20, l.FirstOffset())
		checkRange(t, readMessages(t, l, 0, 100), 20, 20, 10)
		_, ok := l.OffsetAtTime(0)
		require.False(t, ok)

		// An empty active segment holds nothing and is not removed.
		n, err = l.DropOldest(1)
		require.NoError(t, err)
		require.Zero(t, n)
		l = h.reopen()
		require.EqualValues(t, 20, l.NextOffset())
		require.ErrorIs(t, l.Append(buildRecord(t, 0, 1, 10, 1)), ErrOffsetMismatch)
		appendCounts(t, l, 10, 3)
		checkRange(t, readMessages(t, l, 0, 100), 20, 23, 10)
		l = h.reopen()
		checkRange(t, readMessages(t, l, 0, 100), 20, 23, 10)
	})
}

func TestPurge(t *testing.T) {
	t.Parallel()
	testAllLogs(t, func(t *testing.T, h *harness) {
		rec := buildRecord(t, 0, 5, 10, 0)
		l := h.open(Options{SegmentSize: uint64(len(rec))})
		appendCounts(t, l, 10, 5, 5, 5)
		require.NoError(t, l.Purge())
		require.Zero(t, l.NextOffset())
		require.Zero(t, l.FirstOffset())
		require.Equal(t, []SegmentInfo{{Active: true}}, l.Segments())
		checkRange(t, readMessages(t, l, 0, 100), 0, 0, 10)
		l = h.reopen()
		require.Zero(t, l.NextOffset())
		appendCounts(t, l, 10, 2, 2)
		checkRange(t, readMessages(t, l, 0, 100), 0, 4, 10)
		l = h.reopen()
		checkRange(t, readMessages(t, l, 0, 100), 0, 4, 10)
		require.NoError(t, l.Purge())
		require.NoError(t, l.Purge())
		require.Zero(t, l.NextOffset())
	})
}

func TestCloseIdempotent(t *testing.T) {
	t.Parallel()
	testAllLogs(t, func(t *testing.T, h *harness) {
		l := h.open(Options{})
		appendCounts(t, l, 10, 3)
		require.NoError(t, l.Sync())
		require.NoError(t, l.Close())
		require.NoError(t, l.Close())
		require.ErrorIs(t, l.Append(buildRecord(t, 3, 1, 10, 1)), ErrClosed)
		_, _, err := l.Read(nil, 0, 10)
		require.ErrorIs(t, err, ErrClosed)
		_, err = l.DropOldest(1)
		require.ErrorIs(t, err, ErrClosed)
		require.ErrorIs(t, l.Purge(), ErrClosed)
		require.ErrorIs(t, l.Sync(), ErrClosed)
		require.Empty(t, l.Segments())
		_, ok := l.OffsetAtTime(0)
		require.False(t, ok)
		require.EqualValues(t, 3, l.NextOffset(), "the last offset stays readable")
		if h.kind == "file" {
			l = h.open(h.opts)
			checkRange(t, readMessages(t, l, 0, 10), 0, 3, 10)
		}
	})
}

// One appender and several readers at once, under -race: every read
// returns whole, valid records with contiguous offsets and intact payloads.
func TestConcurrentAppendAndRead(t *testing.T) {
	t.Parallel()
	testAllLogs(t, func(t *testing.T, h *harness) {
		rec := buildRecord(t, 0, 8, 40, 0)
		l := h.open(Options{SegmentSize: uint64(4 * len(rec))})
		const records = 300
		var wg sync.WaitGroup
		done := make(chan struct{})
		errs := make(chan error, 8)
		for r := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(r), 1))
				var c wire.BatchChecker
				var buf []byte
				for {
					select {
					case <-done:
						return
					default:
					}
					next := l.NextOffset()
					off := rng.Uint64N(next + 1)
					max := 1 + rng.Uint32N(40)
					var n uint32
					var err error
					buf, n, err = l.Read(buf[:0], off, max)
					if err == nil {
						err = checkReadBytes(&c, buf, off, n, 40)
					}
					if err == nil && off < next && n == 0 {
						err = errors.New("no messages below NextOffset")
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		// Retention runs with the appender, as the broker's would.
		for i := range records {
			base := l.NextOffset()
			n := 1 + i%8
			require.NoError(t, l.Append(buildRecord(t, base, n, 40, tsFor(base))))
			if i%100 == 99 {
				_, err := l.DropOldest(1)
				require.NoError(t, err)
			}
		}
		close(done)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}

// checkReadBytes checks the bytes of one Read: records that validate,
// offsets contiguous from max(offset, first record) and n messages.
func checkReadBytes(c *wire.BatchChecker, b []byte, offset uint64, n uint32, size int) error {
	var msgs []wire.Message
	for len(b) > 0 {
		h, err := wire.DecodeBatchHeader(b)
		if err != nil {
			return err
		}
		if h.Length > uint64(len(b)) {
			return errors.New("record runs past the read")
		}
		if _, err := c.Validate(b[:h.Length]); err != nil {
			return err
		}
		if msgs, err = wire.AppendRecordMessages(msgs, b[:h.Length]); err != nil {
			return err
		}
		b = b[h.Length:]
	}
	if len(msgs) != int(n) {
		return errors.New("count does not match the records")
	}
	for i, m := range msgs {
		if i == 0 && m.Offset < offset {
			return errors.New("read started before the offset asked")
		}
		if i > 0 && m.Offset != msgs[i-1].Offset+1 {
			return errors.New("offsets not contiguous")
		}
		if string(m.Payload) != string(payloadFor(m.Offset, size)) {
			return errors.New("payload damaged")
		}
	}
	return nil
}
