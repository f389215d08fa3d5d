package host_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/runtime"
)

// writeInput writes n JSON lines to a new file and returns it and them.
func writeInput(t *testing.T, n int) (string, []string) {
	t.Helper()
	var want []string
	var b strings.Builder
	for i := range n {
		l := fmt.Sprintf(`{"n":%d}`, i)
		want = append(want, l)
		b.WriteString(l + "\n")
	}
	in := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return in, want
}

func sourceFile(manifest, in string) string {
	return fmt.Sprintf("type = \"source\"\nkey = \"src\"\npath = %q\n[plugin_config]\npath = %q\nbatch_size = 10\n"+
		"[[streams]]\nstream = \"s\"\ntopic = \"t\"\nbatch_length = 10\nlinger_time = \"0\"\n", manifest, in)
}

func sinkFile(manifest, out, extra string) string {
	return fmt.Sprintf("type = \"sink\"\nkey = \"dst\"\npath = %q\n[plugin_config]\npath = %q\n%s\n"+
		"[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\npoll_interval = \"5ms\"\nbatch_length = 10\n", manifest, out, extra)
}

func info(rt *connectortest.Runtime, kind, key string) runtime.Info {
	for _, i := range rt.Connectors(kindOf(kind)) {
		if i.Key == key {
			return i
		}
	}
	return runtime.Info{}
}

// TestPipelineOfPlugins runs the example source and sink plugins in a
// real pipeline on the embedded broker, named by manifest paths relative
// to the connector files' directory.
func TestPipelineOfPlugins(t *testing.T) {
	srcBin, snkBin := build(t, "examples/plugins/go-source"), build(t, "examples/plugins/go-sink")
	dir := t.TempDir()
	srcM := manifest(t, "go-source", "source", srcBin, nil, "[limits]\nmemory_limit = \"2GiB\"\n")
	snkM := manifest(t, "go-sink", "sink", snkBin, nil, "[limits]\nmemory_limit = \"2GiB\"\n")
	rel := func(p string) string {
		r, err := filepath.Rel(filepath.Join(dir, "connectors"), p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	in, want := writeInput(t, 100)
	out := filepath.Join(t.TempDir(), "out.txt")
	rt := connectortest.Start(t, map[string]string{
		"src.toml": sourceFile(rel(srcM), in),
		"dst.toml": sinkFile(rel(snkM), out, ""),
	}, connectortest.WithRegistry(registry()), connectortest.WithDir(dir))
	connectortest.Eventually(t, "every line reaches the sink plugin's file", func() bool { return len(lines(t, out)) >= len(want) })
	if got := lines(t, out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the sink wrote %d lines %q…, want %d", len(got), got[:min(5, len(got))], len(want))
	}
	for _, k := range [][2]string{{"source", "src"}, {"sink", "dst"}} {
		if i := info(rt, k[0], k[1]); i.Status != runtime.StatusRunning || i.Restarts != 0 {
			t.Fatalf("%s %s: status %s, %d restarts, last error %q", k[0], k[1], i.Status, i.Restarts, i.LastError)
		}
	}
}

// TestSinkPluginKilledTenTimes kills the sink plugin's process with
// SIGKILL ten times while it writes batches: nothing is lost, at most a
// batch per kill is written twice, and the runtime stays up.
func TestSinkPluginKilledTenTimes(t *testing.T) {
	srcBin, snkBin := build(t, "examples/plugins/go-source"), build(t, "examples/plugins/go-sink")
	srcM := manifest(t, "go-source", "source", srcBin, nil, "")
	snkM := manifest(t, "go-sink", "sink", snkBin, nil, "[limits]\nrestart_backoff = \"20ms\"\n")
	const n, batch, kills = 400, 10, 10
	in, want := writeInput(t, n)
	out := filepath.Join(t.TempDir(), "out.txt")
	rt := connectortest.Start(t, map[string]string{
		"src.toml": sourceFile(srcM, in),
		"dst.toml": sinkFile(snkM, out, `delay = "3ms"`),
	}, connectortest.WithRegistry(registry()))
	connectortest.KillProcesses(t, kills, batch, want, func() []string { return lines(t, out) },
		func(int) []int { return processesOf(snkBin) })
	if i := info(rt, "sink", "dst"); i.Status != runtime.StatusRunning {
		t.Fatalf("sink: status %s, last error %q", i.Status, i.LastError)
	}
}

// TestMisbehavingPlugins: a sink plugin that hangs, one that prints
// garbage instead of the handshake and one that exits at once are each
// reported with status Error and the reason, and restarted with backoff.
func TestMisbehavingPlugins(t *testing.T) {
	srcBin, bad := build(t, "examples/plugins/go-source"), build(t, "plugin/host/testdata/misbehave")
	for _, c := range []struct {
		mode, reason string
	}{
		{"hang", "was not answered within call_timeout (300ms): the plugin hangs"},
		{"garbage", "Hello! This is not a handshake."},
		{"exit", "misbehave: cannot start: a library is missing"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			in, _ := writeInput(t, 5)
			srcM := manifest(t, "go-source", "source", srcBin, nil, "")
			m := manifest(t, "misbehave", "sink", bad, []string{c.mode},
				"spec = \"inline\"\n[[settings]]\nname = \"path\"\ntype = \"string\"\n[limits]\ncall_timeout = \"300ms\"\nstart_timeout = \"5s\"\nrestart_backoff = \"10ms\"\n")
			rt := connectortest.Start(t, map[string]string{
				"src.toml": sourceFile(srcM, in),
				"dst.toml": sinkFile(m, filepath.Join(t.TempDir(), "out.txt"), ""),
			}, connectortest.WithRegistry(registry()))
			var last runtime.Info
			connectortest.Eventually(t, "the sink is in error with the reason, restarted twice", func() bool {
				last = info(rt, "sink", "dst")
				return last.Restarts >= 2 && strings.Contains(last.LastError, c.reason)
			})
			connectortest.Eventually(t, "status Error", func() bool {
				last = info(rt, "sink", "dst")
				return last.Status == runtime.StatusError
			})
			t.Logf("%s: status %s, %d restarts, last error: %s", c.mode, last.Status, last.Restarts, last.LastError)
			if i := info(rt, "source", "src"); i.Status != runtime.StatusRunning {
				t.Fatalf("the source beside it: status %s (%s)", i.Status, i.LastError)
			}
		})
	}
}
