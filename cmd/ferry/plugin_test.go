package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPluginDescribe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "go-sink")
	b, err := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "../../examples/plugins/go-sink").CombinedOutput()
	require.NoError(t, err, "%s", b)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ferry-plugin.toml"),
		[]byte("name = \"go-sink\"\nkind = \"sink\"\ncommand = \"./go-sink\"\n"), 0o644))
	for _, path := range []string{filepath.Join(dir, "ferry-plugin.toml"), dir, bin} {
		out, err := ferry(t, "", "plugin", "describe", path)
		require.NoError(t, err)
		require.Contains(t, out, "go-sink sink: appends each message's payload")
		require.Contains(t, out, "path")
		require.Contains(t, out, "required")
		require.Contains(t, out, "[plugin_config]")
	}
}
