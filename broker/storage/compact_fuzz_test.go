package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// compactedFixture is a log whose first segment was compacted: its
// directory, the compacted segment's files, and the offsets that survive.
type compactedFixture struct {
	dir       string
	log, idx  []byte
	survivors []uint64
}

func newCompactedFixture(tb testing.TB) compactedFixture {
	dir := tb.TempDir()
	l := openCompactLog(tb, "file", dir, 2<<10)
	appendWorkload(tb, l, workload(200, 60, 13), testBatch)
	_, err := l.Compact(context.Background(), CompactOptions{Now: farFuture})
	require.NoError(tb, err)
	fx := compactedFixture{dir: dir, survivors: readAllOffsets(tb, l)}
	require.True(tb, l.Segments()[0].Compacted)
	require.NotZero(tb, l.Segments()[0].Messages, "the fixture keeps messages in the compacted segment")
	require.NoError(tb, l.Close())
	fx.log, fx.idx = readFile(tb, segPath(dir, 0, logExt)), readFile(tb, segPath(dir, 0, indexExt))
	return fx
}

// FuzzOpenCompacted hands arbitrary bytes to OpenFile as the compacted
// (sealed) segment's .log (onLog) or .index. An index never makes the open
// fail and never loses a message; a log either opens and serves only
// records that validate, in ascending offsets, or fails with ErrCorrupt
// or ErrFormat (and TruncateCorrupt repairs all but ErrFormat).
func FuzzOpenCompacted(f *testing.F) {
	fx := newCompactedFixture(f)
	f.Add(true, fx.log)
	f.Add(false, fx.idx)
	f.Add(true, fx.log[:len(fx.log)-9])
	f.Add(false, fx.idx[:len(fx.idx)-32])
	f.Add(true, fx.log[:fileHeaderSize])
	f.Add(false, fx.log)
	f.Fuzz(func(t *testing.T, onLog bool, data []byte) {
		dir := t.TempDir()
		des, err := os.ReadDir(fx.dir)
		require.NoError(t, err)
		for _, de := range des {
			if de.Name() != lockName {
				writeFile(t, filepath.Join(dir, de.Name()), readFile(t, filepath.Join(fx.dir, de.Name())))
			}
		}
		ext := indexExt
		if onLog {
			ext = logExt
		}
		writeFile(t, segPath(dir, 0, ext), data)
		for _, truncate := range []bool{false, true} {
			l, err := OpenFile(dir, Options{SegmentSize: 2 << 10, TruncateCorrupt: truncate})
			if err != nil {
				require.True(t, onLog, "an index never fails the open: %v", err)
				require.True(t, errors.Is(err, ErrFormat) || (errors.Is(err, ErrCorrupt) && !truncate), "%v", err)
				continue
			}
			var prev uint64
			var c wire.BatchChecker
			for next := uint64(0); next < l.NextOffset(); {
				b, n, err := l.Read(nil, next, 50)
				if err != nil {
					require.ErrorIs(t, err, ErrCorrupt)
					break
				}
				if n == 0 {
					break
				}
				var msgs []wire.Message
				for len(b) > 0 {
					h, herr := wire.DecodeBatchHeader(b)
					require.NoError(t, herr)
					_, verr := c.Validate(b[:h.Length])
					require.NoError(t, verr)
					msgs, err = wire.AppendRecordMessages(msgs, b[:h.Length])
					require.NoError(t, err)
					b = b[h.Length:]
				}
				for _, m := range msgs {
					require.True(t, prev == 0 || m.Offset > prev)
					prev = m.Offset
				}
				next = prev + 1
			}
			if !onLog {
				require.Equal(t, fx.survivors, readAllOffsets(t, l), "a damaged index loses nothing")
			}
			require.NoError(t, l.Close())
		}
	})
}
