package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStoreDeleteConnector(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "stdout.toml", sinkV0)
	writeFile(t, dir, "stdout_v1.toml", strings.Replace(sinkV0, "version = 0", "version = 1", 1))
	writeFile(t, dir, "stdout_broken.toml", "type = \"sink\"\nkey = \"stdout\"\nversion = 2\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\npoll_interval = \"soon\"\n")
	writeFile(t, dir, "other.toml", strings.Replace(sinkV0, `key = "stdout"`, `key = "other"`, 1))
	s, err := OpenStore(dir, noEnv)
	require.NoError(t, err)
	require.NoError(t, s.SetActive(t.Context(), KindSink, "stdout", 0))
	require.NoError(t, s.SetActive(t.Context(), KindSink, "other", 0))

	require.NoError(t, s.DeleteConnector(t.Context(), KindSink, "stdout"))
	for _, f := range []string{"stdout.toml", "stdout_v1.toml", "stdout_broken.toml"} {
		require.NoFileExists(t, filepath.Join(dir, f))
	}
	require.FileExists(t, filepath.Join(dir, "other.toml"))
	active, err := os.ReadFile(filepath.Join(dir, ActiveVersionsFile))
	require.NoError(t, err)
	require.NotContains(t, string(active), "stdout")
	require.Contains(t, string(active), "other = 0")

	set, err := s.Load(t.Context())
	require.NoError(t, err)
	require.Nil(t, set.Get(KindSink, "stdout"), "it does not come back on the next load")
	require.NotNil(t, set.Get(KindSink, "other"))
	require.Empty(t, set.Errors)

	require.ErrorIs(t, s.DeleteConnector(t.Context(), KindSink, "stdout"), ErrNotFound)
	require.ErrorIs(t, s.DeleteConnector(t.Context(), KindSource, "other"), ErrNotFound, "kinds are separate")
	require.ErrorIs(t, s.DeleteConnector(t.Context(), KindSink, "../x"), ErrInvalid)

	// Only an active entry left (its files removed by hand): the entry goes.
	require.NoError(t, os.Remove(filepath.Join(dir, "other.toml")))
	require.NoError(t, s.DeleteConnector(t.Context(), KindSink, "other"))
	active, err = os.ReadFile(filepath.Join(dir, ActiveVersionsFile))
	require.NoError(t, err)
	require.NotContains(t, string(active), "other")
}
