package host_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/runtime"
)

// transformInput writes n lines for the go-transform example: every tenth
// from 3 asks to be dropped, from 5 holds a list to split, from 7 is not
// an object (the plugin fails it); the rest have a name to upper-case. It
// returns the lines the sink must write, in order, and the failed ones.
func transformInput(t *testing.T, n int) (in string, want, failed []string) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		var l string
		switch i % 10 {
		case 3:
			l = fmt.Sprintf(`{"drop":true,"n":%d}`, i)
		case 5:
			l = fmt.Sprintf(`{"n":%d,"name":["a","b"]}`, i)
			want = append(want, fmt.Sprintf(`{"n":%d,"name":"a"}`, i), fmt.Sprintf(`{"n":%d,"name":"b"}`, i))
		case 7:
			l = fmt.Sprintf(`[%d]`, i)
			failed = append(failed, l)
		default:
			l = fmt.Sprintf(`{"n":%d,"name":"x%d"}`, i, i)
			want = append(want, fmt.Sprintf(`{"n":%d,"name":"X%d"}`, i, i))
		}
		b.WriteString(l + "\n")
	}
	in = filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return in, want, failed
}

func transformSink(sinkM, transformM, out string) string {
	return sinkFile(sinkM, out, "") + fmt.Sprintf(`on_error = "dead_letter"
dead_letter_topic = "dlq"
[transforms.plugin]
path = %q
[transforms.plugin.config]
field = "name"
`, transformM)
}

// TestTransformPluginInAPipeline: the go-transform example, on a sink,
// replaces, drops, splits and fails messages; the failed ones are
// dead-lettered with the plugin's reason.
func TestTransformPluginInAPipeline(t *testing.T) {
	srcBin, snkBin, trBin := build(t, "examples/plugins/go-source"), build(t, "examples/plugins/go-sink"), build(t, "examples/plugins/go-transform")
	srcM := manifest(t, "go-source", "source", srcBin, nil, "[limits]\nmemory_limit = \"2GiB\"\n")
	snkM := manifest(t, "go-sink", "sink", snkBin, nil, "[limits]\nmemory_limit = \"2GiB\"\n")
	trM := manifest(t, "go-transform", "transform", trBin, nil, "spec = \"call\"\n[limits]\nmemory_limit = \"2GiB\"\n")
	in, want, failed := transformInput(t, 100)
	out := filepath.Join(t.TempDir(), "out.txt")
	rt := connectortest.Start(t, map[string]string{
		"src.toml": sourceFile(srcM, in),
		"dst.toml": transformSink(snkM, trM, out),
	}, connectortest.WithRegistry(registry()))
	connectortest.Eventually(t, "every transformed line at the sink", func() bool {
		return len(lines(t, out)) >= len(want)
	})
	if got := lines(t, out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the sink wrote %d lines %q…, want %d %q…", len(got), got[:min(5, len(got))], len(want), want[:5])
	}
	var dead []string
	connectortest.Eventually(t, "the failed lines dead-lettered", func() bool {
		dead = nil
		for _, m := range rt.Messages(t, "s", "dlq") {
			dead = append(dead, string(m.Payload))
			if r, _ := wire.Lookup(m.Headers, runtime.HeaderDLQError); !strings.Contains(r.String(), "the plugin failed the message: not a JSON object") {
				t.Fatalf("dead letter %s: reason %q", m.Payload, r.String())
			}
		}
		return len(dead) >= len(failed)
	})
	if strings.Join(dead, "\n") != strings.Join(failed, "\n") {
		t.Fatalf("dead letters %q, want %q", dead, failed)
	}
	if i := info(rt, "sink", "dst"); i.Status != runtime.StatusRunning || i.Restarts != 0 {
		t.Fatalf("sink: status %s, %d restarts, last error %q", i.Status, i.Restarts, i.LastError)
	}
}

// TestTransformPluginKilledTenTimes kills the transform plugin's process
// ten times while batches flow: nothing is lost or dead-lettered for it,
// at most a batch per kill is written twice, and the sink keeps running.
func TestTransformPluginKilledTenTimes(t *testing.T) {
	srcBin, snkBin, trBin := build(t, "examples/plugins/go-source"), build(t, "examples/plugins/go-sink"), build(t, "examples/plugins/go-transform")
	srcM := manifest(t, "go-source", "source", srcBin, nil, "")
	snkM := manifest(t, "go-sink", "sink", snkBin, nil, "")
	trM := manifest(t, "go-transform", "transform", trBin, nil, "spec = \"call\"\n[limits]\nrestart_backoff = \"20ms\"\n")
	const n, batch, kills = 400, 10, 10
	in, want := writeInput(t, n) // {"n":i}: kept as they are
	out := filepath.Join(t.TempDir(), "out.txt")
	rt := connectortest.Start(t, map[string]string{
		"src.toml": sourceFile(srcM, in),
		"dst.toml": strings.Replace(transformSink(snkM, trM, out), "[plugin_config]\n", "[plugin_config]\ndelay = \"3ms\"\n", 1),
	}, connectortest.WithRegistry(registry()))
	connectortest.KillProcesses(t, kills, batch, want, func() []string { return lines(t, out) },
		func(int) []int { return processesOf(trBin) })
	for _, m := range rt.Messages(t, "s", "dlq") {
		var v any
		_ = json.Unmarshal(m.Payload, &v)
		t.Fatalf("a message was dead-lettered for the plugin's death: %s", m.Payload)
	}
	if i := info(rt, "sink", "dst"); i.Status != runtime.StatusRunning {
		t.Fatalf("sink: status %s, last error %q", i.Status, i.LastError)
	}
}
