package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/transform/wasm/wasmtest"
	"github.com/stretchr/testify/require"
)

// transformTest runs `ferry transform test` on the test guest.
func transformTest(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"transform", "test", wasmtest.GoGuest(t)}, args...))
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestTransformTestPrintsEachLine(t *testing.T) {
	t.Parallel()
	out, errOut, err := transformTest(t, "{\"n\":1}\n{\"n\":2}\n\nnot json\n", "--function", "split", "--batch", "2")
	require.NoError(t, err)
	require.Equal(t, "1: split into 2\n     {\"n\":1,\"part\":1}\n     {\"n\":1,\"part\":2}\n"+
		"2: split into 2\n     {\"n\":2,\"part\":1}\n     {\"n\":2,\"part\":2}\n"+
		"4: fail: the payload is not a JSON object\n", out)
	require.Empty(t, errOut)

	cfg := filepath.Join(t.TempDir(), "cfg.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("key = \"env\"\nvalue = \"prod\"\n"), 0o644))
	out, _, err = transformTest(t, `{"n":1}`+"\n", "--function", "add_field", "--config", cfg)
	require.NoError(t, err)
	require.Equal(t, "1: replace {\"n\":1,\"env\":\"prod\"}\n", out)

	out, errOut, err = transformTest(t, "{\"n\":1}\n{\"n\":2}\n", "--function", "drop_odd", "--config", `{"x":1}`)
	require.NoError(t, err)
	require.Equal(t, "1: drop\n2: keep\n", out)
	require.Equal(t, "counter dropped = 1\n", errOut)
}

func TestTransformTestReportsAStoppedModule(t *testing.T) {
	t.Parallel()
	out, _, err := transformTest(t, "{\"n\":1}\n{\"n\":2,\"s\":\"spin\"}\n", "--function", "spin", "--timeout", "200ms")
	require.EqualError(t, err, "1 call(s) of the module failed")
	require.Equal(t, "1: error: wasm module ran past its timeout (200ms); stopped\n"+
		"2: error: wasm module ran past its timeout (200ms); stopped\n", out)
	_, _, err = transformTest(t, "", "--function", "nope")
	require.ErrorContains(t, err, `the module does not export the function "nope"`)
}

// `ferry transform test PLUGIN` runs a transform plugin as
// [transforms.plugin] does, its --config checked against its spec.
func TestTransformTestOnAPlugin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	buildPlugin(t, dir, "examples/plugins/go-transform")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ferry-plugin.toml"),
		[]byte("name = \"go-transform\"\nkind = \"transform\"\ncommand = \"./go-transform\"\nspec = \"call\"\n"), 0o644))
	run := func(stdin string, args ...string) (string, error) {
		cmd := newRootCmd()
		var out, errOut bytes.Buffer
		cmd.SetIn(strings.NewReader(stdin))
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"transform", "test", dir}, args...))
		err := cmd.ExecuteContext(context.Background())
		return out.String(), err
	}
	out, err := run("{\"name\":\"ann\"}\n{\"drop\":true}\n{\"name\":[\"a\",\"b\"]}\n[1]\n", "--config", `{"field":"name"}`)
	require.NoError(t, err)
	require.Equal(t, "1: replace {\"name\":\"ANN\"}\n2: drop\n3: split into 2\n     {\"name\":\"a\"}\n     {\"name\":\"b\"}\n"+
		"4: fail: the plugin failed the message: not a JSON object\n", out)
	_, err = run("{}\n")
	require.ErrorContains(t, err, "config.field: required key is missing")
}
