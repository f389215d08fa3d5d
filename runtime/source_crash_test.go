package runtime

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

const dlqCrashChildEnv = "FERRY_RUNTIME_DLQ_CRASH_CHILD_DIR"

// dlqCrashTotal messages are sent, every poisonEvery-th of them not JSON.
const (
	dlqCrashTotal = 6000
	poisonEvery   = 97
)

// textSeq is slowSeq with its batches as text, into a json stream: the
// poison messages do not convert and are dead-lettered.
type textSeq struct{ slowSeq }

func (s *textSeq) Poll(ctx context.Context) (*connector.Batch, error) {
	b, err := s.slowSeq.Poll(ctx)
	if b != nil {
		b.Schema = connector.SchemaText
	}
	return b, err
}

// TestDeadLetterCrashChild is the runtime process
// TestKillNineWithDeadLettersLosesNothing kills; it does nothing unless
// started by it.
func TestDeadLetterCrashChild(t *testing.T) {
	dir := os.Getenv(dlqCrashChildEnv)
	if dir == "" {
		t.Skip("runs only as the dead-letter crash test's child process")
	}
	ledger := func(name string) *ledgerSink {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		require.NoError(t, err)
		return &ledgerSink{f: f}
	}
	sent, dead := ledger("sent.txt"), ledger("dead.txt")
	poison := map[uint64]bool{}
	for n := uint64(0); n < dlqCrashTotal; n += poisonEvery {
		poison[n] = true
	}
	reg := connector.NewRegistry()
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSource, Name: "seq",
		NewSource: func(connector.Config) (connector.Source, error) {
			return &textSeq{slowSeq{seqSource{max: dlqCrashTotal, batch: 40, poison: poison}}}, nil
		}}))
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSink, Name: "ledger",
		NewSink: func(c connector.Config) (connector.Sink, error) {
			if c.Key == "dead" {
				return dead, nil
			}
			return sent, nil
		}}))
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), config.WithEnv(config.MapEnv(nil)))
	require.NoError(t, err)
	rt, err := New(cfg, Options{Registry: reg, ConfigOptions: []config.Option{config.WithEnv(config.MapEnv(nil))}})
	require.NoError(t, err)
	require.NoError(t, rt.Start(context.Background()))
	select {} // until killed
}

// crashRig runs a runtime test binary's child test over a config
// directory and kills it with SIGKILL. (TestKillNineMidStreamLosesNothing
// could run on it too.)
type crashRig struct {
	t          *testing.T
	dir        string
	child, env string // the child test's name and the variable naming dir to it
}

// newCrashRig makes the directory with config.toml for an embedded
// broker and a connectors directory.
func newCrashRig(t *testing.T, child, env string) *crashRig {
	c := &crashRig{t: t, dir: t.TempDir(), child: child, env: env}
	require.NoError(t, os.MkdirAll(filepath.Join(c.dir, "connectors"), 0o755))
	c.write("config.toml", "[iggy]\naddress = \"embedded\"\nembedded_address = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n[connectors]\nconfig_dir = \"connectors\"\n[http]\nenabled = false\n")
	return c
}

func (c *crashRig) write(name, s string) {
	require.NoError(c.t, os.WriteFile(filepath.Join(c.dir, name), []byte(s), 0o644))
}

func (c *crashRig) start() *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^"+c.child+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), c.env+"="+c.dir)
	cmd.Stderr = os.Stderr
	require.NoError(c.t, cmd.Start())
	return cmd
}

func (c *crashRig) kill(cmd *exec.Cmd) {
	require.NoError(c.t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
}

// killRounds starts the child and kills it after 0.3 to 1 s, rounds
// times, calling after once each kill.
func (c *crashRig) killRounds(rounds int, after func(round int)) {
	for round := 0; round < rounds; round++ {
		cmd := c.start()
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		c.kill(cmd)
		after(round)
	}
}

// ledger counts the n of each line of a ledgerSink's file, read with
// format.
func (c *crashRig) ledger(name, format string) map[uint64]int {
	data, _ := os.ReadFile(filepath.Join(c.dir, name))
	counts := map[uint64]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var n uint64
		_, err := fmt.Sscanf(sc.Text(), format, &n)
		require.NoError(c.t, err, "%s line %q", name, sc.Text())
		counts[n]++
	}
	return counts
}

// A kill -9 at any point, also between a batch's dead letters and its
// state, loses nothing: every message ends up in the topic or, if it is
// poison, in the dead-letter topic.
func TestKillNineWithDeadLettersLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	c := newCrashRig(t, "TestDeadLetterCrashChild", dlqCrashChildEnv)
	c.write("connectors/seq.toml", "type = \"source\"\nkey = \"seq\"\npath = \"seq\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\nbatch_length = 40\n")
	c.write("connectors/sent.toml", "type = \"sink\"\nkey = \"sent\"\npath = \"ledger\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nbatch_length = 25\n")
	c.write("connectors/dead.toml", "type = \"sink\"\nkey = \"dead\"\npath = \"ledger\"\n[[streams]]\nstream = \"s\"\ntopics = [\"seq_dead_letter\"]\nschema = \"text\"\n")
	const good, bad = `{"n":%d}`, "not json %d"
	c.killRounds(5, func(round int) {
		t.Logf("round %d: killed with %d messages sent and %d dead-lettered", round, len(c.ledger("sent.txt", good)), len(c.ledger("dead.txt", bad)))
	})
	cmd := c.start()
	defer c.kill(cmd)
	eventually(t, "every message in the topic or the dead-letter topic", func() bool {
		return len(c.ledger("sent.txt", good))+len(c.ledger("dead.txt", bad)) == dlqCrashTotal
	})
	sent, dead := c.ledger("sent.txt", good), c.ledger("dead.txt", bad)
	require.Len(t, dead, (dlqCrashTotal+poisonEvery-1)/poisonEvery)
	for n := uint64(0); n < dlqCrashTotal; n++ {
		if n%poisonEvery == 0 {
			require.NotZero(t, dead[n], "poison message %d was lost", n)
		} else {
			require.NotZero(t, sent[n], "message %d was lost", n)
		}
	}
}
