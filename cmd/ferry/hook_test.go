package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"

	"github.com/ferryhq/ferry/api"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

const testAPIKey = "hook-test-key"

// liveRuntime is a real runtime (embedded broker, local config_dir) with
// its management API on a loopback port, as `ferry run` starts them.
type liveRuntime struct {
	rt  *runtime.Runtime
	srv *api.Server
	url string
}

func startLiveRuntime(t *testing.T, dir string) *liveRuntime {
	t.Helper()
	return startLiveRuntimeKey(t, dir, testAPIKey)
}

// startLiveRuntimeKey is startLiveRuntime with the API key apiKey ("" for
// none).
func startLiveRuntimeKey(t *testing.T, dir, apiKey string) *liveRuntime {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(`
[iggy]
address = "embedded"
embedded_address = "127.0.0.1:0"
[state]
path = "state"
[connectors]
config_type = "local"
config_dir = "connectors"
[http]
enabled = false
`), 0o644))
	noEnv := config.WithEnv(config.MapEnv(nil))
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), noEnv)
	require.NoError(t, err)
	rt, err := runtime.New(cfg, runtime.Options{ConfigOptions: []config.Option{noEnv}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, rt.Start(ctx))
	srv, err := api.New(rt, config.HTTP{Address: "127.0.0.1:0", APIKey: apiKey}, nil)
	require.NoError(t, err)
	require.NoError(t, srv.Start(ctx))
	l := &liveRuntime{rt: rt, srv: srv, url: "http://" + srv.Addr()}
	t.Cleanup(l.stop)
	return l
}

func (l *liveRuntime) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = l.srv.Shutdown(ctx)
	_ = l.rt.Stop(ctx)
}

// send sends payloads to stream/topic with the Iggy client.
func (l *liveRuntime) send(t *testing.T, stream, topic string, payloads ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := iggy.Dial(ctx, l.rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	msgs := make([]iggy.Message, len(payloads))
	for i, p := range payloads {
		msgs[i].Payload = []byte(p)
	}
	_, err = cl.SendMessages(ctx, iggy.NamedID(stream), iggy.NamedID(topic), iggy.Balanced(), msgs)
	require.NoError(t, err)
}

// hookCLI runs `ferry hook ARGS` against live: hook returns the output
// and error, mustHook fails the test on an error.
func hookCLI(t *testing.T, live *liveRuntime) (hook func(args ...string) (string, error), mustHook func(args ...string) string) {
	hook = func(args ...string) (string, error) {
		return ferry(t, "", append(append([]string{"hook"}, args...), "--api", live.url, "--api-key", testAPIKey)...)
	}
	mustHook = func(args ...string) string {
		t.Helper()
		out, err := hook(args...)
		require.NoError(t, err, "ferry hook %v", args)
		return out
	}
	return hook, mustHook
}

// waitFor waits for cond (connectortest.Eventually).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	connectortest.Eventually(t, what, cond)
}

func fileHas(path, text string) func() bool {
	return func() bool {
		data, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(data), text)
	}
}

func TestHookCommandsOnARunningRuntime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	work := filepath.Join(dir, "project")
	require.NoError(t, os.Mkdir(work, 0o755))
	live := startLiveRuntime(t, dir)
	hook, mustHook := hookCLI(t, live)

	// As a user types it: cd somewhere, then a command with {payload}.
	out := mustHook("create", "my-first-hook", "my-topic", "cd "+work+"; printf '%s\\n' {payload} >> received")
	require.Contains(t, out, "hook my-first-hook created")
	require.Contains(t, out, "on hooks/my-topic")
	require.Contains(t, out, "hooks/hook-my-first-hook_dead_letter")
	out = mustHook("create", "second", "other-topic", `printf '%s\n' "{offset}:{payload}" >> second`,
		"--stream", "orders", "--dir", work, "--timeout", "30s", "--env", "APP_ENV=test", "--json")
	var created map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &created))
	require.Equal(t, "orders", created["stream"])
	require.Equal(t, "30s", created["timeout"])

	payload := `{"id":7}; touch pwned $(touch pwned2)`
	live.send(t, "hooks", "my-topic", payload, "second message")
	live.send(t, "orders", "other-topic", "to the second hook")
	waitFor(t, "the first hook ran for both messages", fileHas(filepath.Join(work, "received"), "second message"))
	require.Equal(t, payload+"\nsecond message\n", read(t, filepath.Join(work, "received")))
	waitFor(t, "the second hook ran", fileHas(filepath.Join(work, "second"), "0:to the second hook"))
	require.NoFileExists(t, filepath.Join(work, "pwned"))
	require.NoFileExists(t, filepath.Join(work, "pwned2"))

	out = mustHook("list")
	require.Contains(t, out, "NAME")
	require.Regexp(t, `my-first-hook\s+running\s+hooks/my-topic\s+cd `, out)
	require.Regexp(t, `second\s+running\s+orders/other-topic`, out)
	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustHook("list", "--json")), &listed))
	require.Len(t, listed, 2)
	require.Equal(t, "my-first-hook", listed[0]["name"])
	require.Equal(t, "hook-my-first-hook", listed[0]["consumer_group"])

	out = mustHook("get", "second")
	require.Contains(t, out, "status:         running")
	require.Contains(t, out, `command:        printf '%s\n' "{offset}:{payload}" >> second`)
	require.Contains(t, out, "working dir:    "+work)
	require.Contains(t, out, "env:            APP_ENV=test")
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(mustHook("get", "my-first-hook", "--json")), &got))
	require.Equal(t, "hooks", got["stream"])
	require.Equal(t, "dead_letter", got["on_error"])

	// Errors: one line, and exit code 2 for misuse.
	for i, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"create", "second", "t", "true"}, "hook second already exists", 1},
		{[]string{"get", "missing"}, "hook missing does not exist", 1},
		{[]string{"delete", "missing"}, "hook missing does not exist", 1},
		{[]string{"create", "x", "t", "echo `echo {payload}`"}, "inside backquotes", 2},
		{[]string{"create", "bad/name", "t", "true"}, `hook name "bad/name"`, 2},
		{[]string{"create", "x", "t", "true", "--env", "NOVALUE"}, "want NAME=VALUE", 2},
		{[]string{"create", "x", "t"}, "accepts 3 arg(s)", 2},
		{[]string{"create", "x", "t", "true", "--on-error", "ignore"}, "want dead_letter or stop", 2},
	} {
		_, err := hook(tc.args...)
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), tc.want, "case %d", i)
		require.NotContains(t, err.Error(), "\n", "case %d", i)
		require.Equal(t, tc.code, exitCode(err), "case %d", i)
	}
	_, err := ferry(t, "", "hook", "list", "--api", live.url)
	require.ErrorContains(t, err, "--api-key", "without the key the API refuses")

	// A hook that cannot start is not left behind.
	_, err = hook("create", "broken", "t", "true", "--dir", filepath.Join(dir, "nonexistent"))
	require.ErrorContains(t, err, "hook broken was not created: it did not start")
	require.ErrorContains(t, err, "working_dir")
	files, err := filepath.Glob(filepath.Join(dir, "connectors", "*hook-broken*"))
	require.NoError(t, err)
	require.Empty(t, files)
	require.NotContains(t, mustHook("list"), "broken")

	// Delete: gone from the list, from the runtime and from config_dir.
	require.Contains(t, mustHook("delete", "my-first-hook"), "hook my-first-hook deleted")
	out = mustHook("list")
	require.NotContains(t, out, "my-first-hook")
	require.Contains(t, out, "second")
	files, err = filepath.Glob(filepath.Join(dir, "connectors", "*hook-my-first-hook*"))
	require.NoError(t, err)
	require.Empty(t, files)
	if active, err := os.ReadFile(filepath.Join(dir, "connectors", config.ActiveVersionsFile)); err == nil {
		require.NotContains(t, string(active), "hook-my-first-hook")
	}
	live.send(t, "hooks", "my-topic", "after delete")
	live.send(t, "orders", "other-topic", "still handled")
	waitFor(t, "the second hook still runs", fileHas(filepath.Join(work, "second"), "1:still handled"))
	require.NotContains(t, read(t, filepath.Join(work, "received")), "after delete")

	// Restart the runtime: the deleted hook stays gone, the other comes back.
	live.stop()
	live = startLiveRuntime(t, dir)
	hook, mustHook = hookCLI(t, live)
	out = mustHook("list")
	require.NotContains(t, out, "my-first-hook")
	require.Regexp(t, `second\s+(running|starting)`, out)
	_, err = hook("get", "my-first-hook")
	require.ErrorContains(t, err, "does not exist")
	live.send(t, "orders", "other-topic", "after restart")
	waitFor(t, "the second hook runs after the restart", fileHas(filepath.Join(work, "second"), "2:after restart"))
	require.Equal(t, "0:to the second hook\n1:still handled\n2:after restart\n", read(t, filepath.Join(work, "second")),
		"each message once: the group's offsets survived the restart")
	require.NotContains(t, read(t, filepath.Join(work, "received")), "after delete")

	require.Contains(t, mustHook("delete", "second", "--json"), `"ok": true`)
	require.Contains(t, mustHook("list"), "no hooks")
}

// TestHookThroughTheLocalToken: a runtime without an API key still
// requires a credential, its local token; the user who runs it creates
// hooks with no key flag or variable (the CLI finds the token), the hook
// runs, and a wrong key or another user is refused with a reason.
func TestHookThroughTheLocalToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	live := startLiveRuntimeKey(t, dir, "")
	received := filepath.Join(dir, "received")
	out, err := ferry(t, "", "hook", "create", "local", "t", `printf '%s\n' {payload} >> `+received, "--api", live.url)
	require.NoError(t, err)
	require.Contains(t, out, "hook local created")
	live.send(t, "hooks", "t", "via the local token")
	waitFor(t, "the hook ran", fileHas(received, "via the local token"))

	out, err = ferry(t, "", "connectors", "restart", "hook-local", "--api", live.url)
	require.NoError(t, err)
	require.Regexp(t, `^sink hook-local restarted \(status (running|starting)\)`, out)
	_, err = ferry(t, "", "connectors", "restart", "nope", "--api", live.url)
	require.ErrorContains(t, err, `no connector "nope" (ferry status lists them)`)
	out, err = ferry(t, "", "hook", "get", "local", "--api", live.url)
	require.NoError(t, err)
	require.Contains(t, out, "messages:       1 consumed, 1 processed, 0 errors, 0 dead-lettered")
	require.Contains(t, out, "test message:   ferry message send hooks t 'hello from ferry' --address "+live.rt.IggyAddress())

	mark := filepath.Join(dir, "ran")
	_, err = ferry(t, "", "hook", "create", "h", "t", "touch "+mark, "--api", live.url, "--api-key", "guess")
	require.Error(t, err)
	require.Equal(t, 1, exitCode(err))
	require.ErrorContains(t, err, "refused the key from --api-key")
	require.NotContains(t, err.Error(), "\n")

	// Another user: its own configuration home has no token, and the
	// owner's cannot be read.
	if os.Geteuid() != 0 {
		t.Skip("running a command as another user needs root")
	}
	owners, err := os.UserConfigDir()
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "ferry.test")
	data, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	for d := filepath.Dir(bin); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	for _, home := range []string{t.TempDir(), owners} {
		require.NoError(t, os.Chmod(home, 0o777))
		args, _ := json.Marshal([]string{"hook", "create", "intruder", "t", "touch " + mark, "--api", live.url})
		cmd := exec.Command(bin)
		cmd.Env = []string{envRunCLI + "=" + string(args), "XDG_CONFIG_HOME=" + home, "HOME=/nonexistent", "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%s", out)
		require.Contains(t, string(out), "refused the request: no credential was sent", "config home %s", home)
		require.Contains(t, string(out), "run this command as that user")
	}
	files, err := filepath.Glob(filepath.Join(dir, "connectors", "*intruder*"))
	require.NoError(t, err)
	require.Empty(t, files)
	require.NoFileExists(t, mark)
}

func TestHookNeedsARuntime(t *testing.T) {
	t.Parallel()
	_, err := ferry(t, "", "hook", "list", "--api", "http://127.0.0.1:1")
	require.ErrorContains(t, err, "cannot reach the runtime API at http://127.0.0.1:1")
	_, err = ferry(t, "", "hook", "list", "--api", "ftp://x")
	require.Error(t, err)
	require.Equal(t, 2, exitCode(err))
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

func TestHookConfig(t *testing.T) {
	t.Parallel()
	o := &hookOptions{stream: "hooks", onError: "dead_letter", maxRetries: 3, concurrency: 1}
	b, err := o.config("h", "t", "echo {payload}")
	require.NoError(t, err)
	require.Equal(t, "exec", b.Path)
	require.Equal(t, map[string]any{"command": "echo {payload}"}, b.PluginConfig, "only what was asked; the sink has defaults")
	s := b.Streams[0]
	require.Equal(t, []string{"t"}, s.Topics)
	require.Equal(t, "raw", s.Schema, "any payload, not only JSON")
	require.Equal(t, uint32(1), s.BatchLength, "one message at a time: strict order across retries")
	require.Equal(t, "hook-h", s.ConsumerGroup)
	require.Equal(t, "dead_letter", s.OnError)

	o = &hookOptions{stream: "s", onError: "stop", concurrency: 3, dir: "rel/dir", timeout: "0", env: []string{"A=b=c"}}
	b, err = o.config("h", "t", "true")
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "rel/dir"), b.PluginConfig["working_dir"], "relative to the user, not the runtime")
	require.Equal(t, "0s", b.PluginConfig["timeout"])
	require.Equal(t, map[string]any{"A": "b=c"}, b.PluginConfig["env"])
	require.Equal(t, "none", b.PluginConfig["ordering"])
	require.Equal(t, uint32(3), b.Streams[0].BatchLength)

	_, err = (&hookOptions{stream: "s", onError: "stop", concurrency: 1, timeout: "soon"}).config("h", "t", "true")
	require.ErrorContains(t, err, "soon")
	require.Equal(t, 2, exitCode(err))
}
