package main

import (
	"encoding/json"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/config"
)

// ferryProcess runs the ferry command line in its own process (the test
// binary acting as ferry, see TestMain) in dir, with the test's
// environment: no flag or variable beyond what a user has.
func ferryProcess(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	argv, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0])
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envRunCLI+"="+string(argv))
	return cmd
}

// TestTheFoundingWorkflow is the first thing a user does, with the
// binary: start the quickstart, create the founding discussion's hook as
// typed, send it messages, and see the command get each payload; another
// user is refused; and the checkout is as clean afterwards as before.
// It needs the default ports (8090 for the broker, 8081 for the API) free.
func TestTheFoundingWorkflow(t *testing.T) {
	for _, addr := range []string{config.DefaultEmbeddedAddress, "127.0.0.1:8081"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("the first-hour test runs ferry on its default addresses, and %s is taken: %v", addr, err)
		}
		ln.Close()
	}
	// The quickstart, as a fresh clone has it, in a git repository of its own.
	repo := t.TempDir()
	copyTree(t, filepath.Join("..", "..", "examples", "quickstart"), filepath.Join(repo, "examples", "quickstart"))
	data, err := os.ReadFile(filepath.Join("..", "..", ".gitignore"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".gitignore"), data, 0o644))
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return string(out)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "quickstart")

	logFile, err := os.Create(filepath.Join(t.TempDir(), "run.log"))
	require.NoError(t, err)
	defer logFile.Close()
	logs := fileText(logFile.Name())
	run := ferryProcess(t, repo, "run", "--config", "examples/quickstart/config.toml")
	run.Stdout, run.Stderr = logFile, logFile
	require.NoError(t, run.Start())
	exited := make(chan struct{})
	var runErr error
	go func() { runErr = run.Wait(); close(exited) }()
	defer func() {
		_ = run.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = run.Process.Kill()
		}
	}()
	waitFor(t, "ferry run says where everything is", func() bool { return strings.Contains(logs.String(), "Send a test message:") })
	require.Contains(t, logs.String(), "Iggy broker   "+config.DefaultEmbeddedAddress)

	work := filepath.Join(t.TempDir(), "project")
	require.NoError(t, os.Mkdir(work, 0o755))
	out, err := ferryProcess(t, repo, "hook", "create", "my-first-hook", "my-topic",
		"cd "+work+"; printf '%s\\n' {payload} >> received").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "hook my-first-hook created")
	require.Contains(t, string(out), "send it a test message: ferry message send hooks my-topic 'hello from ferry'")

	out, err = ferryProcess(t, repo, "message", "send", "hooks", "my-topic", "hello", "; rm -rf /", "$(id)").CombinedOutput()
	require.NoError(t, err, "%s", out)
	received := filepath.Join(work, "received")
	waitFor(t, "the hook got every payload", fileHas(received, "$(id)"))
	require.Equal(t, "hello\n; rm -rf /\n$(id)\n", read(t, received), "each payload arrives as data, in order")

	out, err = ferryProcess(t, repo, "status").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "hook-my-first-hook")
	require.Regexp(t, `hook-my-first-hook\s+sink\s+running\s+3\s+3\s+\d+\s+0\s+0`, string(out))

	if os.Geteuid() == 0 {
		other := ferryProcess(t, t.TempDir(), "hook", "create", "intruder", "my-topic", "touch "+filepath.Join(work, "PWNED"))
		other.Env = []string{other.Env[len(other.Env)-1], "HOME=/nonexistent", "PATH=/usr/bin:/bin"}
		other.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		bin := filepath.Join(t.TempDir(), "ferry.test")
		data, err := os.ReadFile(os.Args[0])
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(bin, data, 0o755))
		for d := filepath.Dir(bin); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			require.NoError(t, os.Chmod(d, 0o755))
		}
		other.Path, other.Dir = bin, "/"
		out, err := other.CombinedOutput()
		require.Error(t, err, "%s", out)
		require.Contains(t, string(out), "refused the request: no credential was sent")
	}

	out, err = ferryProcess(t, repo, "hook", "delete", "my-first-hook").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.NoError(t, run.Process.Signal(syscall.SIGINT))
	select {
	case <-exited:
		require.NoError(t, runErr, "ferry run stops cleanly on Ctrl-C: %s", logs.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("ferry run did not stop: %s", logs.String())
	}
	require.Contains(t, logs.String(), "ferry: stopping: waiting for")
	require.Empty(t, git("status", "--porcelain", "--untracked-files=all"), "the quickstart writes nothing git sees")
	require.DirExists(t, filepath.Join(repo, "examples", "quickstart", "state", "connectors"), "created versions went to the state directory")
	require.NoFileExists(t, filepath.Join(work, "PWNED"))
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if rel == "state" && d.IsDir() {
			return filepath.SkipDir // a developer's own run
		}
		target := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	}))
}

// fileText reads a file that another process writes, as a String method.
type fileText string

func (f fileText) String() string {
	data, _ := os.ReadFile(string(f))
	return string(data)
}

// A first Ctrl-C says what the runtime waits for; a second one exits at
// once, even while a batch is still in flight.
func TestSecondCtrlCExitsAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(`
[iggy]
embedded_address = "127.0.0.1:0"
[state]
path = "state"
[connectors]
config_dir = "connectors"
[http]
enabled = false
`), 0o644))
	started := filepath.Join(dir, "started")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "connectors", "slow.toml"), []byte(`
type = "sink"
key = "slow"
path = "exec"
[[streams]]
stream = "s"
topics = ["t"]
[plugin_config]
command = "touch `+started+`; sleep 60"
timeout = "0s"
`), 0o644))
	logFile, err := os.Create(filepath.Join(dir, "run.log"))
	require.NoError(t, err)
	defer logFile.Close()
	logs := fileText(logFile.Name())
	run := ferryProcess(t, dir, "run", "--config", "config.toml")
	run.Stdout, run.Stderr = logFile, logFile
	require.NoError(t, run.Start())
	exited := make(chan struct{})
	go func() { _ = run.Wait(); close(exited) }()
	defer func() {
		_ = run.Process.Kill()
		<-exited
	}()
	waitFor(t, "ferry run says where the broker is", func() bool { return strings.Contains(logs.String(), "Send a test message:") })
	var addr string
	for _, line := range strings.Split(logs.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "  Iggy broker   "); ok {
			addr, _, _ = strings.Cut(rest, " ")
		}
	}
	require.NotEmpty(t, addr, "%s", logs.String())
	out, err := ferry(t, "", "message", "send", "s", "t", `{"x": 1}`, "--address", addr)
	require.NoError(t, err, out)
	if !waitUntil(func() bool { _, err := os.Stat(started); return err == nil }) {
		t.Fatalf("the slow command did not start: %s", logs.String())
	}

	require.NoError(t, run.Process.Signal(syscall.SIGINT))
	waitFor(t, "the first Ctrl-C says what it waits for", func() bool {
		return strings.Contains(logs.String(), "ferry: stopping: waiting for sinks slow to finish their batches in flight and commit")
	})
	require.Contains(t, logs.String(), "Press Ctrl-C again to exit at once")
	require.NoError(t, run.Process.Signal(syscall.SIGINT))
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("a second Ctrl-C did not end ferry run: %s", logs.String())
	}
	require.Equal(t, 130, run.ProcessState.ExitCode())
	require.Contains(t, logs.String(), "ferry: second interrupt: exiting now")
}

func TestRunNeedsAConfiguration(t *testing.T) {
	t.Setenv(config.EnvConfigPath, "")
	_, err := ferry(t, "", "run")
	require.Error(t, err)
	require.Equal(t, 2, exitCode(err))
	require.EqualError(t, err, "no configuration: pass --config FILE (for example --config examples/quickstart/config.toml) or set IGGY_CONNECTORS_CONFIG_PATH")

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte("[connectors]\nconfig_dir = \"nowhere\"\n[http]\nenabled = false\n"), 0o644))
	_, err = ferry(t, "", "run", "--config", filepath.Join(dir, "config.toml"))
	require.ErrorContains(t, err, "connectors.config_dir "+filepath.Join(dir, "nowhere")+": ")
	require.ErrorContains(t, err, "create it, or point config_dir at the directory of your connector files")
	require.NoDirExists(t, filepath.Join(dir, "nowhere"))
}

// waitUntil is waitFor that reports instead of failing.
func waitUntil(cond func() bool) bool {
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
