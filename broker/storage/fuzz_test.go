package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// The fuzz targets hand arbitrary bytes to OpenFile as a segment's .log
// and as a .index file. Recovery must never panic; it must leave a log
// that serves only records that validate and takes appends at NextOffset.
// They touch real files: TMPDIR=/dev/shm makes them several times faster.

// seedLog is a valid active .log at base 0: records of 3, 1 and 2 messages.
func seedLog(t testing.TB) []byte {
	b := make([]byte, fileHeaderSize)
	putFileHeader(b, logMagic, 0)
	for _, base := range []uint64{0, 3, 4} {
		n := map[uint64]int{0: 3, 3: 1, 4: 2}[base]
		b = append(b, buildRecord(t, base, n, 12, tsFor(base))...)
	}
	return b
}

// FuzzOpenSegment: data is the active .log file; when whole is false it
// follows a valid file header, so OpenFile must succeed.
func FuzzOpenSegment(f *testing.F) {
	good := seedLog(f)
	f.Add(false, good[fileHeaderSize:])
	f.Add(false, good[fileHeaderSize:len(good)-7])
	f.Add(false, good[fileHeaderSize:fileHeaderSize+300])
	f.Add(false, []byte{})
	f.Add(true, good)
	f.Add(true, good[:10])
	f.Add(true, []byte("FERRYLOG\x02\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, whole bool, data []byte) {
		content := data
		if !whole {
			content = append(good[:fileHeaderSize:fileHeaderSize], data...)
		}
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, segmentName(0)+logExt), content)
		for _, truncate := range []bool{false, true} {
			l, err := OpenFile(dir, Options{TruncateCorrupt: truncate})
			if err != nil {
				require.True(t, whole, "a valid header always opens: %v", err)
				require.True(t, errors.Is(err, ErrFormat) || (errors.Is(err, ErrCorrupt) && !truncate),
					"TruncateCorrupt repairs all but a newer format: %v", err)
				continue
			}
			checkUsable(t, dir, l)
		}
	})
}

// FuzzOpenIndex: data replaces the .index of the sealed segment (which
// is 0 when index0 is true, else of the active one) of a two-segment log;
// every record must still be there.
func FuzzOpenIndex(f *testing.F) {
	fx := newFuzzFixture(f)
	f.Add(true, fx.idx0)
	f.Add(false, fx.idx9)
	f.Add(true, fx.idx0[:len(fx.idx0)-5])
	f.Add(false, fx.idx9[:fileHeaderSize])
	f.Add(true, fx.idx9)
	f.Add(false, []byte{})
	f.Fuzz(func(t *testing.T, index0 bool, data []byte) {
		dir := copyDir(t, fx.dir)
		base := uint64(9)
		if index0 {
			base = 0
		}
		writeFile(t, segPath(dir, base, indexExt), data)
		l, err := OpenFile(dir, fx.opts)
		require.NoError(t, err)
		checkRange(t, readMessages(t, l, 0, 100), 0, 15, fixSize)
		require.NoError(t, l.Close())
		require.Equal(t, fx.idx0, readFile(t, segPath(dir, 0, indexExt)))
		require.Equal(t, fx.idx9, readFile(t, segPath(dir, 9, indexExt)))
	})
}

type fuzzFixture struct {
	fixture
	idx0, idx9 []byte
}

func newFuzzFixture(f *testing.F) fuzzFixture { return newFixtureFiles(f) }

// newFixtureFiles builds the files of the recovery tests' fixture.
func newFixtureFiles(f testing.TB) fuzzFixture {
	rec := buildRecord(f, 0, 3, fixSize, 0)
	opts := Options{SegmentSize: uint64(3 * len(rec))}
	dir := f.TempDir()
	l, err := OpenFile(dir, opts)
	require.NoError(f, err)
	appendCounts(f, l, fixSize, 3, 3, 3, 3, 3)
	require.NoError(f, l.Close())
	return fuzzFixture{
		fixture: fixture{dir: dir, opts: opts},
		idx0:    readFile(f, segPath(dir, 0, indexExt)),
		idx9:    readFile(f, segPath(dir, 9, indexExt)),
	}
}

// checkUsable checks a recovered single-segment log: what it serves
// validates and is contiguous, an append lands at NextOffset, and a
// reopen gives the same.
func checkUsable(t *testing.T, dir string, l Log) {
	t.Helper()
	first, next := l.FirstOffset(), l.NextOffset()
	b, n, err := l.Read(nil, 0, ^uint32(0))
	require.NoError(t, err)
	require.Equal(t, next-first, uint64(n))
	var ck wire.BatchChecker
	require.NoError(t, checkReadBytes(&ck, b, first, n, 12))
	require.NoError(t, l.Append(buildRecord(t, next, 2, 12, tsFor(next))))
	require.NoError(t, l.Close())
	l, err = OpenFile(dir, Options{})
	require.NoError(t, err)
	require.Equal(t, next+2, l.NextOffset())
	b2, n2, err := l.Read(nil, 0, ^uint32(0))
	require.NoError(t, err)
	require.Equal(t, n+2, n2)
	require.True(t, bytes.Equal(b, b2[:len(b)]), "the same records after a reopen")
	require.NoError(t, l.Close())
	_, err = os.Stat(filepath.Join(dir, segmentName(0)+indexExt))
	require.NoError(t, err)
}

// TestWriteFuzzSeeds rewrites the seed files under testdata/fuzz (the
// f.Add seeds as named files, kept with the code so the format's history
// stays covered). Run with FERRY_WRITE_FUZZ_SEEDS=1 after a format change.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("FERRY_WRITE_FUZZ_SEEDS") == "" {
		t.Skip("set FERRY_WRITE_FUZZ_SEEDS=1 to rewrite the seed corpus")
	}
	good := seedLog(t)
	body := good[fileHeaderSize:]
	v2 := append([]byte(nil), good...)
	v2[8] = 2
	writeSeeds(t, "FuzzOpenSegment", map[string]seed{
		"v1-three-records":      {false, body},
		"v1-torn-last-record":   {false, body[:len(body)-7]},
		"v1-torn-first-header":  {false, body[:100]},
		"v1-whole-file":         {true, good},
		"v1-torn-file-header":   {true, good[:10]},
		"v2-unknown-version":    {true, v2},
		"v1-zero-header-record": {true, append(make([]byte, fileHeaderSize), body...)},
	})
	fx := newFixtureFiles(t)
	writeSeeds(t, "FuzzOpenIndex", map[string]seed{
		"v1-sealed":              {true, fx.idx0},
		"v1-active":              {false, fx.idx9},
		"v1-sealed-partial":      {true, fx.idx0[:len(fx.idx0)-5]},
		"v1-active-header-only":  {false, fx.idx9[:fileHeaderSize]},
		"v1-other-segment-index": {true, fx.idx9},
	})
}

type seed struct {
	flag bool
	data []byte
}

func writeSeeds(t *testing.T, target string, seeds map[string]seed) {
	dir := filepath.Join("testdata", "fuzz", target)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for name, s := range seeds {
		body := fmt.Sprintf("go test fuzz v1\nbool(%t)\n[]byte(%q)\n", s.flag, s.data)
		writeFile(t, filepath.Join(dir, name), []byte(body))
	}
}
