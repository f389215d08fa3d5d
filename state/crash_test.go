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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	crashDirEnv = "FERRY_STATE_CRASH_DIR" // set for the child process only
	// crashKeys are saved concurrently by the child, sharing data syncs;
	// the last one starts as a legacy <key>.state file to be migrated.
	crashWorkers   = 3
	crashLegacyKey = "crash-source-2"
	// crashCompactMin makes the child compact its journal every few dozen
	// Saves, so kills land in compactions too.
	crashCompactMin = 64 << 10
)

func crashKey(i int) string { return fmt.Sprintf("crash-source-%d", i) }

// crashPayload is the state the crash child writes for key as version v:
// 8 KiB (two pages) derived from both, so a torn or mixed record cannot
// pass for a version the child wrote.
func crashPayload(key string, v uint64) []byte {
	var b bytes.Buffer
	for b.Len() < 8<<10 {
		fmt.Fprintf(&b, "%s v=%d;", key, v)
	}
	return b.Bytes()
}

// TestHelperCrashChild is not a test: TestFileStoreSurvivesKill runs the test
// binary again with only this function selected, as a child process whose
// goroutines save increasing states of their keys until it is killed,
// printing "ack <key> <version>" after each Save returns.
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
	s.j.mu.Lock()
	s.j.compactMin = crashCompactMin
	s.j.mu.Unlock()
	for i := range crashWorkers {
		go func(key string) {
			st, err := s.Load(ctx, key)
			if err != nil && !errors.Is(err, ErrNotFound) {
				fmt.Println("error", err)
				os.Exit(2)
			}
			v := st.Version
			for {
				n, _ := strconv.ParseUint(string(v), 10, 64)
				if v, err = s.Save(ctx, key, crashPayload(key, n+1), v); err != nil {
					fmt.Println("error", err)
					os.Exit(2)
				}
				fmt.Println("ack", key, v) // os.Stdout is unbuffered: printed = acknowledged
			}
		}(crashKey(i))
	}
	select {}
}

// TestFileStoreSurvivesKill SIGKILLs a process that is saving state, at
// random moments, and checks after each kill that every key loads, at a
// version at least as new as the last one acknowledged (and at most one
// newer: a Save whose record was written but which had not returned), with
// exactly the data the child wrote for that version. The child saves
// several keys at once (sharing syncs) and compacts often; one key starts
// as a legacy file, migrated by the first child.
//
// A process kill leaves the page cache intact, so this checks atomicity of
// appends and compactions, not durability across power loss (that rests on
// the data syncs).
func TestFileStoreSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	lastAck := map[string]uint64{crashLegacyKey: 3}
	require.NoError(t, os.WriteFile(filepath.Join(dir, crashLegacyKey+fileSuffix), encodeFile(3, crashPayload(crashLegacyKey, 3)), 0o600))
	const rounds = 12
	for round := range rounds {
		acks, out := runCrashChild(t, dir, 1+rand.IntN(60))
		require.NotEmpty(t, acks, "round %d: the child acknowledged nothing; output:\n%s", round, out)
		for _, a := range acks {
			require.Greater(t, a.version, lastAck[a.key], "round %d: versions of %s must increase", round, a.key)
			lastAck[a.key] = a.version
		}

		s, err := OpenFile(dir)
		require.NoError(t, err, "round %d", round)
		for i := range crashWorkers {
			key := crashKey(i)
			st, err := s.Load(ctx, key)
			if lastAck[key] == 0 && errors.Is(err, ErrNotFound) {
				continue // killed before this key's first Save returned
			}
			require.NoError(t, err, "round %d: %s must load after a kill", round, key)
			got, err := strconv.ParseUint(string(st.Version), 10, 64)
			require.NoError(t, err)
			require.GreaterOrEqual(t, got, lastAck[key], "round %d: lost an acknowledged state of %s", round, key)
			require.LessOrEqual(t, got, lastAck[key]+1, "round %d: a version of %s nobody wrote", round, key)
			require.Equal(t, crashPayload(key, got), st.Data, "round %d: data is not what the child wrote for %s version %d", round, key, got)
			lastAck[key] = got // the child continues from what is stored
		}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.ElementsMatch(t, []string{lockName, journalName}, names, "round %d: temp and legacy files are gone after open", round)
		info, err := os.Stat(filepath.Join(dir, journalName))
		require.NoError(t, err)
		require.NoError(t, s.Close())
		// Without compaction the journal would hold every record: ~8 KiB
		// each.
		t.Logf("round %d: killed after %d acks; states at %v; journal %d bytes", round, len(acks), lastAck, info.Size())
	}
}

type crashAck struct {
	key     string
	version uint64
}

// runCrashChild starts the child, kills it with SIGKILL shortly after it
// has acknowledged minAcks saves, and returns every save it acknowledged
// and its full output.
func runCrashChild(t *testing.T, dir string, minAcks int) (acks []crashAck, output string) {
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
		if rest, ok := strings.CutPrefix(line, "ack "); ok {
			key, v, _ := strings.Cut(rest, " ")
			n, err := strconv.ParseUint(v, 10, 64)
			require.NoError(t, err, "ack line %q", line)
			acks = append(acks, crashAck{key, n})
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
