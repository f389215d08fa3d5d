package connector_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/connector"
)

func TestPathsCheck(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	conf := filepath.Join(root, "etc", "connectors")
	state := filepath.Join(root, "state")
	data := filepath.Join(root, "data")
	for _, d := range []string{conf, state, data, filepath.Join(root, "other")} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.Symlink(conf, filepath.Join(data, "link-to-conf")))
	require.NoError(t, os.Symlink(filepath.Join(conf, "x.toml"), filepath.Join(data, "file-link")))
	require.NoError(t, os.Symlink(filepath.Join(root, "etc"), filepath.Join(data, "etc-link")))
	p := connector.Paths{Protected: []connector.ProtectedPath{
		{Path: conf, What: "connector configuration directory (config_dir)"},
		{Path: state, What: "state directory ([state] path)"},
	}}
	for _, c := range []struct {
		path string
		want string // "" for allowed
	}{
		{filepath.Join(data, "out.ndjson"), ""},
		{filepath.Join(data, "new", "dir", "out.ndjson"), ""},
		{filepath.Join(conf, "evil.toml"), "inside the runtime's connector configuration directory (config_dir)"},
		{conf, "inside the runtime's connector configuration directory"},
		{filepath.Join(state, "broker", "x"), "inside the runtime's state directory ([state] path)"},
		{filepath.Join(data, "link-to-conf", "evil.toml"), "inside the runtime's connector configuration directory"},
		{filepath.Join(data, "file-link"), "inside the runtime's connector configuration directory"},
		{filepath.Join(data, "etc-link", "connectors", "evil.toml"), "inside the runtime's connector configuration directory"},
		{data + "/link-to-conf/../connectors/evil.toml", "inside the runtime's connector configuration directory"},
		{data + "/nothere/../../etc/connectors/evil.toml", `".." after a directory that does not exist`},
		{filepath.Join(root, "etc", "connectors-not", "x"), ""},
	} {
		err := p.Check(c.path)
		if c.want == "" {
			require.NoError(t, err, c.path)
			continue
		}
		require.Error(t, err, c.path)
		require.ErrorContains(t, err, c.want, c.path)
		require.True(t, errors.Is(err, connector.ErrPathNotAllowed), c.path)
		require.True(t, connector.IsPermanent(err), "a refused path is not retried")
	}

	allowed := p
	allowed.Allowed = []string{data}
	require.NoError(t, allowed.Check(filepath.Join(data, "a", "b.log")))
	require.ErrorContains(t, allowed.Check(filepath.Join(root, "other", "b.log")), "outside [connectors] allowed_dirs ("+data+")")
	require.ErrorContains(t, allowed.Check(filepath.Join(data, "link-to-conf", "x")), "inside the runtime's connector configuration directory",
		"a link out of an allowed directory is followed")

	require.NoError(t, allowed.CheckPattern(filepath.Join(data, "*", "*.log")))
	require.ErrorContains(t, allowed.CheckPattern(filepath.Join(root, "*.log")), "outside [connectors] allowed_dirs")
	require.ErrorContains(t, p.CheckPattern(filepath.Join(conf, "*.toml")), "inside the runtime's connector configuration directory")
	require.NoError(t, connector.Paths{}.Check(filepath.Join(conf, "x")), "the zero Paths allows everything")
}
