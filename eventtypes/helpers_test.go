package eventtypes

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/config"
)

var noEnv = config.WithEnv(config.MapEnv(nil))

// loadDeployment reads a deployment directory (config.toml and its
// connector files) and builds its catalog.
func loadDeployment(t testing.TB, dir string) (*Catalog, error) {
	t.Helper()
	rt, err := config.Load(filepath.Join(dir, "config.toml"), noEnv)
	require.NoError(t, err)
	store, err := config.OpenStore(rt.Connectors.ConfigDir, noEnv)
	require.NoError(t, err)
	set, err := store.Load(context.Background())
	require.NoError(t, err)
	require.Empty(t, set.Errors)
	return Build(rt, set.Connectors)
}

func sample(t testing.TB) *Catalog {
	t.Helper()
	c, err := loadDeployment(t, "testdata/deploy")
	require.NoError(t, err)
	return c
}

// copyDir copies the sample deployment to a temporary directory, for
// tests that change it.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, os.CopyFS(dst, os.DirFS(src)))
	return dst
}

func write(t testing.TB, file, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(file, []byte(content), 0o644))
}
