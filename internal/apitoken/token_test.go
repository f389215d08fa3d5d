package apitoken

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFileNameMeetsAtOneNameForLocalHosts(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:8081", "localhost:8081", "[::1]:8081", "0.0.0.0:8081", "[::]:8081", ":8081", "127.0.0.2:8081"} {
		require.Equal(t, "localhost_8081.token", FileName(addr), addr)
	}
	require.Equal(t, "api.example.com_443.token", FileName("API.example.com.:443"))
	require.Equal(t, "fe80__1_8081.token", FileName("[fe80::1]:8081"))
	require.Equal(t, "a_b_80.token", FileName("a/b:80"), "no path separators in names")
}

func TestWriteReadRemove(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ferry", "api")
	_, err := Read(dir, "127.0.0.1:8081")
	require.True(t, errors.Is(err, ErrNoToken), "%v", err)

	tok := New()
	require.Len(t, tok, 64)
	require.NotEqual(t, tok, New())
	path, err := Write(dir, "127.0.0.1:8081", tok)
	require.NoError(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm())

	got, err := Read(dir, "localhost:8081")
	require.NoError(t, err)
	require.Equal(t, tok, got)

	require.NoError(t, Remove(path, "another runtime's token"))
	require.FileExists(t, path, "a token another runtime wrote is left alone")
	require.NoError(t, Remove(path, tok))
	require.NoFileExists(t, path)
	require.NoError(t, Remove(path, tok), "removing twice is fine")
}

func TestWriteRefusesADirectoryOthersCanUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o777))
	_, err := Write(dir, "127.0.0.1:8081", New())
	require.NoError(t, err, "a directory of the user's own is made private")
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	if os.Geteuid() != 0 {
		t.Skip("giving a directory to another user needs root")
	}
	other := t.TempDir()
	require.NoError(t, os.Chown(other, 65534, 65534))
	_, err = Write(other, "127.0.0.1:8081", New())
	require.ErrorContains(t, err, "belongs to uid 65534, not to this user")
}
