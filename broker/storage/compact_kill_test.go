package storage

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	killDirEnv = "FERRY_COMPACT_KILL_DIR"
	killAtEnv  = "FERRY_COMPACT_KILL_AT"
	killSeg    = 16 << 10
)

// farFuture makes every deletion marker expired.
var farFuture = time.UnixMicro(int64(tsFor(1 << 40)))

// TestCompactKillChild is the child of TestCompactKill9: it compacts the
// log in $FERRY_COMPACT_KILL_DIR, sending itself SIGKILL at the
// $FERRY_COMPACT_KILL_AT-th crash point when that is set.
func TestCompactKillChild(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("the child of TestCompactKill9")
	}
	at, err := strconv.Atoi(os.Getenv(killAtEnv))
	require.NoError(t, err)
	n := 0
	crashHook = func(string) {
		if n == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		n++
		if at < 0 {
			// The parent kills at a random moment: widen the pass so the
			// kill lands inside it.
			time.Sleep(2 * time.Millisecond)
		}
	}
	l, err := OpenFile(dir, Options{SegmentSize: killSeg})
	require.NoError(t, err)
	fmt.Println("compacting")
	_, err = l.Compact(context.Background(), CompactOptions{Now: farFuture})
	require.NoError(t, err)
	require.NoError(t, l.Close())
}

// TestCompactKill9 kills a compacting process ten times, at crash points
// the child picks (between staging and the switch, between the two
// renames, after the directory sync) or after a random delay, and checks
// after each kill that the log opens and holds, for every key, its latest
// value, or nothing when that is a deletion marker compacted away: no
// latest value lost, no deleted key resurrected, no keyless message lost.
func TestCompactKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test")
	}
	dir := t.TempDir()
	all := workload(30_000+10*3000, 300, 11)
	ms := all[:30_000]
	l := openCompactLog(t, "file", dir, killSeg)
	appendWorkload(t, l, ms, testBatch)
	require.NoError(t, l.Close())
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	killed := 0
	for i := range 10 {
		// New values for old keys, so every child has segments to rewrite.
		l := openCompactLog(t, "file", dir, killSeg)
		appendWorkload(t, l, all[len(ms):len(ms)+3000], testBatch)
		ms = all[:len(ms)+3000]
		sealed := len(l.Segments()) - 1
		require.NoError(t, l.Close())
		cmd := exec.Command(os.Args[0], "-test.run=^TestCompactKillChild$", "-test.count=1")
		at := -1
		if i%2 == 0 {
			at = r.IntN(sealed)
		}
		cmd.Env = append(os.Environ(), killDirEnv+"="+dir, killAtEnv+"="+strconv.Itoa(at))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		for sc.Scan() && sc.Text() != "compacting" {
		}
		if at < 0 {
			time.Sleep(time.Duration(r.IntN(60)) * time.Millisecond)
			_ = cmd.Process.Kill() // SIGKILL
		}
		_, _ = io.Copy(io.Discard, out)
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signaled() {
			killed++
		} else {
			require.NoError(t, err, "the child compacts or is killed")
		}
		l = openCompactLog(t, "file", dir, killSeg)
		checkNoLossNoResurrection(t, ms, readAllOffsets(t, l), activeBase(l))
		require.NoError(t, l.Close())
	}
	t.Logf("%d of 10 children killed during compaction", killed)
	require.Equal(t, 10, killed, "every child was killed during its compaction")
	l = openCompactLog(t, "file", dir, killSeg)
	defer func() { require.NoError(t, l.Close()) }()
	_, err := l.Compact(context.Background(), CompactOptions{Now: farFuture})
	require.NoError(t, err)
	require.Equal(t, survivors(ms, 0, activeBase(l), true), readAllOffsets(t, l), "a finished compaction after the kills")
}

// checkNoLossNoResurrection checks a log part way through compaction.
func checkNoLossNoResurrection(t *testing.T, ms []keyedMsg, got []uint64, active uint64) {
	t.Helper()
	last := map[string]uint64{}
	for i, m := range ms {
		if m.key != "" {
			last[m.key] = uint64(i)
		}
	}
	present := map[uint64]bool{}
	lastPresent := map[string]uint64{}
	for _, off := range got {
		require.Less(t, off, uint64(len(ms)))
		present[off] = true
		if k := ms[off].key; k != "" {
			lastPresent[k] = off
		}
	}
	for i, m := range ms {
		if m.key == "" || uint64(i) >= active {
			require.True(t, present[uint64(i)], "message %d (keyless or active) kept", i)
		}
	}
	for k, off := range last {
		lp, ok := lastPresent[k]
		switch {
		case ms[off].deleted:
			require.True(t, !ok || lp == off, "key %s: deleted at %d, but %d is its latest present (resurrected)", k, off, lp)
		default:
			require.True(t, ok && lp == off, "key %s: latest %d lost (latest present %d, %v)", k, off, lp, ok)
		}
	}
}
