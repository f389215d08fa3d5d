package host_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/runtime"
)

// needShell skips a test of the shell examples where bash or jq is
// missing.
func needShell(t *testing.T) {
	t.Helper()
	for _, c := range []string{"bash", "jq"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s is not installed", c)
		}
	}
}

// example copies examples/plugins/NAME into a new directory (so that its
// script's path names this test's processes) and returns its manifest.
func example(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "examples", "plugins", name)
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := e.Info()
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "ferry-plugin.toml")
}

// leaderOf is the pid of the running process group leader whose command
// line names script (a plugin process: it leads its own group), or 0.
func leaderOf(script string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !slices.Contains(strings.Split(string(cl), "\x00"), script) {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == e.Name() {
			return pid
		}
	}
	return 0
}

func shellSourceFile(manifest, in string) string {
	return fmt.Sprintf("type = \"source\"\nkey = \"src\"\npath = %q\n[plugin_config]\npath = %q\nbatch_size = 10\nschema = \"json\"\n"+
		"[[streams]]\nstream = \"s\"\ntopic = \"t\"\nbatch_length = 10\nlinger_time = \"0\"\n", manifest, in)
}

// TestLinePipeline runs the shell examples, a source and a sink on the
// line protocol, in a real pipeline on the embedded broker.
func TestLinePipeline(t *testing.T) {
	needShell(t)
	t.Parallel()
	in, want := writeInput(t, 60)
	out := filepath.Join(t.TempDir(), "out.txt")
	rt := connectortest.Start(t, map[string]string{
		"src.toml": shellSourceFile(example(t, "shell-source"), in),
		"dst.toml": sinkFile(example(t, "shell-sink"), out, ""),
	}, connectortest.WithRegistry(registry()))
	connectortest.Eventually(t, "every line reaches the shell sink's file", func() bool { return len(lines(t, out)) >= len(want) })
	if got := lines(t, out); !slices.Equal(got, want) {
		t.Fatalf("the sink wrote %d lines %q…, want %d", len(got), got[:min(5, len(got))], len(want))
	}
	for _, k := range [][2]string{{"source", "src"}, {"sink", "dst"}} {
		if i := info(rt, k[0], k[1]); i.Status != runtime.StatusRunning || i.Restarts != 0 {
			t.Fatalf("%s %s: status %s, %d restarts, last error %q", k[0], k[1], i.Status, i.Restarts, i.LastError)
		}
	}
}

// TestLinePluginsKilled kills the shell sink's process (bash) with
// SIGKILL six times while it writes batches, then the shell source's
// twice (the runtime restarts a source with a backoff of its own):
// nothing is lost, at most a batch per kill is written twice, and the
// runtime stays up.
func TestLinePluginsKilled(t *testing.T) {
	needShell(t)
	t.Parallel()
	const n, batch, sinkKills, sourceKills = 400, 10, 6, 2
	const kills = sinkKills + sourceKills
	in, want := writeInput(t, n)
	out := filepath.Join(t.TempDir(), "out.txt")
	srcM, snkM := example(t, "shell-source"), example(t, "shell-sink")
	srcScript, snkScript := filepath.Join(filepath.Dir(srcM), "source.sh"), filepath.Join(filepath.Dir(snkM), "sink.sh")
	rt := connectortest.Start(t, map[string]string{
		"src.toml": shellSourceFile(srcM, in),
		"dst.toml": sinkFile(snkM, out, ""),
	}, connectortest.WithRegistry(registry()))
	connectortest.KillProcesses(t, kills, batch, want, func() []string { return lines(t, out) }, func(k int) []int {
		script := snkScript
		if k >= sinkKills {
			script = srcScript
		}
		if pid := leaderOf(script); pid != 0 {
			return []int{pid}
		}
		return nil
	})
	// The last kill may have just hit the source: the runtime restarts it
	// with backoff, so both run again.
	for _, k := range [][2]string{{"source", "src"}, {"sink", "dst"}} {
		connectortest.Eventually(t, k[0]+" running again", func() bool {
			return info(rt, k[0], k[1]).Status == runtime.StatusRunning
		})
	}
}

// script writes a plugin on the line protocol (bash) and its manifest.
func script(t *testing.T, kind, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.sh"), []byte("#!/usr/bin/env bash\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	m := fmt.Sprintf("name = \"p\"\nkind = %q\ncommand = \"./p.sh\"\ntransport = \"lines\"\n"+
		"[limits]\ncall_timeout = \"5s\"\nrestart_backoff = \"10ms\"\nmax_line = \"4KiB\"\n"+
		"[[settings]]\nname = \"path\"\ntype = \"string\"\n", kind)
	p := filepath.Join(dir, "ferry-plugin.toml")
	if err := os.WriteFile(p, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func openSink(t *testing.T, manifest string, values map[string]any) connector.Sink {
	t.Helper()
	info, _, err := registry().Resolve(connector.KindSink, manifest, "")
	if err != nil {
		t.Fatal(err)
	}
	snk, err := info.NewSink(sinkConfig(t, values))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if err := snk.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snk.Close(context.Background()) })
	return snk
}

// TestLineSinkAnswers: a sink on the line protocol gets what it was sent
// and its answers (ok, failures per message, a whole-batch error) map to
// the connector.Sink contract.
func TestLineSinkAnswers(t *testing.T) {
	needShell(t)
	t.Parallel()
	got := filepath.Join(t.TempDir(), "got.ndjson")
	m := script(t, "sink", `read -r open; echo "$open" >>`+strconv.Quote(got)+`
while read -r b; do
  echo "$b" >>`+strconv.Quote(got)+`
  seq=$(jq .seq <<<"$b")
  case $seq in
    1) echo '{"type":"result","seq":1,"ok":true}';;
    2) echo '{"type":"result","seq":2,"failed":[{"index":1,"kind":"permanent","reason":"no"},{"index":0,"kind":"unavailable","reason":"down"}]}';;
    3) echo '{"type":"result","seq":3,"error":"it broke"}';;
  esac
done`)
	snk := openSink(t, m, map[string]any{"path": "x"})
	ctx := context.Background()
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	b := &connector.SinkBatch{Stream: "s", Topic: "t", Partition: 2, Schema: connector.SchemaJSON, Messages: []connector.Message{
		{ID: id, Payload: []byte(`{"a": 1}`), Offset: 7, Timestamp: time.UnixMicro(1_700_000_000_000_001),
			Headers: []connector.Header{connector.StringHeader("h", "v")}},
		{Payload: []byte(`not json`), Offset: 8}}}
	if err := snk.Consume(ctx, b); err != nil {
		t.Fatalf("Consume 1: %v", err)
	}
	err := snk.Consume(ctx, b)
	var per connector.MessageErrors
	if !errors.As(err, &per) || len(per) != 2 || !connector.IsPermanent(per[1]) || !connector.IsUnavailable(per[0]) {
		t.Fatalf("Consume 2: %v", err)
	}
	if err := snk.Consume(ctx, b); err == nil || connector.IsUnavailable(err) || !strings.Contains(err.Error(), "it broke") {
		t.Fatalf("Consume 3: %v", err)
	}
	want := []string{
		`{"type":"open","protocol":1,"kind":"sink","key":"k","name":"test","config":{"path":"x"}}`,
		`{"type":"batch","seq":1,"stream":"s","topic":"t","partition":2,"schema":"json","messages":[` +
			`{"id":"01020304-0506-0708-090a-0b0c0d0e0f10","payload":{"a":1},"headers":{"h":"v"},"offset":7,"timestamp":1700000000000001},` +
			`{"payload_base64":"bm90IGpzb24=","offset":8}]}`,
	}
	if l := lines(t, got); !slices.Equal(l[:2], want) {
		t.Fatalf("the plugin read\n%s\nwant\n%s", strings.Join(l[:2], "\n"), strings.Join(want, "\n"))
	}
}

// TestLineSinkGarbageIsReplayed: a line on standard output that is not
// protocol JSON, or one longer than max_line, kills the process; the
// call fails as unavailable (nothing dead-lettered, nothing committed)
// and the batch delivered again to a new process is written.
func TestLineSinkGarbageIsReplayed(t *testing.T) {
	needShell(t)
	t.Parallel()
	for _, c := range []struct{ name, bad, reason string }{
		{"not JSON", `echo "Processing batch $seq..."`, `answered what the protocol does not allow: batch 1: not a JSON object: "Processing batch 1..."`},
		{"no type", `echo '{"seq":1,"ok":true}'`, `a line without a "type"`},
		{"too long", `head -c 10000 /dev/zero | tr '\0' x; echo`, "a line longer than limits.max_line (4096 bytes)"},
		{"wrong seq", `echo '{"type":"result","seq":9,"ok":true}'`, "a result of batch 9, which was not sent"},
		{"a failure outside the batch", `echo '{"type":"result","seq":1,"failed":[{"index":5,"kind":"retry"}]}'`, "a failure of message 5 of a batch of 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out, marker := filepath.Join(dir, "out.txt"), filepath.Join(dir, "marker")
			m := script(t, "sink", `read -r open
while read -r b; do
  seq=$(jq .seq <<<"$b")
  if [[ ! -e `+marker+` ]]; then touch `+marker+`; `+c.bad+`; continue; fi
  jq -r '.messages[].payload_text' <<<"$b" >>`+out+`
  echo "{\"type\":\"result\",\"seq\":$seq,\"ok\":true}"
done`)
			snk := openSink(t, m, map[string]any{})
			ctx := context.Background()
			b := &connector.SinkBatch{Schema: connector.SchemaText, Messages: []connector.Message{{Payload: []byte("one")}}}
			err := snk.Consume(ctx, b)
			if !connector.IsUnavailable(err) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("Consume with a bad answer: %v\nwant unavailable, with %q", err, c.reason)
			}
			if err := snk.Consume(ctx, b); err != nil {
				t.Fatalf("the batch again, to a new process: %v", err)
			}
			if got := lines(t, out); !slices.Equal(got, []string{"one"}) {
				t.Fatalf("the file holds %q", got)
			}
		})
	}
}

// TestLineSinkHangsAndExits: a sink that does not answer within
// call_timeout, and one that exits in a batch, are killed with the reason
// and the batch is kept for the retry.
func TestLineSinkHangsAndExits(t *testing.T) {
	needShell(t)
	t.Parallel()
	for _, c := range []struct{ name, body, reason string }{
		{"hang", "read -r open; read -r b; sleep 3600", "was not answered within call_timeout (5s): the plugin hangs"},
		{"exit", "read -r open; read -r b; echo 'out of cheese' >&2; exit 4", "its process exited (exit status 4) during Consume; its last words on standard error: out of cheese"},
		// It may be gone before its open line is written: then Open fails.
		{"no interpreter", "exec /nonexistent/interpreter", "its process exited (exit status 127) during"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			info, _, err := registry().Resolve(connector.KindSink, script(t, "sink", c.body), "")
			if err != nil {
				t.Fatal(err)
			}
			snk, err := info.NewSink(sinkConfig(t, map[string]any{}))
			if err != nil {
				t.Fatal(err)
			}
			defer snk.Close(context.Background())
			// No Open: Consume starts the process and opens it, as the
			// runtime's retry does.
			err = snk.Consume(context.Background(), &connector.SinkBatch{Messages: []connector.Message{{Payload: []byte("{}")}}})
			if !connector.IsUnavailable(err) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("Consume: %v\nwant unavailable, with %q", err, c.reason)
			}
		})
	}
}

// TestLineSource: the open line carries the saved state, batch lines
// become batches (their states as JSON), acks are written back, garbage
// fails the Poll as unavailable, and an exit with status 0 ends the input.
func TestLineSource(t *testing.T) {
	needShell(t)
	t.Parallel()
	got := filepath.Join(t.TempDir(), "got.ndjson")
	m := script(t, "source", `read -r open; echo "$open" >>`+strconv.Quote(got)+`
echo '{"type":"batch","schema":"text","state":{"pos":2},"messages":[{"payload_text":"a","headers":{"n":3,"ok":true}},{"payload":{"b":1}}]}'
read -r ack; echo "$ack" >>`+strconv.Quote(got)+`
echo '{"type":"batch","seq":77,"messages":[{"payload_base64":"eHl6"}]}'
read -r ack; echo "$ack" >>`+strconv.Quote(got)+`
[[ $(jq .state.pos <<<"$open") == 2 ]] && echo 'garbage'
exit 0`)
	info, _, err := registry().Resolve(connector.KindSource, m, "")
	if err != nil {
		t.Fatal(err)
	}
	run := func(state []byte) (connector.Source, []*connector.Batch, error) {
		src, err := info.NewSource(sinkConfig(t, map[string]any{}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := src.Open(ctx, state); err != nil {
			t.Fatal(err)
		}
		defer src.Close(ctx)
		var bs []*connector.Batch
		for {
			b, err := src.Poll(ctx)
			if err != nil {
				return src, bs, err
			}
			bs = append(bs, b)
			if err := src.(connector.Acker).Ack(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, bs, err := run(nil)
	if !errors.Is(err, connector.ErrEndOfInput) || len(bs) != 2 {
		t.Fatalf("first run: %d batches, then %v", len(bs), err)
	}
	if string(bs[0].State) != `{"pos":2}` || bs[0].Schema != connector.SchemaText || string(bs[0].Messages[1].Payload) != `{"b":1}` ||
		bs[1].State != nil || string(bs[1].Messages[0].Payload) != "xyz" || bs[1].Schema != connector.SchemaJSON {
		t.Fatalf("batches %+v %+v", bs[0], bs[1])
	}
	if v, _ := bs[0].Messages[0].Header("ok"); !v.Bool() {
		t.Fatalf("headers %+v", bs[0].Messages[0].Headers)
	}
	_, _, err = run(bs[0].State)
	if !connector.IsUnavailable(err) || !strings.Contains(err.Error(), `not a JSON object: "garbage"`) {
		t.Fatalf("a run that ends in garbage: %v", err)
	}
	want := []string{`{"type":"open","protocol":1,"kind":"source","key":"k","name":"test","config":{}}`,
		`{"type":"ack","seq":1}`, `{"type":"ack","seq":77}`,
		`{"type":"open","protocol":1,"kind":"source","key":"k","name":"test","config":{},"state":{"pos":2}}`}
	if l := lines(t, got); !slices.Equal(l[:4], want) {
		t.Fatalf("the plugin read\n%s\nwant\n%s", strings.Join(l, "\n"), strings.Join(want, "\n"))
	}
}

// TestLineSourceThatNeverReads: a source that writes batches and never
// reads its standard input (not even the acks) fills the pipe; the Ack
// that cannot be written ends it, with a reason that says so, instead of
// hanging the runtime.
func TestLineSourceThatNeverReads(t *testing.T) {
	needShell(t)
	t.Parallel()
	m := script(t, "source", `while :; do echo '{"type":"batch","messages":[{"payload_text":"x"}]}'; done`)
	m2 := strings.Replace(readFile(t, m), `call_timeout = "5s"`, `call_timeout = "1s"`, 1)
	if err := os.WriteFile(m, []byte(m2), 0o644); err != nil {
		t.Fatal(err)
	}
	info, _, err := registry().Resolve(connector.KindSource, m, "")
	if err != nil {
		t.Fatal(err)
	}
	src, err := info.NewSource(sinkConfig(t, map[string]any{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := src.Open(ctx, nil); err != nil {
		t.Fatal(err)
	}
	defer src.Close(ctx)
	for acks := 0; ; acks++ {
		b, err := src.Poll(ctx)
		if err == nil {
			err = src.(connector.Acker).Ack(ctx, b)
		}
		if err != nil {
			if !connector.IsUnavailable(err) || !strings.Contains(err.Error(), "it does not read its standard input") {
				t.Fatalf("after %d acks: %v\nwant unavailable, saying the plugin does not read", acks, err)
			}
			t.Logf("after %d acks: %v", acks, err)
			return
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
