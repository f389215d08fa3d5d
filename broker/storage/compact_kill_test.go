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
	"strings"
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
// $FERRY_COMPACT_KILL_AT-th crash point when that is set. It prints
// "compacting" before the pass, "point NAME" at each crash point and
// "compacted" once the pass returned, so the parent knows whether a kill
// landed inside the pass.
func TestCompactKillChild(t *testing.T) {
	dir := os.Getenv(killDirEnv)
	if dir == "" {
		t.Skip("the child of TestCompactKill9")
	}
	at, err := strconv.Atoi(os.Getenv(killAtEnv))
	require.NoError(t, err)
	n := 0
	crashHook = func(point string) {
		if n == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		n++
		fmt.Println("point", point)
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
	fmt.Println("compacted")
	require.NoError(t, l.Close())
}

const (
	// killsPerMode is how many kills inside a compaction TestCompactKill9
	// needs at crash points and at random moments each.
	killsPerMode = 5
	// maxKillRounds bounds its rounds: a random-moment kill can come after
	// the child finished its pass, and such a round does not count.
	maxKillRounds = 40
)

// TestCompactKill9 kills a compacting process until it was killed inside
// a compaction ten times: five times at crash points the child picks
// (between staging and the switch, between the two renames, after the
// directory sync) and five times after a random delay. A kill counts only
// when the child had not reported the end of its pass, so a child that
// finished first is not mistaken for one killed mid-compaction, and the
// test fails if ten such kills do not happen in maxKillRounds rounds.
// After each round it checks the log opens and holds, for every key, its
// latest value, or nothing when that is a deletion marker compacted away:
// no latest value lost, no deleted key resurrected, no keyless message
// lost.
func TestCompactKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test")
	}
	const perRound = 3000
	dir := t.TempDir()
	all := workload(30_000+maxKillRounds*perRound, 300, 11)
	ms := all[:30_000]
	l := openCompactLog(t, "file", dir, killSeg)
	appendWorkload(t, l, ms, testBatch)
	require.NoError(t, l.Close())
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	var atPoint, atRandom, finished int
	maxDelay := 60 // ms; shrinks when a child finishes before its kill
	for round := 0; round < maxKillRounds && (atPoint < killsPerMode || atRandom < killsPerMode); round++ {
		// New values for old keys, so every child has segments to rewrite.
		l := openCompactLog(t, "file", dir, killSeg)
		appendWorkload(t, l, all[len(ms):len(ms)+perRound], testBatch)
		ms = all[:len(ms)+perRound]
		rewrite := rewritable(ms, readAllOffsets(t, l), l.Segments())
		require.NoError(t, l.Close())
		require.NotZero(t, rewrite, "round %d: segments to rewrite", round)
		cmd := exec.Command(os.Args[0], "-test.run=^TestCompactKillChild$", "-test.count=1")
		at := -1
		if atRandom >= killsPerMode || (atPoint < killsPerMode && round%2 == 0) {
			// Three crash points per rewritten segment: staged,
			// log-renamed, committed.
			at = r.IntN(3 * rewrite)
		}
		cmd.Env = append(os.Environ(), killDirEnv+"="+dir, killAtEnv+"="+strconv.Itoa(at))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		started := false
		for !started && sc.Scan() {
			started = sc.Text() == "compacting"
		}
		require.True(t, started, "the child reports its pass started")
		delay := -1
		if at < 0 {
			delay = r.IntN(maxDelay)
			time.Sleep(time.Duration(delay) * time.Millisecond)
			_ = cmd.Process.Kill() // SIGKILL
		}
		points, done := 0, false
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "compacted":
				done = true
			case strings.HasPrefix(line, "point "):
				points++
			}
		}
		_, _ = io.Copy(io.Discard, out)
		err = cmd.Wait()
		signaled := false
		if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signaled() {
			signaled = true
		} else {
			require.NoError(t, err, "the child compacts or is killed")
		}
		switch {
		case signaled && !done && at >= 0:
			atPoint++
		case signaled && !done:
			atRandom++
		default:
			// Finished before the kill (or killed after its pass): the
			// log must still be right, but the round proves nothing about
			// a kill inside a compaction.
			finished++
			if at < 0 {
				maxDelay = max(1, maxDelay*3/4)
			}
		}
		t.Logf("round %d: crash point %d, delay %d ms, %d crash points passed, signaled %v, pass finished %v", round, at, delay, points, signaled, done)
		l = openCompactLog(t, "file", dir, killSeg)
		checkNoLossNoResurrection(t, ms, readAllOffsets(t, l), activeBase(l))
		require.NoError(t, l.Close())
	}
	t.Logf("killed inside a compaction %d times at a crash point and %d at a random moment; %d rounds finished first", atPoint, atRandom, finished)
	require.Equal(t, killsPerMode, atPoint, "kills at a crash point inside a compaction")
	require.Equal(t, killsPerMode, atRandom, "kills at a random moment inside a compaction (in %d rounds)", maxKillRounds)
	l = openCompactLog(t, "file", dir, killSeg)
	defer func() { require.NoError(t, l.Close()) }()
	_, err := l.Compact(context.Background(), CompactOptions{Now: farFuture})
	require.NoError(t, err)
	require.Equal(t, survivors(ms, 0, activeBase(l), true), readAllOffsets(t, l), "a finished compaction after the kills")
}

// rewritable counts the sealed segments a complete compaction (every
// deletion marker expired) rewrites: those holding, of the present offsets
// got, a keyed message that is not its key's latest, or a deletion marker.
func rewritable(ms []keyedMsg, got []uint64, segs []SegmentInfo) int {
	last := map[string]uint64{}
	for i, m := range ms {
		if m.key != "" {
			last[m.key] = uint64(i)
		}
	}
	n := 0
	for _, s := range segs[:len(segs)-1] {
		for _, off := range got {
			m := ms[off]
			if off >= s.BaseOffset && off < s.NextOffset && m.key != "" && (last[m.key] != off || m.deleted) {
				n++
				break
			}
		}
	}
	return n
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
