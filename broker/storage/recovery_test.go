package storage

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// fixture is a closed file log of two segments: a sealed one of three
// records (offsets 0..9) and an active one of two (9..15).
type fixture struct {
	dir     string
	opts    Options
	recs    [][]byte
	lastPos int64 // file position of the last record in the active log
}

const fixSize = 20

func newFixture(t *testing.T) fixture {
	t.Helper()
	rec := buildRecord(t, 0, 3, fixSize, 0)
	opts := Options{SegmentSize: uint64(3 * len(rec))}
	dir := t.TempDir()
	l, err := OpenFile(dir, opts)
	require.NoError(t, err)
	recs := appendCounts(t, l, fixSize, 3, 3, 3, 3, 3)
	require.Len(t, l.Segments(), 2)
	require.NoError(t, l.Close())
	return fixture{dir: dir, opts: opts, recs: recs, lastPos: fileHeaderSize + int64(len(rec))}
}

func (f fixture) active() string { return segPath(f.dir, 9, logExt) }
func (f fixture) sealed() string { return segPath(f.dir, 0, logExt) }

// checkReopened opens dir and checks it holds exactly the offsets
// [0, want), then that appends continue at want and survive a reopen.
func checkReopened(t *testing.T, dir string, opts Options, want uint64) {
	t.Helper()
	l, err := OpenFile(dir, opts)
	require.NoError(t, err)
	require.Equal(t, want, l.NextOffset())
	checkRange(t, readMessages(t, l, 0, 100), 0, want, fixSize)
	appendCounts(t, l, fixSize, 2)
	require.NoError(t, l.Close())
	l, err = OpenFile(dir, opts)
	require.NoError(t, err)
	checkRange(t, readMessages(t, l, 0, 100), 0, want+2, fixSize)
	require.NoError(t, l.Close())
}

func TestReopenAfterCleanClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	logs := map[string][]byte{}
	for _, p := range []string{f.sealed(), f.active(), segPath(f.dir, 0, indexExt), segPath(f.dir, 9, indexExt)} {
		logs[p] = readFile(t, p)
	}
	l, err := OpenFile(f.dir, f.opts)
	require.NoError(t, err)
	b, n, err := l.Read(nil, 0, 100)
	require.NoError(t, err)
	require.EqualValues(t, 15, n)
	var want []byte
	for _, r := range f.recs {
		want = append(want, r...)
	}
	require.Equal(t, want, b)
	require.NoError(t, l.Close())
	for p, b := range logs {
		require.Equal(t, b, readFile(t, p), "%s unchanged by open and close", p)
	}
}

// Cut the active log at every byte inside its last record: the torn
// record disappears, everything before it stays, appends go on at 12.
func TestRecoverTornTail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	end := f.lastPos + int64(len(f.recs[4]))
	full := readFile(t, f.active())
	require.Len(t, full, int(end))
	after := f.lastPos + int64(len(buildRecord(t, 12, 2, fixSize, tsFor(12))))
	const shards = 4 // fsync-bound: run the cuts in parallel
	for shard := range int64(shards) {
		t.Run(name("shard %d", shard), func(t *testing.T) {
			t.Parallel()
			for cut := f.lastPos + shard; cut < end; cut += shards {
				dir := copyDir(t, f.dir)
				writeFile(t, segPath(dir, 9, logExt), full[:cut])
				checkReopened(t, dir, f.opts, 12)
				require.Len(t, readFile(t, segPath(dir, 9, logExt)), int(after), "cut at %d: the log was cut back, then 2 messages appended", cut)
			}
		})
	}
}

// A torn header on the active segment (a crash while rolling) leaves an
// empty active segment at the right base.
func TestRecoverTornSegmentHeader(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 5, fileHeaderSize - 1} {
		t.Run(name("size=%d", size), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			writeFile(t, segPath(f.dir, 15, logExt), make([]byte, size))
			checkReopened(t, f.dir, f.opts, 15)
		})
	}
}

// Damaged index files, of the sealed and of the active segment, are
// rebuilt from the log and rewritten byte for byte.
func TestRecoverIndexDamage(t *testing.T) {
	t.Parallel()
	mutations := []struct {
		name string
		do   func(b []byte) []byte
	}{
		{"missing", nil},
		{"empty", func(b []byte) []byte { return nil }},
		{"header only", func(b []byte) []byte { return b[:fileHeaderSize] }},
		{"torn header", func(b []byte) []byte { return b[:10] }},
		{"last entry cut", func(b []byte) []byte { return b[:len(b)-indexEntrySize] }},
		{"partial entry", func(b []byte) []byte { return b[:len(b)-13] }},
		{"partial extra entry", func(b []byte) []byte { return append(b, 1, 2, 3) }},
		{"extra entry", func(b []byte) []byte { return append(b, b[len(b)-indexEntrySize:]...) }},
		{"wrong magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"newer version", func(b []byte) []byte { b[8] = 2; return b }},
		{"entries swapped", func(b []byte) []byte {
			e := fileHeaderSize
			x := append([]byte(nil), b[e:e+indexEntrySize]...)
			copy(b[e:], b[e+indexEntrySize:e+2*indexEntrySize])
			copy(b[e+indexEntrySize:], x)
			return b
		}},
		{"garbage", func(b []byte) []byte {
			r := rand.New(rand.NewPCG(1, 2))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			return b
		}},
	}
	for i := range indexEntrySize { // every byte of the first entry
		mutations = append(mutations, struct {
			name string
			do   func(b []byte) []byte
		}{name("flip entry byte %d", i), func(b []byte) []byte { b[fileHeaderSize+i] ^= 0x40; return b }})
	}
	for _, seg := range []uint64{0, 9} {
		for _, m := range mutations {
			t.Run(name("segment %d/%s", seg, m.name), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				path := segPath(f.dir, seg, indexExt)
				orig := readFile(t, path)
				if m.do == nil {
					require.NoError(t, os.Remove(path))
				} else {
					writeFile(t, path, m.do(append([]byte(nil), orig...)))
				}
				l, err := OpenFile(f.dir, f.opts)
				require.NoError(t, err)
				checkRange(t, readMessages(t, l, 0, 100), 0, 15, fixSize)
				ts, ok := l.OffsetAtTime(tsFor(3))
				require.True(t, ok)
				require.EqualValues(t, 3, ts)
				require.NoError(t, l.Close())
				require.Equal(t, orig, readFile(t, path), "index rewritten from the log")
			})
		}
	}
}

// A bad record inside the active segment cuts it there (it cannot be
// told from a torn write).
func TestRecoverActiveCorruption(t *testing.T) {
	t.Parallel()
	for _, pos := range []int64{fileHeaderSize + 8, fileHeaderSize + 300, fileHeaderSize + 40} {
		t.Run(name("byte %d", pos), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			b := readFile(t, f.active())
			b[pos] ^= 1
			writeFile(t, f.active(), b)
			checkReopened(t, f.dir, f.opts, 9)
		})
	}
}

// A bad record inside a sealed segment is refused with an error naming
// the file and position, or cut with Options.TruncateCorrupt.
func TestRecoverSealedCorruption(t *testing.T) {
	t.Parallel()
	f0 := newFixture(t)
	second := int64(fileHeaderSize + len(f0.recs[0]))
	cases := []struct {
		name    string
		damage  func(t *testing.T, f fixture)
		pos     int64
		keepTil uint64
	}{
		{"payload of record 2, index lost", func(t *testing.T, f fixture) {
			b := readFile(t, f.sealed())
			b[second+wire.BatchHeaderSize+60] ^= 1
			writeFile(t, f.sealed(), b)
			require.NoError(t, os.Remove(segPath(f.dir, 0, indexExt)))
		}, second, 3},
		{"log cut inside record 3", func(t *testing.T, f fixture) {
			b := readFile(t, f.sealed())
			writeFile(t, f.sealed(), b[:len(b)-5])
		}, second + int64(len(f0.recs[1])), 6},
		{"header magic", func(t *testing.T, f fixture) {
			b := readFile(t, f.sealed())
			b[1] = 'x'
			writeFile(t, f.sealed(), b)
		}, 0, 0},
		{"gap: middle segment gone", func(t *testing.T, f fixture) {
			l, err := OpenFile(f.dir, f.opts)
			require.NoError(t, err)
			appendCounts(t, l, fixSize, 3, 3) // fills segment 9, rolls to one at 18
			require.NoError(t, l.Close())
			require.NoError(t, os.Remove(segPath(f.dir, 9, logExt)))
		}, 0, 9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			c.damage(t, f)
			_, err := OpenFile(f.dir, f.opts)
			require.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, c.pos, ce.Pos, "%v", err)
			require.Contains(t, err.Error(), ce.Path)

			opts := f.opts
			opts.TruncateCorrupt = true
			l, err := OpenFile(f.dir, opts)
			require.NoError(t, err)
			require.Equal(t, c.keepTil, l.NextOffset())
			require.Len(t, l.Segments(), 1)
			require.NoError(t, l.Close())
			checkReopened(t, f.dir, f.opts, c.keepTil)
		})
	}
}

// With its index intact, a sealed segment is trusted at open; a record
// damaged inside it is caught when first read, never served.
func TestReadCatchesDamagedSealedRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	second := int64(fileHeaderSize + len(f.recs[0]))
	b := readFile(t, f.sealed())
	b[second+wire.BatchHeaderSize+60] ^= 1
	writeFile(t, f.sealed(), b)
	l, err := OpenFile(f.dir, f.opts)
	require.NoError(t, err)
	defer l.Close()
	out, n, err := l.Read(nil, 0, 100)
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, f.sealed(), ce.Path)
	require.Equal(t, second, ce.Pos)
	require.EqualValues(t, 3, n, "the records before it are returned")
	require.Equal(t, f.recs[0], out)
	_, _, err = l.Read(nil, 4, 1)
	require.ErrorIs(t, err, ErrCorrupt)
	checkRange(t, readMessages(t, l, 6, 100), 6, 15, fixSize)
}

func TestOpenLockedAndNewerFormat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l, err := OpenFile(f.dir, f.opts)
	require.NoError(t, err)
	_, err = OpenFile(f.dir, f.opts)
	require.ErrorIs(t, err, ErrLocked)
	require.NoError(t, l.Close())

	b := readFile(t, f.active())
	b[8] = 2 // format version 2
	writeFile(t, f.active(), b)
	_, err = OpenFile(f.dir, Options{TruncateCorrupt: true})
	require.ErrorIs(t, err, ErrFormat)
	require.Contains(t, err.Error(), f.active())
	require.Equal(t, b, readFile(t, f.active()), "a newer file is never touched")
}

func TestOrphanIndexRemoved(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	orphan := segPath(f.dir, 99, indexExt)
	writeFile(t, orphan, []byte("x"))
	writeFile(t, segPath(f.dir, 0, ".unrelated"), []byte("kept"))
	checkReopened(t, f.dir, f.opts, 15)
	_, err := os.Stat(orphan)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, "kept", string(readFile(t, segPath(f.dir, 0, ".unrelated"))))
}
