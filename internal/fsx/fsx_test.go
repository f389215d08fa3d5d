package fsx

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteFileReplacesAtomically(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	require.NoError(t, WriteFile(path, []byte("one"), 0o600))
	require.NoError(t, WriteFile(path, []byte("two"), 0o640))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "two", string(data))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "the mode asked for, whatever the umask")
	requireNames(t, dir, "state.json") // no temporary file is left

	err = WriteFile(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600)
	require.ErrorContains(t, err, "write "+filepath.Join(dir, "missing", "x"))
	require.Error(t, SyncDir(filepath.Join(dir, "missing")))
}

func TestReplaceFileReturnsTheNewFileOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "offsets")
	require.NoError(t, os.WriteFile(path, []byte("old contents"), 0o644))
	old, err := os.Open(path)
	require.NoError(t, err)
	defer old.Close()

	f, err := ReplaceFile(path, []byte("head"), 0o600)
	require.NoError(t, err)
	_, err = f.Write([]byte("+tail"))
	require.NoError(t, err, "the file is open for writing, at its end")
	require.NoError(t, f.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "head+tail", string(data))
	was, err := io.ReadAll(old)
	require.NoError(t, err)
	require.Equal(t, "old contents", string(was), "a reader of the old file keeps reading it whole")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	requireNames(t, dir, "offsets")

	// A failed replace (the target is a directory) leaves nothing open or behind.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	f, err = ReplaceFile(filepath.Join(dir, "sub"), []byte("x"), 0o600)
	require.Error(t, err)
	require.Nil(t, f)
	requireNames(t, dir, "offsets", "sub")
}

func TestDirWritesOnlyInsideItself(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	dir := filepath.Join(parent, "store")
	require.NoError(t, os.Mkdir(dir, 0o700))
	d, err := OpenDir(dir)
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	require.Equal(t, dir, d.Path())

	require.NoError(t, d.WriteFile("a.state", []byte("a"), 0o600))
	got, err := d.Root().ReadFile("a.state")
	require.NoError(t, err)
	require.Equal(t, "a", string(got))

	err = d.WriteFile("../escaped", []byte("x"), 0o600)
	require.ErrorContains(t, err, "write "+filepath.Join(dir, "../escaped"))
	requireNames(t, parent, "store")
	requireNames(t, dir, "a.state")
	require.NoError(t, d.Sync())

	_, err = OpenDir(filepath.Join(parent, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestIsTemp(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		".a.state.tmp-ABCDEF":   true,
		".metadata.json.tmp-12": true,
		"a.state":               false,
		".lock":                 false,
		"a.tmp-1":               false, // not hidden: not ours
		"LOCK":                  false,
	} {
		require.Equal(t, want, IsTemp(name), name)
	}
}

// requireNames checks that dir holds exactly names.
func requireNames(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	require.ElementsMatch(t, names, got, "in %s", dir)
}
