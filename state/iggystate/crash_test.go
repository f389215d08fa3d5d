package iggystate

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

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/state"
	"github.com/stretchr/testify/require"
)

const crashAddrEnv = "FERRY_IGGYSTATE_CRASH_ADDR" // set for the child process only

// crashPayload is the state the child writes as its n-th save: 2 KiB
// derived from n, so a record of another save cannot pass for it.
func crashPayload(n uint64) []byte {
	var b bytes.Buffer
	for b.Len() < 2<<10 {
		fmt.Fprintf(&b, "n=%d;", n)
	}
	return b.Bytes()
}

// TestHelperCrashWriter is not a test: TestSurvivesKill runs the test
// binary again with only this function, as a process saving increasing
// states of key "src" to the broker at $FERRY_IGGYSTATE_CRASH_ADDR until
// it is killed, printing "ack <n> <version>" after each Save returns.
func TestHelperCrashWriter(t *testing.T) {
	addr := os.Getenv(crashAddrEnv)
	if addr == "" {
		t.Skip("helper process for TestSurvivesKill")
	}
	ctx := context.Background()
	fail := func(err error) { fmt.Println("error", err); os.Exit(2) }
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+addr)
	if err != nil {
		fail(err)
	}
	s, err := Open(ctx, c, "ferry", "crash")
	if err != nil {
		fail(err)
	}
	st, err := s.Load(ctx, "src")
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		fail(err)
	}
	n := uint64(0)
	if err == nil {
		n, _ = strconv.ParseUint(strings.TrimPrefix(strings.SplitN(string(st.Data), ";", 2)[0], "n="), 10, 64)
	}
	v := st.Version
	for {
		n++
		if v, err = s.Save(ctx, "src", crashPayload(n), v); err != nil {
			fail(err)
		}
		fmt.Println("ack", n, v) // os.Stdout is unbuffered: printed = acknowledged
	}
}

// TestSurvivesKill SIGKILLs a process saving state to the embedded broker
// ten times, at random moments, and checks after each kill that a store
// opened anew loads the last acknowledged save or the one after it (sent
// but not yet acknowledged), with exactly the data written for it.
func TestSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	ctx := context.Background()
	b := brokertest.Start(t)
	c := dial(t, b)
	var last uint64
	for round := range 10 {
		acks, out := runCrashWriter(t, b.Addr(), 1+rand.IntN(200))
		require.NotEmpty(t, acks, "round %d: the child acknowledged nothing; output:\n%s", round, out)
		require.Equal(t, last+1, acks[0], "round %d: the child continues from the stored state", round)
		last = acks[len(acks)-1]

		s, err := Open(ctx, c, "ferry", "crash")
		require.NoError(t, err, "round %d", round)
		st, err := s.Load(ctx, "src")
		require.NoError(t, err, "round %d", round)
		got, err := strconv.ParseUint(strings.TrimPrefix(strings.SplitN(string(st.Data), ";", 2)[0], "n="), 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, got, last, "round %d: lost an acknowledged save", round)
		require.LessOrEqual(t, got, last+1, "round %d: a save nobody wrote", round)
		require.Equal(t, crashPayload(got), st.Data, "round %d", round)
		require.Equal(t, state.Version("0:"+strconv.FormatUint(got, 10)), st.Version, "round %d", round)
		require.NoError(t, s.Close())
		t.Logf("round %d: killed after %d acks; stored save %d", round, len(acks), got)
		last = got
	}
}

// runCrashWriter starts the child, kills it shortly after it has
// acknowledged minAcks saves, and returns the save numbers it
// acknowledged and its output.
func runCrashWriter(t *testing.T, addr string, minAcks int) (acks []uint64, output string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperCrashWriter$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashAddrEnv+"="+addr)
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
		if rest, ok := strings.CutPrefix(line, "ack "); ok {
			ns, _, _ := strings.Cut(rest, " ")
			n, err := strconv.ParseUint(ns, 10, 64)
			require.NoError(t, err, "ack line %q", line)
			acks = append(acks, n)
			if len(acks) == minAcks {
				go func(d time.Duration) { time.Sleep(d); kill() }(time.Duration(rand.IntN(1000)) * time.Microsecond)
			}
		}
	}
	err = cmd.Wait()
	require.Error(t, err, "the child must die by the kill; output:\n%s%s", out.String(), stderr.String())
	require.Contains(t, err.Error(), "killed", "output:\n%s%s", out.String(), stderr.String())
	return acks, out.String()
}
