package iggy

// Brokers and a runtime in processes of their own, for the tests that kill
// them. Each is this test binary run again on one test function: the
// broker (TestServeChild) is what `ferry serve` runs — broker.Start on a
// data directory, with the broker's events on as ferry serve has them —
// and the runtime (TestReplicaRuntimeChild) is what `ferry run` runs on a
// config.toml naming an external Iggy server.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

// The environment of the child processes.
const (
	serveDirEnv   = "FERRY_IGGY_TEST_SERVE_DIR"   // the broker's directory: data/ and the addr file
	serveAddrEnv  = "FERRY_IGGY_TEST_SERVE_ADDR"  // the address to listen on
	serveDedupEnv = "FERRY_IGGY_TEST_SERVE_DEDUP" // Dedup.MaxEntries
	runtimeDirEnv = "FERRY_IGGY_TEST_RUNTIME_DIR" // config.toml, connectors/, state/
)

// TestServeChild is the broker process of the tests below; it does
// nothing unless started by startServe. It writes the address it listens
// on to the file addr of its directory once it accepts connections, then
// serves until killed.
func TestServeChild(t *testing.T) {
	dir := os.Getenv(serveDirEnv)
	if dir == "" {
		t.Skip("runs only as a test's broker process")
	}
	dedup, err := strconv.Atoi(os.Getenv(serveDedupEnv))
	require.NoError(t, err)
	b, err := broker.Start(context.Background(), broker.Config{
		Addr: os.Getenv(serveAddrEnv), DataDir: filepath.Join(dir, "data"),
		RootUsername: "iggy", RootPassword: "iggy",
		Dedup:  broker.Dedup{MaxEntries: dedup},
		Events: broker.Events{Enabled: true},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	tmp := filepath.Join(dir, "addr.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(b.Addr()), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "addr")))
	untilOrphaned()
}

// TestReplicaRuntimeChild is the runtime process of the tests below; it
// does nothing unless started by startRuntime.
func TestReplicaRuntimeChild(t *testing.T) {
	dir := os.Getenv(runtimeDirEnv)
	if dir == "" {
		t.Skip("runs only as a test's runtime process")
	}
	env := config.WithEnv(config.MapEnv(nil))
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), env)
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := runtime.New(cfg, runtime.Options{Logger: log, ConfigOptions: []config.Option{env}})
	require.NoError(t, err)
	require.NoError(t, rt.Start(context.Background()))
	untilOrphaned()
}

// untilOrphaned never returns: a child serves until killed, or exits
// once its parent, the test, is gone without killing it (a timeout's
// panic, a kill of go test).
func untilOrphaned() {
	parent := os.Getppid()
	for {
		time.Sleep(500 * time.Millisecond)
		if os.Getppid() != parent {
			os.Exit(2)
		}
	}
}

// child is a process running one test function of this binary.
type child struct {
	cmd    *exec.Cmd
	exited atomic.Bool // set when the process ends, killed or not
	done   chan struct{}
}

func startChild(t *testing.T, test string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		c.exited.Store(true)
		close(c.done)
	}()
	t.Cleanup(c.kill)
	return c
}

// kill SIGKILLs the process (unless it has ended) and waits for it.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// served is a broker process on a data directory that outlives it: kill
// and start again, on the same address and data, as one would restart a
// `ferry serve`.
type served struct {
	t     *testing.T
	dir   string
	dedup int
	addr  string // after the first start
	proc  *child
	Kills int
}

// startServe starts a broker process on a new data directory and a free
// port; dedup > 0 deduplicates by message id (ferry serve
// --dedup-max-entries).
func startServe(t *testing.T, dedup int) *served {
	t.Helper()
	s := &served{t: t, dir: t.TempDir(), dedup: dedup}
	s.start()
	return s
}

// start starts the process (on the address it had, after a kill) and
// waits until it accepts connections.
func (s *served) start() {
	s.t.Helper()
	addrFile := filepath.Join(s.dir, "addr")
	require.NoError(s.t, os.RemoveAll(addrFile))
	listen := s.addr
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	s.proc = startChild(s.t, "TestServeChild", serveDirEnv+"="+s.dir, serveAddrEnv+"="+listen, serveDedupEnv+"="+strconv.Itoa(s.dedup))
	connectortest.Eventually(s.t, "the broker process to listen", func() bool {
		require.False(s.t, s.proc.exited.Load(), "the broker process ended before it listened")
		data, err := os.ReadFile(addrFile)
		if err != nil {
			return false
		}
		s.addr = string(data)
		return true
	})
}

// kill SIGKILLs the broker process.
func (s *served) kill() {
	s.proc.kill()
	s.Kills++
}

// dial logs in as root, with the client's reconnects on (the default).
func (s *served) dial(t *testing.T) *iggy.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := iggy.Dial(ctx, s.addr, iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// startRuntime writes a runtime directory whose Iggy is the server at
// addr (create_missing on), with the connector files (name → TOML), and
// starts a runtime process on it.
func startRuntime(t *testing.T, addr string, connectors map[string]string) *child {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	for name, content := range connectors {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "connectors", name), []byte(content), 0o644))
	}
	cfg := fmt.Sprintf("[iggy]\naddress = %q\nusername = \"iggy\"\npassword = \"iggy\"\ncreate_missing = true\n"+
		"[state]\npath = \"state\"\n[connectors]\nconfig_dir = \"connectors\"\n[http]\nenabled = false\n", addr)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o644))
	return startChild(t, "TestReplicaRuntimeChild", runtimeDirEnv+"="+dir)
}
