package storage

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

const testPartition = 7

// payloadFor is the payload of the message at offset off: derived from the
// offset alone, so any reader can check it.
func payloadFor(off uint64, size int) []byte {
	p := make([]byte, max(size, 8))
	binary.LittleEndian.PutUint64(p, off)
	for i := 8; i < len(p); i++ {
		p[i] = byte(off) + byte(i)
	}
	return p
}

// buildRecord builds a record of count messages at base the way the broker
// does: wire.AppendBatch, then Validate and Stamp.
func buildRecord(tb testing.TB, base uint64, count, size int, ts uint64) []byte {
	tb.Helper()
	msgs := make([]wire.Message, count)
	for i := range msgs {
		msgs[i].ID[0] = byte(i + 1)
		msgs[i].OriginTimestamp = ts + uint64(i)
		msgs[i].Payload = payloadFor(base+uint64(i), size)
		if i%3 == 2 {
			msgs[i].Headers = wire.AppendTLV(nil, []wire.Entry{wire.Header("k", wire.StringValue("v"))})
		}
	}
	b, err := wire.AppendBatch(nil, msgs)
	require.NoError(tb, err)
	var c wire.BatchChecker
	_, err = c.Validate(b)
	require.NoError(tb, err)
	c.Stamp(b, testPartition, base, ts)
	return b
}

// tsFor is the base_timestamp the tests give the record at base.
func tsFor(base uint64) uint64 { return 1_000_000 + base*10 }

// appendCounts appends one record per count, each at NextOffset, and
// returns the records.
func appendCounts(t testing.TB, l Log, size int, counts ...int) [][]byte {
	t.Helper()
	var recs [][]byte
	for _, n := range counts {
		base := l.NextOffset()
		r := buildRecord(t, base, n, size, tsFor(base))
		require.NoError(t, l.Append(r), "append %d messages at %d", n, base)
		recs = append(recs, r)
	}
	return recs
}

// readMessages reads [offset, offset+max) and checks the records it gets
// are well-formed and validate; it returns their messages.
func readMessages(t testing.TB, l Log, offset uint64, max uint32) []wire.Message {
	t.Helper()
	b, n, err := l.Read(nil, offset, max)
	require.NoError(t, err)
	var msgs []wire.Message
	var c wire.BatchChecker
	for len(b) > 0 {
		h, err := wire.DecodeBatchHeader(b)
		require.NoError(t, err)
		require.LessOrEqual(t, h.Length, uint64(len(b)))
		rec := b[:h.Length]
		_, err = c.Validate(rec)
		require.NoError(t, err, "record at %d", h.BaseOffset)
		require.Equal(t, uint64(testPartition), h.PartitionID)
		require.Equal(t, tsFor(h.BaseOffset), h.BaseTimestamp)
		msgs, err = wire.AppendRecordMessages(msgs, rec)
		require.NoError(t, err)
		b = b[h.Length:]
	}
	require.Len(t, msgs, int(n))
	return msgs
}

// checkRange checks that msgs are exactly the offsets [from, to) with
// their payloads intact.
func checkRange(t testing.TB, msgs []wire.Message, from, to uint64, size int) {
	t.Helper()
	require.Len(t, msgs, int(to-from), "messages [%d,%d)", from, to)
	for i, m := range msgs {
		off := from + uint64(i)
		require.Equal(t, off, m.Offset)
		require.Equal(t, payloadFor(off, size), m.Payload, "payload at %d", off)
	}
}

// harness runs one test against one implementation.
type harness struct {
	t    *testing.T
	kind string
	dir  string
	opts Options
	l    Log
}

var kinds = []string{"memory", "file"}

// testAllLogs runs test once per implementation, as parallel subtests.
func testAllLogs(t *testing.T, test func(t *testing.T, h *harness)) {
	t.Helper()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			h := &harness{t: t, kind: kind, dir: t.TempDir()}
			t.Cleanup(func() {
				if h.l != nil {
					require.NoError(t, h.l.Close())
				}
			})
			test(t, h)
		})
	}
}

// open opens the log under test with opts.
func (h *harness) open(opts Options) Log {
	h.t.Helper()
	h.opts = opts
	if h.kind == "memory" {
		h.l = NewMemory(opts)
		return h.l
	}
	l, err := OpenFile(h.dir, opts)
	require.NoError(h.t, err)
	h.l = l
	return l
}

// reopen closes and reopens a file log; a memory log stays as it is.
func (h *harness) reopen() Log {
	h.t.Helper()
	if h.kind == "memory" {
		return h.l
	}
	require.NoError(h.t, h.l.Close())
	return h.open(h.opts)
}

// segPath is the path of a segment file in dir.
func segPath(dir string, base uint64, ext string) string {
	return filepath.Join(dir, segmentName(base)+ext)
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	des, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, de := range des {
		writeFile(t, filepath.Join(dst, de.Name()), readFile(t, filepath.Join(src, de.Name())))
	}
	return dst
}

func name(format string, args ...any) string { return fmt.Sprintf(format, args...) }
