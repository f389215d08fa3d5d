package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func requireState(t *testing.T, s *FileStore, key string, data string, v Version) {
	t.Helper()
	st, err := s.Load(context.Background(), key)
	require.NoError(t, err, "key %q", key)
	require.Equal(t, State{Data: []byte(data), Version: v}, st, "key %q", key)
}

// TestJournalReplay saves, overwrites and deletes keys, and checks that a
// reopened store replays the same states and continues their versions.
func TestJournalReplay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenFile(dir)
	require.NoError(t, err)
	va, err := s.Save(ctx, "a", []byte("a1"), "")
	require.NoError(t, err)
	va, err = s.Save(ctx, "a", []byte("a2"), va)
	require.NoError(t, err)
	_, err = s.Save(ctx, "b", []byte("b1"), "")
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, "b"))
	vc, err := s.Save(ctx, "c", nil, "")
	require.NoError(t, err)
	_, err = s.Save(ctx, "d", []byte("d1"), "")
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, "d"))
	vd, err := s.Save(ctx, "d", []byte("reborn"), "")
	require.NoError(t, err)
	require.Equal(t, Version("1"), vd, "a deleted key starts again at 1")
	require.NoError(t, s.Close())

	s = openTestFileStore(t, dir)
	requireState(t, s, "a", "a2", va)
	requireState(t, s, "c", "", vc)
	requireState(t, s, "d", "reborn", vd)
	_, err = s.Load(ctx, "b")
	require.ErrorIs(t, err, ErrNotFound, "a deleted key stays deleted")
	require.ErrorIs(t, s.Delete(ctx, "b"), ErrNotFound)
	v, err := s.Save(ctx, "a", []byte("a3"), va)
	require.NoError(t, err)
	require.Equal(t, Version("3"), v)
	_, err = s.Save(ctx, "a", []byte("stale"), va)
	require.ErrorIs(t, err, ErrConflict)
}

// journalWithTwoRecords writes a journal holding key "k" at version 1 and
// then version 2, and returns its bytes and where the second record starts.
func journalWithTwoRecords(t *testing.T, dir string) (raw []byte, last int) {
	t.Helper()
	ctx := context.Background()
	s, err := OpenFile(dir)
	require.NoError(t, err)
	v1, err := s.Save(ctx, "k", []byte("first"), "")
	require.NoError(t, err)
	last = int(s.j.size)
	_, err = s.Save(ctx, "k", []byte("second state"), v1)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	raw, err = os.ReadFile(filepath.Join(dir, journalName))
	require.NoError(t, err)
	return raw, last
}

// TestJournalTornTail cuts the last record off at every byte offset, and
// flips every byte of it, as a crash mid-append can leave it: the store
// opens at the previous version, cuts the torn bytes off, and goes on.
func TestJournalTornTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw, last := journalWithTwoRecords(t, t.TempDir())
	type tornCase struct {
		name string
		b    []byte
	}
	var cases []tornCase
	for cut := last; cut < len(raw); cut++ {
		cases = append(cases, tornCase{fmt.Sprintf("cut at %d", cut), raw[:cut]})
	}
	for i := last; i < len(raw); i++ {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x40
		cases = append(cases, tornCase{fmt.Sprintf("flip byte %d", i), b})
	}
	zeroed := append([]byte(nil), raw...)
	clear(zeroed[last:])
	cases = append(cases, tornCase{"zeroed", zeroed})
	for _, tc := range cases {
		dir := t.TempDir()
		path := filepath.Join(dir, journalName)
		require.NoError(t, os.WriteFile(path, tc.b, 0o600))
		s, err := OpenFile(dir)
		require.NoError(t, err, tc.name)
		requireState(t, s, "k", "first", "1")
		info, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, int64(last), info.Size(), "%s: the torn record is cut off", tc.name)
		v, err := s.Save(ctx, "k", []byte("after"), "1")
		require.NoError(t, err, tc.name)
		require.Equal(t, Version("2"), v, tc.name)
		require.NoError(t, s.Close())
		s, err = OpenFile(dir)
		require.NoError(t, err, tc.name)
		requireState(t, s, "k", "after", "2")
		require.NoError(t, s.Close())
	}
}

// TestJournalCorruptMiddle damages a record that good records follow: that
// is not a torn append but corruption, and OpenFile says where.
func TestJournalCorruptMiddle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	raw, last := journalWithTwoRecords(t, dir)
	path := filepath.Join(dir, journalName)
	for _, i := range []int{journalHeaderSize, journalHeaderSize + 4, last - 1} {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x01
		require.NoError(t, os.WriteFile(path, b, 0o600))
		_, err := OpenFile(dir)
		require.ErrorIs(t, err, ErrCorrupt, "byte %d", i)
		var ce *CorruptError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, path, ce.Path)
		require.ErrorContains(t, err, path)
		require.ErrorContains(t, err, fmt.Sprintf("at byte offset %d", journalHeaderSize), "byte %d", i)
		require.ErrorContains(t, err, fmt.Sprintf("good record follows at byte offset %d", last), "byte %d", i)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, b, after, "a corrupt journal is left for the operator")
	}

	for name, b := range map[string][]byte{
		"bad magic": append([]byte("JUNK"), raw[4:]...),
		"short":     raw[:journalHeaderSize-1],
		"future":    append(append([]byte(journalMagic), 9, 0, 0, 0), raw[journalHeaderSize:]...),
	} {
		require.NoError(t, os.WriteFile(path, b, 0o600))
		_, err := OpenFile(dir)
		require.ErrorIs(t, err, ErrCorrupt, name)
		require.ErrorContains(t, err, path, name)
	}
}

// TestJournalCompaction rewrites a journal of many overwrites and checks
// that the store reads the same before and after a reopen, that a
// compaction a crash interrupted before its rename changes nothing, and
// that Saves trigger compaction on their own.
func TestJournalCompaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, journalName)
	s, err := OpenFile(dir)
	require.NoError(t, err)
	vs := map[string]Version{}
	for i := range 200 {
		key := fmt.Sprintf("k%d", i%5)
		vs[key], err = s.Save(ctx, key, fmt.Appendf(nil, "%s@%d", key, i), vs[key])
		require.NoError(t, err)
	}
	require.NoError(t, s.Delete(ctx, "k4"))
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	// A crash after writing the snapshot's temp file, before the rename.
	tmp := filepath.Join(dir, "."+journalName+".tmp-CRASH")
	require.NoError(t, os.WriteFile(tmp, journalHeader(), 0o600))
	require.NoError(t, s.j.compact(true))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Less(t, len(after), len(before))
	live, end, err := decodeJournal(after)
	require.NoError(t, err)
	require.Equal(t, len(after), end)
	require.Len(t, live, 4, "one record per live key")
	for i := range 4 {
		key := fmt.Sprintf("k%d", i)
		requireState(t, s, key, fmt.Sprintf("%s@%d", key, 195+i), vs[key])
	}
	vs["k0"], err = s.Save(ctx, "k0", []byte("after compaction"), vs["k0"])
	require.NoError(t, err)
	require.NoError(t, s.Close())

	require.NoError(t, os.WriteFile(tmp, journalHeader(), 0o600))
	s = openTestFileStore(t, dir)
	require.NoFileExists(t, tmp)
	requireState(t, s, "k0", "after compaction", vs["k0"])
	for i := 1; i < 4; i++ {
		key := fmt.Sprintf("k%d", i)
		requireState(t, s, key, fmt.Sprintf("%s@%d", key, 195+i), vs[key])
	}
	_, err = s.Load(ctx, "k4")
	require.ErrorIs(t, err, ErrNotFound)

	// Saves kick the compactor once the journal outgrows its live state.
	s.j.mu.Lock()
	s.j.compactMin = 512
	s.j.mu.Unlock()
	compacted := func() bool { s.j.mu.Lock(); defer s.j.mu.Unlock(); return s.j.compacts > 0 }
	for i := 0; !compacted(); i++ {
		require.Less(t, i, 100000, "no compaction after many Saves")
		vs["k1"], err = s.Save(ctx, "k1", []byte("grow"), vs["k1"])
		require.NoError(t, err)
	}
	requireState(t, s, "k1", "grow", vs["k1"])
}

// TestFileStoreMigratesLegacyFiles opens a directory an earlier build
// wrote, one <key>.state file per key: the states load, the files go, and
// the journal carries on their versions. Where the journal already has a
// key (a crash between migrating and removing), the journal wins.
func TestFileStoreMigratesLegacyFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	legacy := func(key string, v uint64, data string) string {
		p := filepath.Join(dir, key+fileSuffix)
		require.NoError(t, os.WriteFile(p, encodeFile(v, []byte(data)), 0o600))
		return p
	}
	a := legacy("a", 5, "legacy a")
	b := legacy("b", 2, "legacy b")
	other := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(other, []byte("operator notes"), 0o600))

	s, err := OpenFile(dir)
	require.NoError(t, err)
	require.NoFileExists(t, a)
	require.NoFileExists(t, b)
	require.FileExists(t, other)
	requireState(t, s, "a", "legacy a", "5")
	requireState(t, s, "b", "legacy b", "2")
	v, err := s.Save(ctx, "a", []byte("journal a"), "5")
	require.NoError(t, err)
	require.Equal(t, Version("6"), v)
	require.NoError(t, s.Delete(ctx, "b"))
	require.NoError(t, s.Close())

	// A stale file beside the journal's newer record.
	legacy("a", 5, "legacy a")
	s, err = OpenFile(dir)
	require.NoError(t, err)
	require.NoFileExists(t, a)
	requireState(t, s, "a", "journal a", "6")
	_, err = s.Load(ctx, "b")
	require.ErrorIs(t, err, ErrNotFound, "deleted after migration, deleted after restart")
	require.NoError(t, s.Close())

	// A corrupt legacy file stays until Delete, which is durable.
	c := filepath.Join(dir, "c"+fileSuffix)
	require.NoError(t, os.WriteFile(c, []byte("garbage"), 0o600))
	s, err = OpenFile(dir)
	require.NoError(t, err)
	_, err = s.Load(ctx, "c")
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, c)
	require.NoError(t, s.Delete(ctx, "c"))
	require.NoFileExists(t, c)
	require.NoError(t, s.Close())
	s = openTestFileStore(t, dir)
	_, err = s.Load(ctx, "c")
	require.ErrorIs(t, err, ErrNotFound)
	requireState(t, s, "a", "journal a", "6")
}

// TestFileStoreGroupCommit saves many keys from many goroutines and checks
// that they share data syncs. The first sync is held until every goroutine
// has appended its first record, so at least that sync covers several.
func TestFileStoreGroupCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenFile(dir)
	require.NoError(t, err)
	const workers, each = 8, 10
	var once sync.Once
	s.j.mu.Lock()
	s.j.beforeSync = func() {
		once.Do(func() {
			for {
				s.j.mu.Lock()
				n := s.j.seq
				s.j.mu.Unlock()
				if n >= workers {
					return
				}
				time.Sleep(time.Millisecond) // waiting for the others, not asserting time
			}
		})
	}
	s.j.mu.Unlock()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := fmt.Sprintf("src-%d", w)
			var v Version
			for i := range each {
				var err error
				if v, err = s.Save(ctx, key, fmt.Appendf(nil, "%s=%d", key, i), v); err != nil {
					t.Errorf("save %s: %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	s.j.mu.Lock()
	syncs := s.j.syncs
	s.j.mu.Unlock()
	t.Logf("%d saves, %d data syncs", workers*each, syncs)
	require.Less(t, syncs, workers*each, "saves share syncs")
	require.NoError(t, s.Close())

	s = openTestFileStore(t, dir)
	for w := range workers {
		key := fmt.Sprintf("src-%d", w)
		requireState(t, s, key, fmt.Sprintf("%s=%d", key, each-1), Version(fmt.Sprint(each)))
	}
}
