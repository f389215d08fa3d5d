// Package plugins_test runs the example plugins in other languages than Go
// (python-sink, node-source) in real pipelines on the embedded broker,
// named by their checked-in manifests.
//
// They need python3 with grpcio and protobuf (Debian: python3-grpcio,
// python3-protobuf) and node with npm; node-source's packages are
// installed with `npm ci` when its node_modules is missing. Without them
// the tests skip, saying why, or fail when FERRY_REQUIRE_PLUGIN_RUNTIMES=1.
package plugins_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	_ "github.com/ferryhq/ferry/connectors/file" // the built-in file source and sink
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/plugin/host" // plugin paths in connector.Default
	"github.com/ferryhq/ferry/runtime"
)

// unavailable skips the test, or fails it when the runtimes are required.
func unavailable(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("FERRY_REQUIRE_PLUGIN_RUNTIMES") == "1" {
		t.Fatalf("FERRY_REQUIRE_PLUGIN_RUNTIMES=1 but %s", why)
	}
	t.Skipf("%s (FERRY_REQUIRE_PLUGIN_RUNTIMES=1 makes this a failure)", why)
}

// needPython checks what python-sink's launcher looks for: python3 on
// PATH, else /usr/bin/python3, with grpcio and protobuf.
func needPython(t *testing.T) {
	t.Helper()
	var tried []string
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		out, err := exec.Command(p, "-c", "import grpc, google.protobuf").CombinedOutput()
		if err == nil {
			return
		}
		tried = append(tried, fmt.Sprintf("%s: %s", p, lastLine(out)))
	}
	unavailable(t, fmt.Sprintf("no python3 with grpcio and protobuf (apt-get install python3-grpcio python3-protobuf); tried %q", tried))
}

var npmOnce struct {
	sync.Once
	err string
}

// needNode checks node and installs node-source's packages with npm ci
// when its node_modules is missing (once per test binary).
func needNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		unavailable(t, "node is not on PATH (Node.js 18 or later)")
	}
	dir, err := filepath.Abs("node-source")
	if err != nil {
		t.Fatal(err)
	}
	npmOnce.Do(func() {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grpc", "grpc-js", "package.json")); err == nil {
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			npmOnce.err = "node-source has no node_modules and npm is not on PATH (run npm ci --prefix examples/plugins/node-source)"
			return
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			npmOnce.err = fmt.Sprintf("npm ci in %s: %v: %s", dir, err, lastLine(out))
		}
	})
	if npmOnce.err != "" {
		unavailable(t, npmOnce.err)
	}
}

func lastLine(b []byte) string {
	ls := strings.Split(strings.TrimSpace(string(b)), "\n")
	return ls[len(ls)-1]
}

// manifest is the absolute path of an example's checked-in manifest.
func manifest(t *testing.T, example string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(example, "ferry-plugin.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

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

// lines are the complete lines of a file (none when it does not exist).
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 {
		return nil
	}
	return strings.Split(string(b[:i]), "\n")
}

// builtinSource is the built-in file source following in, a line a message.
func builtinSource(in string) string {
	return fmt.Sprintf("type = \"source\"\nkey = \"src\"\npath = \"file\"\n[plugin_config]\npaths = [%q]\nformat = \"lines\"\nbatch_size = 10\nfollow = true\npoll_interval = \"20ms\"\n"+
		"[[streams]]\nstream = \"s\"\ntopic = \"t\"\nbatch_length = 10\nlinger_time = \"0\"\n", in)
}

// builtinSink is the built-in file sink writing each payload as a line.
func builtinSink(out string) string {
	return fmt.Sprintf("type = \"sink\"\nkey = \"dst\"\npath = \"file\"\n[plugin_config]\npath = %q\nformat = \"lines\"\n"+
		"[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\npoll_interval = \"5ms\"\nbatch_length = 10\n", out)
}

func pluginSink(manifest, out, extra string) string {
	return fmt.Sprintf("type = \"sink\"\nkey = \"dst\"\npath = %q\n[plugin_config]\npath = %q\n%s\n"+
		"[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\npoll_interval = \"5ms\"\nbatch_length = 10\n", manifest, out, extra)
}

func pluginSource(manifest, in string) string {
	return fmt.Sprintf("type = \"source\"\nkey = \"src\"\npath = %q\n[plugin_config]\npath = %q\nbatch_size = 10\nschema = \"text\"\n"+
		"[[streams]]\nstream = \"s\"\ntopic = \"t\"\nbatch_length = 10\nlinger_time = \"0\"\n", manifest, in)
}

func info(rt *connectortest.Runtime, kind, key string) runtime.Info {
	for _, i := range rt.Connectors(connector.Kind(kind)) {
		if i.Key == key {
			return i
		}
	}
	return runtime.Info{}
}

func checkAll(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the destination has %d lines %q…, want the %d lines of the input in order", len(got), got[:min(5, len(got))], len(want))
	}
}

func checkRunning(t *testing.T, rt *connectortest.Runtime) {
	t.Helper()
	for _, k := range [][2]string{{"source", "src"}, {"sink", "dst"}} {
		if i := info(rt, k[0], k[1]); i.Status != runtime.StatusRunning || i.Restarts != 0 {
			t.Fatalf("%s %s: status %s, %d restarts, last error %q", k[0], k[1], i.Status, i.Restarts, i.LastError)
		}
	}
}

// TestPythonSink: the built-in file source sends lines to a topic, which
// python-sink consumes and appends to its file: every line, in order.
func TestPythonSink(t *testing.T) {
	needPython(t)
	in, want := writeInput(t, 100)
	out := filepath.Join(t.TempDir(), "out.txt")
	rt := connectortest.Start(t, map[string]string{
		"src.toml": builtinSource(in),
		"dst.toml": pluginSink(manifest(t, "python-sink"), out, ""),
	})
	connectortest.Eventually(t, "every line reaches python-sink's file", func() bool { return len(lines(t, out)) >= len(want) })
	checkAll(t, lines(t, out), want)
	checkRunning(t, rt)
}

// TestSpecCalls: the runtime checks plugin_config against the settings
// of each example's Spec call, like a built-in's.
func TestSpecCalls(t *testing.T) {
	for _, c := range []struct {
		example string
		kind    connector.Kind
		need    func(*testing.T)
		ok      map[string]any
	}{
		{"python-sink", connector.KindSink, needPython, map[string]any{"path": "/tmp/x", "delay": "5ms", "fsync": true}},
		{"node-source", connector.KindSource, needNode, map[string]any{"path": "/tmp/x", "batch_size": int64(5), "schema": "text"}},
	} {
		t.Run(c.example, func(t *testing.T) {
			c.need(t)
			info, ok, err := host.Resolve(c.kind, manifest(t, c.example), "")
			if err != nil || !ok {
				t.Fatalf("resolve: ok %v, %v", ok, err)
			}
			if err := info.Spec.Check(connector.PluginConfig{Values: c.ok}); err != nil {
				t.Fatalf("a good plugin_config is refused: %v", err)
			}
			for _, bad := range []map[string]any{{}, {"path": "/tmp/x", "colour": "blue"}, {"path": int64(3)}} {
				err := info.Spec.Check(connector.PluginConfig{Values: bad})
				if err == nil {
					t.Fatalf("plugin_config %v is accepted", bad)
				}
				t.Logf("%v: %v", bad, err)
			}
		})
	}
}

// TestNodeSource: node-source sends the lines of its input file to a
// topic, which the built-in file sink writes out: every line, in order.
func TestNodeSource(t *testing.T) {
	needNode(t)
	in, want := writeInput(t, 100)
	out := filepath.Join(t.TempDir(), "out.txt")
	rt := connectortest.Start(t, map[string]string{
		"src.toml": pluginSource(manifest(t, "node-source"), in),
		"dst.toml": builtinSink(out),
	})
	connectortest.Eventually(t, "every line of node-source's input reaches the file", func() bool { return len(lines(t, out)) >= len(want) })
	checkAll(t, lines(t, out), want)
	checkRunning(t, rt)
}

// TestNodeSourceResumes: a runtime started again on the same state
// directory opens node-source with the state saved last (the lines sent),
// so it sends only the lines added since: none twice, none lost.
func TestNodeSourceResumes(t *testing.T) {
	needNode(t)
	in, want := writeInput(t, 30)
	out := filepath.Join(t.TempDir(), "out.txt")
	dir := t.TempDir()
	files := map[string]string{
		"src.toml": pluginSource(manifest(t, "node-source"), in),
		"dst.toml": builtinSink(out),
	}
	rt := connectortest.Start(t, files, connectortest.WithDir(dir))
	connectortest.Eventually(t, "the first 30 lines reach the file", func() bool { return len(lines(t, out)) >= len(want) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(in, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 30; i < 50; i++ {
		l := fmt.Sprintf(`{"n":%d}`, i)
		want = append(want, l)
		fmt.Fprintln(f, l)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rt = connectortest.Start(t, files, connectortest.WithDir(dir))
	connectortest.Eventually(t, "the 20 new lines reach the file", func() bool { return len(lines(t, out)) >= len(want) })
	checkAll(t, lines(t, out), want)
	checkRunning(t, rt)
}

// TestNodeSourceIntoPythonSink: the two examples together.
func TestNodeSourceIntoPythonSink(t *testing.T) {
	needNode(t)
	needPython(t)
	in, want := writeInput(t, 50)
	out := filepath.Join(t.TempDir(), "out.txt")
	rt := connectortest.Start(t, map[string]string{
		"src.toml": pluginSource(manifest(t, "node-source"), in),
		"dst.toml": pluginSink(manifest(t, "python-sink"), out, ""),
	})
	connectortest.Eventually(t, "every line goes from node-source to python-sink", func() bool { return len(lines(t, out)) >= len(want) })
	checkAll(t, lines(t, out), want)
	checkRunning(t, rt)
}

// children lists the running processes whose parent is this test and
// whose command line contains what.
func children(what string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(os.Getpid()) {
			continue // a zombie, or not ours
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(cmdline, []byte(what)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestPythonSinkKilled kills python-sink's process with SIGKILL while it
// writes batches, a few times: nothing is lost, at most a batch per kill
// is written twice, and the runtime stays up.
func TestPythonSinkKilled(t *testing.T) {
	needPython(t)
	const n, batch, kills = 300, 10, 5
	in, want := writeInput(t, n)
	out := filepath.Join(t.TempDir(), "out.txt")
	rt := connectortest.Start(t, map[string]string{
		"src.toml": builtinSource(in),
		// 5 ms a message: a batch takes 50 ms, and a kill lands in one.
		"dst.toml": pluginSink(manifest(t, "python-sink"), out, `delay = "5ms"`),
	})
	connectortest.KillProcesses(t, kills, batch, want, func() []string { return lines(t, out) },
		func(int) []int { return children("python-sink/sink.py") })
	if i := info(rt, "sink", "dst"); i.Status != runtime.StatusRunning {
		t.Fatalf("sink: status %s, last error %q", i.Status, i.LastError)
	}
}
