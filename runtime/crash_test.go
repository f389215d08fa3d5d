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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

const crashChildEnv = "FERRY_RUNTIME_CRASH_CHILD_DIR"

// ledgerSink appends each message's payload to a file and fsyncs before
// Consume returns: what it acknowledged is on disk.
type ledgerSink struct {
	mu sync.Mutex
	f  *os.File
}

func (l *ledgerSink) Open(context.Context) error { return nil }
func (l *ledgerSink) Close(context.Context) error {
	return nil
}

func (l *ledgerSink) Consume(_ context.Context, b *connector.SinkBatch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := bufio.NewWriter(l.f)
	for _, m := range b.Messages {
		w.Write(m.Payload)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return l.f.Sync()
}

const crashTotal = 9000

// TestCrashChild is the runtime process the crash test kills; it does
// nothing unless started by TestKillNineMidStreamLosesNothing.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("runs only as the crash test's child process")
	}
	f, err := os.OpenFile(filepath.Join(dir, "ledger.txt"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	reg := connector.NewRegistry()
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSource, Name: "seq",
		NewSource: func(connector.Config) (connector.Source, error) {
			return &slowSeq{seqSource: seqSource{max: crashTotal, batch: 40}}, nil
		}}))
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSink, Name: "ledger",
		NewSink: func(connector.Config) (connector.Sink, error) { return &ledgerSink{f: f}, nil }}))
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), config.WithEnv(config.MapEnv(nil)))
	require.NoError(t, err)
	rt, err := New(cfg, Options{Registry: reg, ConfigOptions: []config.Option{config.WithEnv(config.MapEnv(nil))}})
	require.NoError(t, err)
	require.NoError(t, rt.Start(context.Background()))
	fmt.Println("child running")
	select {} // until killed
}

// slowSeq paces the sequence so the parent can kill it mid-stream.
type slowSeq struct{ seqSource }

func (s *slowSeq) Poll(ctx context.Context) (*connector.Batch, error) {
	time.Sleep(15 * time.Millisecond)
	return s.seqSource.Poll(ctx)
}

func TestKillNineMidStreamLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	write := func(name, s string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644))
	}
	write("config.toml", "[iggy]\naddress = \"embedded\"\nembedded_address = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n[connectors]\nconfig_dir = \"connectors\"\n[http]\nenabled = false\n")
	write("connectors/seq.toml", "type = \"source\"\nkey = \"seq\"\npath = \"seq\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\nbatch_length = 40\n")
	write("connectors/ledger.toml", "type = \"sink\"\nkey = \"ledger\"\npath = \"ledger\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nbatch_length = 25\n")

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		return cmd
	}
	kill := func(cmd *exec.Cmd) {
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
	}
	seen := func() (map[uint64]int, int) {
		data, err := os.ReadFile(filepath.Join(dir, "ledger.txt"))
		if err != nil {
			return nil, 0
		}
		counts := map[uint64]int{}
		lines := 0
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			var n uint64
			_, err := fmt.Sscanf(sc.Text(), `{"n":%d}`, &n)
			require.NoError(t, err, "ledger line %q", sc.Text())
			counts[n]++
			lines++
		}
		return counts, lines
	}

	for round := 0; round < 5; round++ {
		cmd := start()
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond)
		kill(cmd)
		counts, _ := seen()
		t.Logf("round %d: killed with %d distinct messages at the sink", round, len(counts))
	}
	cmd := start()
	defer kill(cmd)
	eventually(t, "every message at the sink", func() bool {
		counts, _ := seen()
		return len(counts) == crashTotal
	})
	counts, lines := seen()
	for n := uint64(0); n < crashTotal; n++ {
		require.NotZero(t, counts[n], "message %d was lost", n)
	}
	t.Logf("%d messages delivered, %d deliveries (%d duplicates from replays after kills)", crashTotal, lines, lines-crashTotal)
}
