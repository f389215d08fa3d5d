package file

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/connector"
)

// The runtime's own directories are out of reach: a sink path or a source
// glob naming them is refused when the connector is built, a sink path
// that reaches them through a placeholder is refused when written (a
// permanent error, dead-lettered), and a source glob that matches them
// among other files skips them.
func TestFileConnectorsStayOutOfProtectedPaths(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	conf := filepath.Join(root, "connectors")
	require.NoError(t, os.MkdirAll(conf, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(conf, "db.toml"), []byte(`{"password": "x"}`+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "data.ndjson"), []byte(`{"ok": 1}`+"\n"), 0o600))
	paths := connector.Paths{Protected: []connector.ProtectedPath{{Path: conf, What: "connector configuration directory (config_dir)"}}}
	cfg := func(values map[string]any) connector.Config {
		return connector.Config{Key: "k", Plugin: connector.PluginConfig{Values: values, Source: "k.toml"}, Paths: paths}
	}

	_, err := newSink(cfg(map[string]any{"path": filepath.Join(conf, "evil.toml")}))
	require.ErrorContains(t, err, "k.toml: plugin_config.path: "+filepath.Join(conf, "evil.toml")+" is inside the runtime's connector configuration directory")
	_, err = newSource(cfg(map[string]any{"paths": []any{filepath.Join(conf, "*.toml")}}))
	require.ErrorContains(t, err, "k.toml: plugin_config.paths[0]: ")
	require.ErrorContains(t, err, "is inside the runtime's connector configuration directory")

	// {stream} lands in config_dir only when the stream is "connectors".
	s, err := newSink(cfg(map[string]any{"path": filepath.Join(root, "{stream}", "x.toml"), "format": "raw"}))
	require.NoError(t, err)
	require.NoError(t, s.Open(context.Background()))
	defer s.Close(context.Background())
	b := sinkBatch(connector.SchemaRaw, "[sink]")
	b.Stream = "connectors"
	err = s.Consume(context.Background(), b)
	require.ErrorIs(t, err, connector.ErrPathNotAllowed)
	require.True(t, connector.IsPermanent(err), "dead-lettered, not retried")
	require.NoFileExists(t, filepath.Join(conf, "x.toml"))
	b.Stream = "ok"
	require.NoError(t, s.Consume(context.Background(), b))
	require.FileExists(t, filepath.Join(root, "ok", "x.toml"))

	// A broad glob reads the data file and skips config_dir.
	src, err := newSource(cfg(map[string]any{"paths": []any{filepath.Join(root, "*"), filepath.Join(root, "*", "*")}}))
	require.NoError(t, err)
	require.NoError(t, src.Open(context.Background(), nil))
	defer src.Close(context.Background())
	got, _ := collect(t, src, 1)
	require.Equal(t, []string{`{"ok": 1}`}, got)
	require.True(t, src.refused[filepath.Join(conf, "db.toml")], "the protected file was matched and skipped")
}
