package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

const (
	crashChildEnv = "FERRY_FILE_CRASH_CHILD_DIR"
	crashRecords  = 300_000
	crashBatch    = 200
)

// TestFileCrashChild is the runtime process the crash test kills: file
// source → embedded broker → file sink. It does nothing unless started by
// TestKillNineFileToFile.
func TestFileCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("runs only as the crash test's child process")
	}
	env := config.WithEnv(config.MapEnv(nil))
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), env)
	require.NoError(t, err)
	rt, err := runtime.New(cfg, runtime.Options{ConfigOptions: []config.Option{env}})
	require.NoError(t, err)
	require.NoError(t, rt.Start(context.Background()))
	fmt.Println("child running")
	select {} // until killed
}

// TestKillNineFileToFile kills the runtime with SIGKILL mid-stream several
// times, then lets it finish: every input record reaches the output, no
// output line is half written, and each kill repeats at most one source
// batch and one sink batch.
func TestKillNineFileToFile(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	dir := t.TempDir()
	input := filepath.Join(dir, "in.ndjson")
	var in bytes.Buffer
	for i := range crashRecords {
		fmt.Fprintf(&in, `{"n":%d,"pad":"%s"}`+"\n", i, "abcdefghijklmnopqrstuvwxyz")
	}
	write(t, input, in.String())
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	write(t, filepath.Join(dir, "config.toml"), "[iggy]\naddress = \"embedded\"\nembedded_address = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n[connectors]\nconfig_dir = \"connectors\"\n[http]\nenabled = false\n")
	write(t, filepath.Join(dir, "connectors", "src.toml"), fmt.Sprintf(`type = "source"
key = "src"
path = "file"
[[streams]]
stream = "s"
topic = "t"
batch_length = %[2]d
[plugin_config]
paths = [%[1]q]
batch_size = %[2]d
`, input, crashBatch))
	write(t, filepath.Join(dir, "connectors", "dst.toml"), fmt.Sprintf(`type = "sink"
key = "dst"
path = "file"
[[streams]]
stream = "s"
topics = ["t"]
batch_length = %[2]d
[plugin_config]
path = %[1]q
rotate_size = "2MiB"
`, filepath.Join(dir, "out", "{stream}-{topic}-{partition}.ndjson"), crashBatch))

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		return cmd
	}
	kill := func(cmd *exec.Cmd) {
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
	}
	// read returns how often each n is in the output files, failing on
	// any line that is not a whole record. Right after a kill (afterKill)
	// the active file may end in a torn record, which the sink cuts off
	// when it opens the file again; it is not counted then.
	var read func(afterKill bool) (map[int]int, int)
	read = func(afterKill bool) (map[int]int, int) {
		files, err := filepath.Glob(filepath.Join(dir, "out", "*.ndjson"))
		require.NoError(t, err)
		counts, lines := map[int]int{}, 0
		for _, f := range files {
			data, err := os.ReadFile(f)
			if errors.Is(err, fs.ErrNotExist) {
				// Rotated (renamed) between the glob and the read, while
				// the runtime is still writing: list the files again.
				return read(afterKill)
			}
			require.NoError(t, err)
			if i := bytes.LastIndexByte(data, '\n'); afterKill && i+1 < len(data) {
				t.Logf("%s ends in a torn record of %d bytes", f, len(data)-i-1)
				data = data[:i+1]
			}
			sc := bufio.NewScanner(bytes.NewReader(data))
			for sc.Scan() {
				var rec struct{ N *int }
				require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), "%s: line %q is not a whole record", f, sc.Text())
				require.NotNil(t, rec.N, "%s: %q", f, sc.Text())
				counts[*rec.N]++
				lines++
			}
		}
		return counts, lines
	}

	kills := 0
	for round := 0; round < 5; round++ {
		cmd := start()
		time.Sleep(time.Duration(150+rand.IntN(400)) * time.Millisecond)
		kill(cmd)
		kills++
		counts, _ := read(true) // also checks that no record is half written
		t.Logf("round %d: killed with %d distinct records in the output", round, len(counts))
		if len(counts) == crashRecords {
			break
		}
	}
	cmd := start()
	defer kill(cmd)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		counts, _ := read(true) // the runtime is still writing
		if len(counts) == crashRecords {
			break
		}
		require.True(t, time.Now().Before(deadline), "gave up waiting: %d of %d records", len(counts), crashRecords)
		time.Sleep(50 * time.Millisecond)
	}
	// Every record is there; once the output stops changing, every line
	// must be whole.
	_, prev := read(true)
	for {
		time.Sleep(100 * time.Millisecond)
		_, now := read(true)
		if now == prev {
			break
		}
		prev = now
	}
	counts, lines := read(false)
	for n := range crashRecords {
		require.NotZero(t, counts[n], "record %d was lost", n)
	}
	dups := lines - crashRecords
	t.Logf("%d records, %d lines: %d repeated after %d kills", crashRecords, lines, dups, kills)
	require.LessOrEqual(t, dups, kills*2*crashBatch, "at most one source batch and one sink batch per kill")
	rotated, _ := filepath.Glob(filepath.Join(dir, "out", "s-t-0.*Z*.ndjson"))
	require.NotEmpty(t, rotated, "the sink rotated by size during the run")
}
