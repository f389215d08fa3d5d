package broker

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// A compaction that fails (here: a directory has taken the journal's name,
// so the rename fails) must not break offset storage: stores keep
// succeeding on the journal's old file, and a later compaction catches up.
func TestJournalSurvivesAFailedCompaction(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "offsets")
	j, m, err := openJournal(path, false, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { j.close() })
	p := &partition{offsets: &offsetStore{m: m, j: j}}
	require.NoError(t, os.Remove(path))
	require.NoError(t, os.Mkdir(path, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(path, "x"), nil, 0o644))

	k := offsetKey{wire.ConsumerSingle, 1}
	for i := range 3000 { // compactions are due from record 1025 on, and fail
		require.NoError(t, p.storeOffset(k, uint64(i), false), "store %d", i)
	}
	require.NoError(t, os.RemoveAll(path))
	for i := 3000; i < 4200; i++ { // the next try succeeds
		require.NoError(t, p.storeOffset(k, uint64(i), false), "store %d", i)
	}
	require.NoError(t, j.close())

	_, m, err = openJournal(path, false, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, map[offsetKey]uint64{k: 4199}, m)
}

// Only a closed journal (its partition closed or deleted) reports
// os.ErrClosed, which the handlers answer with status 20.
func TestJournalClosedIsErrClosed(t *testing.T) {
	t.Parallel()
	j, m, err := openJournal(filepath.Join(t.TempDir(), "offsets"), false, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	p := &partition{offsets: &offsetStore{m: m, j: j}}
	require.NoError(t, j.close())
	require.ErrorIs(t, p.storeOffset(offsetKey{wire.ConsumerSingle, 1}, 1, false), os.ErrClosed)
}
