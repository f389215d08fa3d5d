package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// The crash test runs this test binary again as a child process that
// appends with Fsync and reports each acknowledged record, kills it with
// SIGKILL at a random moment, and checks what survived.

const (
	crashDirEnv = "FERRY_STORAGE_CRASH_DIR"
	crashSize   = 64
)

var crashOpts = Options{SegmentSize: 16 << 10, Fsync: true} // rolls every few records

// TestHelperWriter is the child process of TestCrashKill; it skips unless
// started by it. It appends records of 1..20 messages forever and prints
// "ack BASE COUNT" after each Append returns nil.
func TestHelperWriter(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child process of TestCrashKill")
	}
	l, err := OpenFile(dir, crashOpts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(time.Now().UnixNano())))
	for range 1_000_000 { // bounded, in case the parent is gone
		base := l.NextOffset()
		n := 1 + rng.IntN(20)
		if err := l.Append(buildRecord(t, base, n, crashSize, tsFor(base))); err != nil {
			fmt.Fprintln(os.Stderr, "append:", err)
			os.Exit(2)
		}
		// An unbuffered write: once it returns, the parent can read it.
		if _, err := fmt.Fprintf(os.Stdout, "ack %d %d\n", base, n); err != nil {
			os.Exit(3)
		}
	}
	os.Exit(0)
}

type span struct{ base, count uint64 }

func TestCrashKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var stored []span // the log's records after the last round
	rounds := 10
	if testing.Short() {
		rounds = 4
	}
	for round := range rounds {
		acked, stderr := runAndKill(t, dir, rng, round)
		records := crashRecords(t, dir)
		t.Logf("round %d: %d records acknowledged, log holds %d", round, len(acked), len(records))

		// The log is what it held before, then every record acknowledged
		// in this round in order, then at most one record whose ack the
		// kill cut off.
		require.GreaterOrEqual(t, len(records), len(stored), "round %d: %s", round, stderr)
		equalSpans(t, stored, records[:len(stored)], "round %d: earlier records intact", round)
		fresh := records[len(stored):]
		require.GreaterOrEqual(t, len(fresh), len(acked), "round %d: every acknowledged record is there", round)
		equalSpans(t, acked, fresh[:len(acked)], "round %d: acknowledged records", round)
		require.LessOrEqual(t, len(fresh)-len(acked), 1, "round %d: at most one unacknowledged record", round)
		stored = records
	}
}

func equalSpans(t *testing.T, want, got []span, msg string, args ...any) {
	t.Helper()
	msg = fmt.Sprintf(msg, args...)
	require.Len(t, got, len(want), msg)
	for i := range want {
		require.Equal(t, want[i], got[i], "%s: record %d", msg, i)
	}
}

// runAndKill starts the writer on dir, kills it at a random moment and
// returns the records it acknowledged.
func runAndKill(t *testing.T, dir string, rng *rand.Rand, round int) ([]span, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var acked []span
	take := func(line string) {
		var s span
		if _, err := fmt.Sscanf(line, "ack %d %d", &s.base, &s.count); err == nil && strings.HasPrefix(line, "ack ") {
			acked = append(acked, s)
		}
	}
	// Odd rounds may kill during open and recovery; even rounds wait for
	// the first ack, then let it run a little.
	guard := time.NewTimer(2 * time.Minute) // a hung child fails the test instead of hanging it
	defer guard.Stop()
	var failed string
	if round%2 == 0 {
		select {
		case line, ok := <-lines:
			if !ok {
				failed = "writer exited before its first ack"
			}
			take(line)
		case <-guard.C:
			failed = "no ack from the writer in 2 minutes"
		}
	}
	if failed == "" && round == 0 {
		// The running writer holds the directory: another process's
		// OpenFile (this one's) is refused.
		_, err := OpenFile(dir, crashOpts)
		require.ErrorIs(t, err, ErrLocked)
	}
	if failed == "" {
		time.Sleep(time.Duration(rng.IntN(150_000)) * time.Microsecond)
	}
	require.NoError(t, cmd.Process.Kill())
	for line := range lines {
		take(line)
	}
	err = cmd.Wait()
	require.Empty(t, failed, "%s", stderr.String())
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee) && !ee.Exited(), "the writer was killed, not exited: %v %s", err, stderr.String())
	return acked, stderr.String()
}

// crashRecords opens dir and returns its records, checking each one
// validates, offsets are contiguous from 0 and payloads are intact.
func crashRecords(t *testing.T, dir string) []span {
	t.Helper()
	l, err := OpenFile(dir, crashOpts)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	require.Zero(t, l.FirstOffset())
	b, n, err := l.Read(nil, 0, ^uint32(0))
	require.NoError(t, err)
	require.Equal(t, l.NextOffset(), uint64(n))
	var spans []span
	var c wire.BatchChecker
	var msgs []wire.Message
	for len(b) > 0 {
		h, err := wire.DecodeBatchHeader(b)
		require.NoError(t, err)
		_, err = c.Validate(b[:h.Length])
		require.NoError(t, err)
		spans = append(spans, span{h.BaseOffset, uint64(h.Count)})
		msgs, err = wire.AppendRecordMessages(msgs[:0], b[:h.Length])
		require.NoError(t, err)
		for i, m := range msgs {
			require.Equal(t, h.BaseOffset+uint64(i), m.Offset)
			require.Equal(t, payloadFor(m.Offset, crashSize), m.Payload, "payload at %d", m.Offset)
		}
		b = b[h.Length:]
	}
	var next uint64
	for _, s := range spans {
		require.Equal(t, next, s.base, "offsets contiguous")
		next += s.count
	}
	return spans
}
