package state

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func openTestFileStore(t *testing.T, dir string) *FileStore {
	t.Helper()
	s, err := OpenFile(dir)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestFileStoreModesAndLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "nested", "state")
	s := openTestFileStore(t, dir)
	require.Equal(t, dir, s.Dir())

	info, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "directory mode")

	var prev Version
	for _, want := range []Version{"1", "2", "3"} {
		v, err := s.Save(ctx, "src", []byte("data"), prev)
		require.NoError(t, err)
		require.Equal(t, want, v, "versions count from 1")
		prev = v
	}
	path := filepath.Join(dir, journalName)
	info, err = os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "journal mode")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	live, end, err := decodeJournal(raw)
	require.NoError(t, err)
	require.Equal(t, len(raw), end, "no torn record")
	require.Len(t, live, 1)
	r, _, err := decodeRecord(live["src"])
	require.NoError(t, err)
	require.Equal(t, uint64(3), r.version)
	require.Equal(t, []byte("data"), r.data)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, []string{".lock", journalName}, names, "one journal, no temp files")
}

func TestFileStoreDetectsCorruption(t *testing.T) {
	t.Parallel()
	good := encodeFile(7, []byte("last_id=1234"))
	tests := []struct {
		name   string
		mangle func([]byte) []byte
		want   string
	}{
		{"empty file", func([]byte) []byte { return []byte{} }, "truncated: 0 bytes"},
		{"truncated header", func(b []byte) []byte { return b[:fileHeaderSize-1] }, "truncated"},
		{"truncated data", func(b []byte) []byte { return b[:len(b)-3] }, "truncated: header says 12 data bytes, file has 9"},
		{"trailing bytes", func(b []byte) []byte { return append(b, 0) }, "1 bytes after"},
		{"flipped data bit", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, "checksum mismatch"},
		{"flipped version bit", func(b []byte) []byte { b[9] ^= 1; return b }, "checksum mismatch"},
		{"bad magic", func(b []byte) []byte { copy(b, "JUNK"); return b }, "bad magic"},
		{"future format", func(b []byte) []byte { b[4] = 9; return b }, "unsupported format version 9"},
		{"zeroed", func(b []byte) []byte { return make([]byte, len(b)) }, "bad magic"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			path := filepath.Join(dir, "src.state")
			mangled := tc.mangle(append([]byte(nil), good...))
			require.NoError(t, os.WriteFile(path, mangled, 0o600))
			s := openTestFileStore(t, dir)

			_, err := s.Load(ctx, "src")
			require.ErrorIs(t, err, ErrCorrupt, "case %d", i)
			require.NotErrorIs(t, err, ErrNotFound, "case %d: corrupt must not read as missing", i)
			var ce *CorruptError
			require.ErrorAs(t, err, &ce, "case %d", i)
			require.Equal(t, path, ce.Path, "case %d", i)
			require.Contains(t, err.Error(), path, "case %d: the error names the file", i)
			require.Contains(t, err.Error(), tc.want, "case %d", i)

			// Save refuses to overwrite a file it cannot read.
			_, err = s.Save(ctx, "src", []byte("new"), "")
			require.ErrorIs(t, err, ErrCorrupt, "case %d", i)
			_, err = s.Save(ctx, "src", []byte("new"), "7")
			require.ErrorIs(t, err, ErrCorrupt, "case %d", i)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, mangled, after, "case %d: the corrupt file is left for the operator", i)

			// The operator's way out: Delete.
			require.NoError(t, s.Delete(ctx, "src"))
			_, err = s.Save(ctx, "src", []byte("new"), "")
			require.NoError(t, err)
		})
	}
}

func TestFileStoreIgnoresLeftoverTempFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := OpenFile(dir)
	require.NoError(t, err)
	v1, err := s.Save(ctx, "src", []byte("committed"), "")
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// A crash before the rename leaves temp files: one torn, one complete
	// (named as builds before fsx named them).
	torn := filepath.Join(dir, ".src.state.tmp-AAAA")
	complete := filepath.Join(dir, oldTmpPrefix+"src.BBBB")
	require.NoError(t, os.WriteFile(torn, encodeFile(2, []byte("uncommitted"))[:10], 0o600))
	require.NoError(t, os.WriteFile(complete, encodeFile(2, []byte("uncommitted")), 0o600))
	// A compaction that crashed before its rename.
	compaction := filepath.Join(dir, "."+journalName+".tmp-CCCC")
	require.NoError(t, os.WriteFile(compaction, append(journalHeader(), encodeRecord(recordPut, "src", 2, []byte("uncommitted"))...), 0o600))
	other := filepath.Join(dir, "README")
	require.NoError(t, os.WriteFile(other, []byte("operator notes"), 0o600))

	s = openTestFileStore(t, dir)
	st, err := s.Load(ctx, "src")
	require.NoError(t, err)
	require.Equal(t, State{Data: []byte("committed"), Version: v1}, st)
	require.NoFileExists(t, torn)
	require.NoFileExists(t, complete)
	require.NoFileExists(t, compaction)
	require.FileExists(t, other, "files that are not the store's are left alone")

	v2, err := s.Save(ctx, "src", []byte("next"), v1)
	require.NoError(t, err)
	require.Equal(t, Version("2"), v2)
}

func TestFileStoreDirectoryIsLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := OpenFile(dir)
	require.NoError(t, err)
	_, err = OpenFile(dir)
	require.ErrorContains(t, err, "lock directory "+dir)
	require.NoError(t, first.Close())
	second, err := OpenFile(dir)
	require.NoError(t, err, "Close releases the lock")
	require.NoError(t, second.Close())
}

func TestOpenFileErrors(t *testing.T) {
	t.Parallel()
	_, err := OpenFile("")
	require.ErrorContains(t, err, "empty directory path")
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = OpenFile(file)
	require.ErrorContains(t, err, "a-file")
}

func TestFileStoreKeyLockHonoursContext(t *testing.T) {
	t.Parallel()
	s := openTestFileStore(t, t.TempDir())
	unlock, err := s.locks.lock(context.Background(), "src")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = s.Save(ctx, "src", []byte("x"), "")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "wait for key lock")

	unlock()
	_, err = s.Save(context.Background(), "src", []byte("x"), "")
	require.NoError(t, err)
	s.locks.mu.Lock()
	require.Empty(t, s.locks.m, "idle key locks are released")
	s.locks.mu.Unlock()
}

// TestFileStoreNoLostUpdates runs read-modify-write loops from several
// goroutines; with version checks every increment must survive.
func TestFileStoreNoLostUpdates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTestFileStore(t, t.TempDir())
	const workers, each = 4, 15
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for done := 0; done < each; {
				st, err := s.Load(ctx, "counter")
				if err != nil && !errors.Is(err, ErrNotFound) {
					t.Errorf("load: %v", err)
					return
				}
				_, err = s.Save(ctx, "counter", append(st.Data, 'x'), st.Version)
				switch {
				case err == nil:
					done++
				case !errors.Is(err, ErrConflict):
					t.Errorf("save: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	st, err := s.Load(ctx, "counter")
	require.NoError(t, err)
	require.Len(t, st.Data, workers*each)
	require.Equal(t, Version("60"), st.Version)
}
