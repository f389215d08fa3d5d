package connectortest

// Kill -9 tests of a connector in the real runtime: the runtime runs in a
// child process (the test binary itself, running the package's
// TestRuntimeChild) against a broker the test owns, so topics outlive
// every kill. A package that uses it defines
//
//	func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }
//
// and, in a test, writes its connector files with NewCrashEnv, feeds the
// external system (Feed), kills the runtime at random moments (KillLoop),
// and checks what arrived.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/runtime"
)

// crashChildEnv names the runtime directory of a child process.
const crashChildEnv = "FERRY_CRASH_CHILD_DIR"

// RuntimeChild is the body of a package's TestRuntimeChild: the runtime
// process the crash tests kill with SIGKILL. It does nothing unless
// started by CrashEnv.Start. It runs the real runtime with the built-in
// registry (the connectors the test binary links) against the parent's
// broker; FERRY_CRASH_DEBUG=1 logs at info.
func RuntimeChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("runs only as a crash test's child process")
	}
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), config.WithEnv(config.MapEnv(nil)))
	must(t, err)
	level := slog.LevelWarn
	if os.Getenv("FERRY_CRASH_DEBUG") != "" {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	rt, err := runtime.New(cfg, runtime.Options{Logger: log, ConfigOptions: []config.Option{config.WithEnv(config.MapEnv(nil))}})
	must(t, err)
	must(t, rt.Start(context.Background()))
	select {} // until killed
}

// CrashEnv is a runtime directory whose child processes connect to a
// broker the test owns.
type CrashEnv struct {
	t *testing.T
	// Dir holds config.toml, connectors/ and state/.
	Dir string
	// Client is logged in to the broker as root.
	Client *iggy.Client
	// Kills counts the SIGKILLs so far.
	Kills int
}

// NewCrashEnv starts a broker (configured by opts) and writes the
// runtime's configuration and the connector files (file name → TOML).
// Streams and topics the connectors name are created when missing.
func NewCrashEnv(t *testing.T, connectors map[string]string, opts ...brokertest.Option) *CrashEnv {
	t.Helper()
	b := brokertest.Start(t, opts...)
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	cfg := fmt.Sprintf("[iggy]\naddress = %q\nusername = \"iggy\"\npassword = \"iggy\"\ncreate_missing = true\n"+
		"[state]\npath = \"state\"\n[connectors]\nconfig_dir = \"connectors\"\n[http]\nenabled = false\n", b.Addr())
	must(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644))
	e := &CrashEnv{t: t, Dir: dir}
	for name, content := range connectors {
		e.WriteConnector(name, content)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	must(t, err)
	t.Cleanup(func() { c.Close() })
	e.Client = c
	return e
}

// WriteConnector writes (or replaces) a connector file.
func (e *CrashEnv) WriteConnector(name, content string) {
	e.t.Helper()
	must(e.t, os.WriteFile(filepath.Join(e.Dir, "connectors", name), []byte(content), 0o644))
}

// Start starts a runtime process.
func (e *CrashEnv) Start() *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRuntimeChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+e.Dir)
	cmd.Stderr = os.Stderr
	must(e.t, cmd.Start())
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// Kill SIGKILLs a runtime process and waits for it.
func (e *CrashEnv) Kill(cmd *exec.Cmd) {
	e.t.Helper()
	must(e.t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	e.Kills++
}

// KillLoop kills the runtime (cmd, or a new one) rounds times, then
// starts it for good and returns it. progress reports how much was
// delivered and how much there was to deliver; at least one kill must
// land mid-stream, or the test proves nothing. Odd rounds kill at a
// random moment 0.4 to 1.3 s after the start (during a start, too);
// even rounds wait until the new process has delivered something (up to
// 20 s: a loaded machine, a race-built child, a consumer group to join)
// and kill within 0.4 s of that, so kills land mid-stream however slowly
// the process starts.
func (e *CrashEnv) KillLoop(cmd *exec.Cmd, rounds int, progress func() (delivered, offered int)) *exec.Cmd {
	e.t.Helper()
	midStream := 0
	for round := 0; round < rounds; round++ {
		before, _ := progress()
		if cmd == nil {
			cmd = e.Start()
		}
		if round%2 == 0 {
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if d, offered := progress(); d > before || d >= offered {
					break
				}
			}
			time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		} else {
			time.Sleep(time.Duration(400+rand.IntN(900)) * time.Millisecond)
		}
		e.Kill(cmd)
		cmd = nil
		delivered, offered := progress()
		if delivered > 0 && delivered < offered {
			midStream++
		}
		e.t.Logf("round %d: killed the runtime with SIGKILL; %d of %d delivered; state %s", round, delivered, offered, e.State())
	}
	if midStream == 0 {
		e.t.Fatal("no kill landed mid-stream")
	}
	return e.Start()
}

// State is the runtime's saved source states, for failure messages: each
// file's name and contents, quoted when they are not printable text (a
// binary state, or the store's own framing), cut at 300 bytes.
func (e *CrashEnv) State() string {
	var out []string
	files, _ := filepath.Glob(filepath.Join(e.Dir, "state", "sources", "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if i := bytes.IndexByte(data, '{'); i >= 0 && utf8.Valid(data[i:]) {
			data = data[i:] // the JSON a state usually is, without the store's header
		}
		s := string(data[:min(len(data), 300)])
		if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != '\n' }) {
			s = strconv.Quote(s)
		}
		out = append(out, filepath.Base(f)+": "+s)
	}
	return strings.Join(out, "; ")
}

// Topic reads every message of stream/topic partition 0 (payloads
// copied, headers dropped); none when the topic does not exist yet.
func (e *CrashEnv) Topic(stream, topic string) []iggy.Message {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []iggy.Message
	for {
		r, err := e.Client.PollMessages(ctx, iggy.PollRequest{
			Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID(stream), Topic: iggy.NamedID(topic),
			Partition: iggy.Partition(0), Strategy: iggy.AtOffset(uint64(len(out))), Count: 1000,
		})
		if err != nil || len(r.Messages) == 0 {
			return out
		}
		for _, m := range r.Messages {
			m.Payload = append([]byte(nil), m.Payload...)
			m.Headers = nil
			out = append(out, m)
		}
	}
}

// Feed runs fn every interval until the returned stop is called; stop
// returns how many times fn ran. An error from fn fails the test and
// stops the feed.
func Feed(t *testing.T, interval time.Duration, fn func(i int) error) (stop func() int) {
	done := make(chan struct{})
	result := make(chan int, 1)
	go func() {
		n := 0
		defer func() { result <- n }()
		for {
			select {
			case <-done:
				return
			case <-time.After(interval):
			}
			if err := fn(n); err != nil {
				t.Errorf("feed: %v", err)
				return
			}
			n++
		}
	}()
	return func() int { close(done); return <-result }
}

// KillProcesses is a kill test of a connector's own process (a plugin)
// under a running runtime: rounds times, it waits until pidOf(round)
// names one process not killed before and the output has grown, and
// SIGKILLs it. Then it waits until the output holds every line of want,
// and fails if one is lost or more than batch lines per kill repeat.
// output returns the lines written so far; pidOf the candidate
// processes (the test kills only when there is exactly one).
func KillProcesses(t *testing.T, rounds, batch int, want []string, output func() []string, pidOf func(round int) []int) {
	t.Helper()
	seen := map[int]bool{}
	for k := 0; k < rounds; k++ {
		before := len(output())
		var pid int
		Eventually(t, "the plugin runs again and writes", func() bool {
			pids := pidOf(k)
			if len(pids) != 1 || seen[pids[0]] || len(output()) <= before {
				return false
			}
			pid = pids[0]
			return true
		})
		if len(output()) >= len(want) {
			t.Fatalf("the input ran out after %d kills; make it longer", k)
		}
		seen[pid] = true
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	Eventually(t, "every line reaches the output", func() bool {
		have := map[string]bool{}
		for _, l := range output() {
			have[l] = true
		}
		return len(have) == len(want)
	})
	got := output()
	counts := map[string]int{}
	for _, l := range got {
		counts[l]++
	}
	for _, w := range want {
		if counts[w] == 0 {
			t.Fatalf("%s was lost", w)
		}
	}
	if dups := len(got) - len(want); dups > rounds*batch {
		t.Fatalf("%d duplicates after %d kills; want at most a batch (%d) per kill", dups, rounds, batch)
	} else {
		t.Logf("%d kills: %d lines, %d written twice", rounds, len(got), dups)
	}
}
