package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
)

const scaleOutChildEnv = "FERRY_RUNTIME_SCALEOUT_CHILD_DIR"

// pidSource is pacedSource with the producing process's id in each
// message, so the topic tells which runtime ran the source when.
type pidSource struct{ pacedSource }

func (s *pidSource) Poll(ctx context.Context) (*connector.Batch, error) {
	b, err := s.pacedSource.Poll(ctx)
	if err != nil {
		return nil, err
	}
	for i := range b.Messages {
		n := s.next - uint64(len(b.Messages)) + uint64(i)
		b.Messages[i].Payload = fmt.Appendf(nil, `{"n":%d,"pid":%d}`, n, os.Getpid())
	}
	return b, nil
}

// TestScaleOutChild is a runtime process of the scale-out kill test; it
// does nothing unless started by it.
func TestScaleOutChild(t *testing.T) {
	dir := os.Getenv(scaleOutChildEnv)
	if dir == "" {
		t.Skip("runs only as the scale-out kill test's child process")
	}
	reg := connector.NewRegistry()
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSource, Name: "pids",
		NewSource: func(connector.Config) (connector.Source, error) { return &pidSource{}, nil }}))
	noEnv := config.WithEnv(config.MapEnv(nil))
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), noEnv)
	require.NoError(t, err)
	rt, err := New(cfg, Options{Registry: reg, ConfigOptions: []config.Option{noEnv}})
	require.NoError(t, err)
	require.NoError(t, rt.Start(context.Background()))
	select {} // until killed
}

// Three runtime processes of one configuration on one broker; the one
// running the source is killed with SIGKILL again and again (and started
// again): another takes the source over each time, from the state in
// Iggy, so the topic holds every n (repeats only of what was in flight at
// a kill), and the source never ran in two processes at once: once a
// process's messages are followed by another's, it never appears again.
func TestScaleOutKillTheHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	const kills = 10
	b := brokertest.Start(t)
	dir := t.TempDir()
	writeScaleOutConfig(t, dir, b.Addr(), "100ms", "500ms", "1s", "pids")

	procs := map[int]*exec.Cmd{}
	start := func() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestScaleOutChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), scaleOutChildEnv+"="+dir)
		cmd.Dir = t.TempDir() // each its own [state] path
		require.NoError(t, cmd.Start())
		procs[cmd.Process.Pid] = cmd
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	for range 3 {
		start()
	}

	cl, err := iggy.Dial(context.Background(), b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	type msg struct{ N, Pid int }
	read := func() []msg {
		var out []msg
		for {
			r, err := cl.PollMessages(context.Background(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
				Stream: iggy.NamedID("s"), Topic: iggy.NamedID("t"), Partition: iggy.Partition(0),
				Strategy: iggy.AtOffset(uint64(len(out))), Count: 1000})
			if err != nil || len(r.Messages) == 0 {
				return out
			}
			for _, m := range r.Messages {
				var v msg
				require.NoError(t, json.Unmarshal(m.Payload, &v))
				out = append(out, v)
			}
		}
	}
	holder := func() int {
		got := read()
		if len(got) == 0 {
			return 0
		}
		return got[len(got)-1].Pid
	}
	var failovers []time.Duration
	for k := range kills {
		var pid int
		eventually(t, "a runtime runs the source", func() bool { pid = holder(); return procs[pid] != nil })
		before := len(read())
		eventually(t, "it delivers", func() bool { return len(read()) > before+20 })
		require.NoError(t, procs[pid].Process.Signal(syscall.SIGKILL))
		_ = procs[pid].Wait()
		killed := time.Now()
		delete(procs, pid)
		eventually(t, "another runtime took the source over", func() bool { h := holder(); return h != pid && procs[h] != nil })
		failovers = append(failovers, time.Since(killed))
		t.Logf("kill %d: pid %d killed; taken over %s later", k+1, pid, failovers[k].Round(time.Millisecond))
		start()
	}

	got := read()
	seen := map[int]int{}
	done := map[int]bool{} // processes whose run ended: another's messages came after
	last, repeats := -1, 0
	for i, m := range got {
		require.False(t, done[m.Pid], "message %d (n %d) from pid %d after another process ran the source", i, m.N, m.Pid)
		if last >= 0 && got[i-1].Pid != m.Pid {
			done[got[i-1].Pid] = true
		}
		seen[m.N]++
		if seen[m.N] > 1 {
			repeats++
		}
		last = m.N
	}
	for n := 0; n <= last; n++ {
		require.NotZero(t, seen[n], "n %d lost", n)
	}
	t.Logf("%d messages, %d repeated (in flight at a kill), %d kills, failovers %v", len(got), repeats, kills, failovers)
}
