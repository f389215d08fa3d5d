package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/plugin/plugintest"
)

// buildPlugin compiles a Go plugin package (relative to the module root)
// into dir.
func buildPlugin(t *testing.T, dir, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	b, err := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "../../"+pkg).CombinedOutput()
	require.NoError(t, err, "%s", b)
	return bin
}

func TestPluginDescribe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := buildPlugin(t, dir, "examples/plugins/go-sink")
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
	out, err := ferry(t, "", "plugin", "describe", "../../examples/plugins/shell-sink")
	require.NoError(t, err)
	require.Contains(t, out, "shell-sink sink: appends each message's payload")
	require.Contains(t, out, "transport lines")

	// A transform plugin: its config table and a [transforms.plugin] sample.
	tdir := t.TempDir()
	buildPlugin(t, tdir, "examples/plugins/go-transform")
	require.NoError(t, os.WriteFile(filepath.Join(tdir, "ferry-plugin.toml"),
		[]byte("name = \"go-transform\"\nkind = \"transform\"\ncommand = \"./go-transform\"\nspec = \"call\"\n"), 0o644))
	out, err = ferry(t, "", "plugin", "describe", tdir)
	require.NoError(t, err)
	for _, want := range []string{"go-transform transform: upper-cases a field", "transforms.plugin.config:", "field", "required",
		"[transforms.plugin]\n  path = ", "[transforms.plugin.config]\n  field = \"name\""} {
		require.Contains(t, out, want)
	}
}

// addScript is a --add command: it appends $1 numbered JSON lines to the
// file in $IN and prints them.
const addScript = `for i in $(seq "$1"); do c=$(( $(cat "$IN.count" 2>/dev/null || echo 0) + 1 )); echo $c >"$IN.count"; ` +
	`l="{\"record\":$c}"; echo "$l" >>"$IN"; echo "$l"; done`

// TestPluginTest runs `ferry plugin test` on the example plugins (Go on
// gRPC, shell on the line protocol): each passes the conformance suite,
// the crash in the middle of a batch included.
func TestPluginTest(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"bash", "jq"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s is not installed", c)
		}
	}
	dir := t.TempDir()
	var once sync.Once
	var goSink, goSource string
	build := func() {
		once.Do(func() {
			goSink, goSource = buildPlugin(t, dir, "examples/plugins/go-sink"), buildPlugin(t, dir, "examples/plugins/go-source")
		})
	}
	for _, c := range []struct {
		name string
		path func() string
		sink bool
		args []string
	}{
		{"go-sink", func() string { build(); return goSink }, true, []string{"--config", "reject=REJECT", "--poison", `{"REJECT":1}`}},
		{"shell-sink", func() string { return "../../examples/plugins/shell-sink" }, true, []string{"--config", "reject=REJECT", "--poison", `{"REJECT":1}`}},
		{"go-source", func() string { build(); return goSource }, false, []string{"--stable-ids"}},
		{"shell-source", func() string { return "../../examples/plugins/shell-source/ferry-plugin.toml" }, false, []string{"--stable-ids"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "data.txt")
			args := append([]string{"plugin", "test", c.path(), "--config", "path=" + file}, c.args...)
			if c.sink {
				args = append(args, "--read-file", file)
			} else {
				require.NoError(t, os.WriteFile(file, nil, 0o644))
				args = append(args, "--add", "IN="+file+" bash -c '"+addScript+"' add $1")
			}
			out, err := ferry(t, "", args...)
			require.NoError(t, err, "%s", out)
			require.Contains(t, out, "ok    a crash in the middle of a batch, and the replay")
			require.Contains(t, out, "ok: "+c.name+" passes the")
			require.NotContains(t, out, "FAIL")
			t.Logf("%s", out)
		})
	}
}

// TestPluginTestFailsABrokenPlugin: a sink that acknowledges every
// message and writes only every other one fails, named, with what the
// external system holds.
func TestPluginTestFailsABrokenPlugin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := buildPlugin(t, dir, "plugin/host/testdata/misbehave")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ferry-plugin.toml"),
		[]byte("name = \"lose\"\nkind = \"sink\"\ncommand = "+`"`+bin+`"`+"\nargs = [\"lose\"]\n"), 0o644))
	out := filepath.Join(dir, "out.txt")
	got, err := ferry(t, "", "plugin", "test", dir, "--config", "path="+out, "--read-file", out)
	require.ErrorIs(t, err, plugintest.ErrFailed)
	require.Equal(t, 1, exitCode(err))
	require.Contains(t, err.Error(), "lose failed 2 of the 4 checks it ran")
	require.Contains(t, err.Error(), "writes every message of a batch, in order")
	require.Contains(t, got, "FAIL  writes every message of a batch, in order")
	require.Contains(t, got, `after one batch: the external system holds ["{\"n\":0,`)
	require.Contains(t, got, "was lost: after the kill and the replay")

	// Without what the suite needs: a usage error saying so.
	_, err = ferry(t, "", "plugin", "test", dir, "--config", "path="+out)
	require.Error(t, err)
	require.Equal(t, 2, exitCode(err))
	require.True(t, strings.Contains(err.Error(), "--read CMD or --read-file PATH"), err.Error())
}
