package state

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	crashDirEnv = "FERRY_STATE_CRASH_DIR" // set for the child process only
	crashKey    = "crash-source"
)

// crashPayload is the state the crash child writes as version v: 8 KiB (two
// pages) derived from v, so a torn or mixed file cannot pass for a version
// the child wrote.
func crashPayload(v uint64) []byte {
	var b bytes.Buffer
	for b.Len() < 8<<10 {
		fmt.Fprintf(&b, "v=%d;", v)
	}
	return b.Bytes()
}

// TestHelperCrashChild is not a test: TestFileStoreSurvivesKill runs the test
// binary again with only this function selected, as a child process that
// saves increasing states until it is killed, printing "ack <version>" after
// each Save returns.
func TestHelperCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestFileStoreSurvivesKill")
	}
	ctx := context.Background()
	s, err := OpenFile(dir)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	st, err := s.Load(ctx, crashKey)
	if err != nil && !errors.Is(err, ErrNotFound) {
		fmt.Println("error", err)
		os.Exit(2)
	}
	v := st.Version
	for {
		n, _ := strconv.ParseUint(string(v), 10, 64)
		if v, err = s.Save(ctx, crashKey, crashPayload(n+1), v); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("ack", v) // os.Stdout is unbuffered: printed = acknowledged
	}
}

// TestFileStoreSurvivesKill SIGKILLs a process that is saving state, at
// random moments, and checks after each kill that the state file loads,
// holds a version at least as new as the last one acknowledged (and at most
// one newer: a Save that renamed but had not returned), and holds exactly
// the data the child wrote for that version.
//
// A process kill leaves the page cache intact, so this checks atomicity of
// the replace, not durability across power loss (that rests on the fsyncs).
func TestFileStoreSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	var lastAck uint64
	const rounds = 12
	for round := range rounds {
		acks, out := runCrashChild(t, dir, 1+rand.IntN(30))
		require.NotEmpty(t, acks, "round %d: the child acknowledged nothing; output:\n%s", round, out)
		for _, a := range acks {
			require.Greater(t, a, lastAck, "round %d: versions must increase", round)
			lastAck = a
		}

		leftovers := 0
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if isTemp(e.Name()) {
				leftovers++ // killed between creating the temp file and the rename
			}
		}

		s, err := OpenFile(dir)
		require.NoError(t, err, "round %d", round)
		st, err := s.Load(ctx, crashKey)
		require.NoError(t, err, "round %d: state must load after a kill", round)
		got, err := strconv.ParseUint(string(st.Version), 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, got, lastAck, "round %d: lost an acknowledged state", round)
		require.LessOrEqual(t, got, lastAck+1, "round %d: a version nobody wrote", round)
		require.Equal(t, crashPayload(got), st.Data, "round %d: data is not what the child wrote for version %d", round, got)
		entries, err = os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			require.False(t, isTemp(e.Name()), "round %d: temp file %s not cleaned at open", round, e.Name())
		}
		require.NoError(t, s.Close())
		t.Logf("round %d: killed after %d acks (last %d); state at version %d; %d temp files left", round, len(acks), lastAck, got, leftovers)
		lastAck = got // the child continues from what is stored
	}
}

// runCrashChild starts the child, kills it with SIGKILL shortly after it
// has acknowledged minAcks saves, and returns every version it acknowledged
// and its full output.
func runCrashChild(t *testing.T, dir string, minAcks int) (acks []uint64, output string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var once sync.Once
	kill := func() { once.Do(func() { _ = cmd.Process.Kill() }) } // SIGKILL on Unix
	defer kill()

	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if v, ok := strings.CutPrefix(line, "ack "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			require.NoError(t, err, "ack line %q", line)
			acks = append(acks, n)
			if len(acks) == minAcks {
				// Kill at a random point of a later Save: right away, or
				// after a pause of up to 2ms (a Save takes about that).
				go func(d time.Duration) { time.Sleep(d); kill() }(time.Duration(rand.IntN(2000)) * time.Microsecond)
			}
		}
	}
	err = cmd.Wait()
	require.Error(t, err, "the child must die by the kill; output:\n%s%s", out.String(), stderr.String())
	require.Contains(t, err.Error(), "killed", "output:\n%s%s", out.String(), stderr.String())
	return acks, out.String()
}
