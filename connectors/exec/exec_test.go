package exec_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/exec"
	"github.com/stretchr/testify/require"
)

// newSink builds an exec sink with plugin_config values, working in dir,
// logging into logs (when not nil).
func newSink(t *testing.T, dir string, values map[string]any, logs *connectortest.Output) connector.Sink {
	t.Helper()
	if _, ok := values["working_dir"]; !ok {
		values["working_dir"] = dir
	}
	cfg := connector.Config{Key: "hook-test", Plugin: connector.PluginConfig{Values: values, Source: "test.toml"}}
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	s, err := exec.New(cfg)
	require.NoError(t, err)
	require.NoError(t, s.Open(context.Background()))
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	return s
}

// batch makes a batch of one partition with the payloads, from offset 0.
func batch(partition uint32, payloads ...string) *connector.SinkBatch {
	b := &connector.SinkBatch{Stream: "orders", Topic: "created", Partition: partition, Schema: connector.SchemaRaw}
	for i, p := range payloads {
		b.Messages = append(b.Messages, connector.Message{Stream: b.Stream, Topic: b.Topic, Partition: partition,
			Offset: uint64(i), Payload: []byte(p), ID: [16]byte{15: byte(i + 1)},
			Timestamp: time.UnixMicro(1_700_000_000_000_000 + int64(i))})
	}
	return b
}

func consume(t *testing.T, s connector.Sink, b *connector.SinkBatch) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return s.Consume(ctx, b)
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

func TestCommandReceivesEachPayload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newSink(t, dir, map[string]any{"command": `printf '%s\n' {payload} >> received.txt`}, nil)
	require.NoError(t, consume(t, s, batch(0, `{"order":1}`, `{"order":2}`, "plain text")))
	require.NoError(t, consume(t, s, batch(0, "fourth")))
	require.Equal(t, "{\"order\":1}\n{\"order\":2}\nplain text\nfourth\n", read(t, filepath.Join(dir, "received.txt")))
}

func TestPayloadIsPassedAsData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	require.NoError(t, os.Mkdir(victim, 0o755))
	pwned := filepath.Join(dir, "pwned")
	payloads := []string{
		"; rm -rf " + victim,
		"$(touch " + pwned + ")",
		"`touch " + pwned + "`",
		`'; touch ` + pwned + `; echo '`,
		`"; touch ` + pwned + `; echo "`,
		"first line\ntouch " + pwned + "\nlast line",
		`$HOME * ? [a] ~ \ "quoted" 'single' && || | > < & #`,
	}
	for i, command := range []string{
		`printf '%s' {payload} > "out.$FERRY_OFFSET"`,
		`printf '%s' "{payload}" > "out.$FERRY_OFFSET"`,
		`printf '%s' '{payload}' > "out.$FERRY_OFFSET"`,
		`cd .; echo ignored >/dev/null; printf '%s' "$(printf '%s' {payload})" > "out.$FERRY_OFFSET"`,
	} {
		sub := filepath.Join(dir, strconv.Itoa(i))
		require.NoError(t, os.Mkdir(sub, 0o755))
		s := newSink(t, sub, map[string]any{"command": command}, nil)
		require.NoError(t, consume(t, s, batch(0, payloads...)), "command %d", i)
		for j, p := range payloads {
			require.Equal(t, p, read(t, filepath.Join(sub, fmt.Sprintf("out.%d", j))), "command %d payload %d", i, j)
		}
	}
	require.NoFileExists(t, pwned)
	require.DirExists(t, victim)
}

func TestStdinCarriesThePayload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newSink(t, dir, map[string]any{"command": `cat > "in.$FERRY_OFFSET"`}, nil)
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB: more than a pipe holds and an env var carries
	b := batch(0, "hello\nworld", "with\x00nul\xff bytes", big)
	require.NoError(t, consume(t, s, b))
	for i, m := range b.Messages {
		require.Equal(t, string(m.Payload), read(t, filepath.Join(dir, fmt.Sprintf("in.%d", i))), "message %d", i)
	}
}

func TestPayloadsAnEnvironmentCannotCarry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newSink(t, dir, map[string]any{"command": `echo {payload} > out`}, nil)
	err := consume(t, s, batch(0, "a\x00b", strings.Repeat("x", 200<<10)))
	var per connector.MessageErrors
	require.ErrorAs(t, err, &per)
	require.Len(t, per, 2)
	require.ErrorContains(t, per[0], "NUL byte")
	require.ErrorContains(t, per[1], "more than an environment variable can carry")
	require.True(t, connector.IsPermanent(err), "retrying cannot help")
	require.NoFileExists(t, filepath.Join(dir, "out"))
}

func TestVariablesEnvironmentAndDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newSink(t, dir, map[string]any{
		"command": `printf '%s|%s|%s|%s|%s|%s|%s|%s\n' {stream} {topic} {partition} {offset} {id} {timestamp} "$APP_ENV" "$(pwd)" > out`,
		"env":     map[string]any{"APP_ENV": "production"},
	}, nil)
	require.NoError(t, consume(t, s, batch(3, "x")))
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	require.Equal(t, "orders|created|3|0|00000000-0000-0000-0000-000000000001|1700000000000000|production|"+real+"\n",
		read(t, filepath.Join(dir, "out")))
}

func TestFailuresNameTheirMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := &connectortest.Output{}
	s := newSink(t, dir, map[string]any{
		"command": `if [ {payload} = bad ]; then echo "cannot handle it" >&2; exit 3; fi; echo {payload} >> done`,
	}, logs)
	err := consume(t, s, batch(0, "good", "bad", "fine"))
	var per connector.MessageErrors
	require.ErrorAs(t, err, &per)
	require.Len(t, per, 1)
	require.EqualError(t, per[1], "exit status 3: cannot handle it")
	require.False(t, connector.IsPermanent(err), "a failed command is retried")
	require.Equal(t, "good\nfine\n", read(t, filepath.Join(dir, "done")), "the others ran, in order")
	require.Contains(t, logs.String(), "command failed")
	require.Contains(t, logs.String(), "offset=1")

	s = newSink(t, dir, map[string]any{"command": `kill -TERM $$`}, nil)
	err = consume(t, s, batch(0, "x"))
	require.ErrorAs(t, err, &per)
	require.EqualError(t, per[0], "killed by signal terminated")
}

func TestTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newSink(t, dir, map[string]any{
		"command": `sleep 300 & echo $! > child.pid; sleep 300`,
		"timeout": "300ms",
	}, nil)
	err := consume(t, s, batch(0, "x"))
	var per connector.MessageErrors
	require.ErrorAs(t, err, &per)
	require.ErrorContains(t, per[0], "timed out after 300ms; its process group was killed")
	pid, err := strconv.Atoi(strings.TrimSpace(read(t, filepath.Join(dir, "child.pid"))))
	require.NoError(t, err)
	eventually(t, "the background child is gone", func() bool { return !alive(pid) })
}

func TestStopKillsTheRunningCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newSink(t, dir, map[string]any{"command": `echo $$ > shell.pid; touch started; sleep 300`}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Consume(ctx, batch(0, "x")) }()
	eventually(t, "the command started", func() bool { _, err := os.Stat(filepath.Join(dir, "started")); return err == nil })
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	pid, err := strconv.Atoi(strings.TrimSpace(read(t, filepath.Join(dir, "shell.pid"))))
	require.NoError(t, err)
	eventually(t, "the shell is gone", func() bool { return !alive(pid) })
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestOrderedPerPartitionWithConcurrency(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Both partitions must be running at once for either first message to
	// go on (a liveness barrier, bounded by the timeout); within a
	// partition, earlier offsets sleep longer, so any overlap would
	// reorder the log.
	s := newSink(t, dir, map[string]any{
		"command": `touch started.{partition}
until [ -e started.0 ] && [ -e started.1 ]; do sleep 0.01; done
sleep 0.0$(( 9 - {offset} ))
echo {offset} >> p{partition}.log`,
		"concurrency": 4,
		"timeout":     "30s",
	}, nil)
	payloads := make([]string, 10)
	for i := range payloads {
		payloads[i] = "m" + strconv.Itoa(i)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[p] = consume(t, s, batch(uint32(p), payloads...))
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	want := "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n"
	require.Equal(t, want, read(t, filepath.Join(dir, "p0.log")))
	require.Equal(t, want, read(t, filepath.Join(dir, "p1.log")))
}

func TestUnorderedRunsABatchInParallel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newSink(t, dir, map[string]any{
		"command":     `touch s.{offset}; until [ -e s.0 ] && [ -e s.1 ] && [ -e s.2 ]; do sleep 0.01; done; echo {offset} > done.{offset}`,
		"concurrency": 3,
		"ordering":    "none",
		"timeout":     "30s",
	}, nil)
	require.NoError(t, consume(t, s, batch(0, "a", "b", "c")))
	for i := range 3 {
		require.FileExists(t, filepath.Join(dir, fmt.Sprintf("done.%d", i)))
	}
}

func TestOutputIsLoggedAndBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := &connectortest.Output{}
	s := newSink(t, dir, map[string]any{
		"command":      `i=0; while [ $i -lt 1000 ]; do printf 0123456789; i=$((i+1)); done; echo to-stderr >&2`,
		"output_limit": 100,
	}, logs)
	require.NoError(t, consume(t, s, batch(0, "x")))
	out := logs.String()
	require.Contains(t, out, "command ran")
	require.Contains(t, out, strings.Repeat("0123456789", 10)+" … [cut: 10000 bytes in all]")
	require.NotContains(t, out, strings.Repeat("0123456789", 11))
	require.Contains(t, out, "stderr=\"to-stderr\\n\"")

	quiet := &connectortest.Output{}
	require.NoError(t, consume(t, newSink(t, dir, map[string]any{"command": "true"}, quiet), batch(0, "x")))
	require.Empty(t, quiet.String(), "a silent success logs nothing")
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{}, "test.toml: plugin_config.command: required key is missing; expected a string"},
		{map[string]any{"command": "  "}, "test.toml: plugin_config.command: expected a command, got an empty string"},
		{map[string]any{"command": "echo `echo {payload}`"}, "test.toml: plugin_config.command: command: placeholder {payload} is inside backquotes"},
		{map[string]any{"command": "echo 'x"}, "unterminated single quote"},
		{map[string]any{"command": "true", "ordering": "random"}, `test.toml: plugin_config.ordering: expected one of "partition", "none", got "random"`},
		{map[string]any{"command": "true", "concurrency": int64(-1)}, "test.toml: plugin_config.concurrency: expected an integer from 1 to 1024, got -1"},
		{map[string]any{"command": "true", "timeout": "soon"}, `test.toml: plugin_config.timeout: expected a duration such as "5s", "250ms" or "1h 30m", got "soon"`},
		{map[string]any{"command": "true", "timeout": int64(-5)}, "test.toml: plugin_config.timeout: expected a duration"},
		{map[string]any{"command": "true", "output_limit": int64(-1)}, "test.toml: plugin_config.output_limit: expected an integer from 1 to 1048576, got -1"},
		{map[string]any{"command": "true", "env": map[string]any{"FERRY_PAYLOAD": "x"}}, "test.toml: plugin_config.env.FERRY_PAYLOAD: FERRY_PAYLOAD is set by Ferry"},
		{map[string]any{"command": "true", "env": map[string]any{"A=B": "x"}}, "without '='"},
		{map[string]any{"command": "true", "env": map[string]any{"N": int64(1)}}, "test.toml: plugin_config.env.N: expected a string, got an integer (1)"},
		{map[string]any{"command": "true", "workingdir": "/"}, `test.toml: plugin_config.workingdir: unknown key; did you mean "working_dir"?`},
		{map[string]any{"command": "true", "cwd": "/"}, "test.toml: plugin_config.cwd: unknown key; allowed keys here: command, concurrency, env, ordering, output_limit, pass_env, shell, timeout, working_dir"},
	} {
		_, err := exec.New(connector.Config{Plugin: connector.PluginConfig{Values: tc.values, Source: "test.toml"}})
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), tc.want, "case %d", i)
	}
}

func TestOpenChecksShellAndDirectory(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"command": "true", "shell": "/nonexistent/sh"}, `exec: shell "/nonexistent/sh"`},
		{map[string]any{"command": "true", "working_dir": "/nonexistent/dir"}, "exec: working_dir"},
	} {
		s, err := exec.New(connector.Config{Plugin: connector.PluginConfig{Values: tc.values}})
		require.NoError(t, err, "case %d", i)
		require.ErrorContains(t, s.Open(context.Background()), tc.want, "case %d", i)
	}
	s, err := exec.New(connector.Config{Plugin: connector.PluginConfig{Values: map[string]any{"command": "true", "shell": "bash"}}})
	require.NoError(t, err)
	require.NoError(t, s.Open(context.Background()), "a shell on PATH")
	require.NoError(t, s.Close(context.Background()))
	require.NoError(t, s.Close(context.Background()), "Close is idempotent")
	require.Error(t, s.Consume(context.Background(), batch(0, "x")), "a closed sink runs nothing")
}

// eventually waits for cond (connectortest.Eventually).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	connectortest.Eventually(t, what, cond)
}

// TestSecretsStayWithTheRuntime: the runtime's Ferry and Iggy secrets do
// not reach commands unless pass_env names them. Not parallel: it sets
// the process environment.
func TestSecretsStayWithTheRuntime(t *testing.T) {
	secrets := map[string]string{
		"IGGY_CONNECTORS_SINK_X_PLUGIN_CONFIG_PASSWORD": "conn-secret-1",
		"IGGY_CONNECTORS_HTTP_API_KEY":                  "api-secret-2",
		"IGGY_PASSWORD":                                 "iggy-secret-3",
		"IGGY_TOKEN":                                    "token-secret-4",
		"IGGY_ROOT_PASSWORD":                            "root-secret-5",
		"FERRY_API_KEY":                                 "ferry-secret-6",
		"FERRY_ANYTHING":                                "ferry-secret-7",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("APP_SETTING", "visible-8")
	dir := t.TempDir()
	s := newSink(t, dir, map[string]any{"command": `env > env.out`, "env": map[string]any{"FROM_CONFIG": "visible-9"}}, nil)
	require.NoError(t, consume(t, s, batch(0, "x")))
	got := read(t, filepath.Join(dir, "env.out"))
	for k, v := range secrets {
		require.NotContains(t, got, v, "%s reached the command", k)
	}
	require.Contains(t, got, "APP_SETTING=visible-8\n", "the rest of the environment is passed")
	require.Contains(t, got, "FROM_CONFIG=visible-9\n")
	require.Contains(t, got, "FERRY_PAYLOAD=x\n", "the placeholders' variables are set")

	// pass_env: by name and by prefix.
	s = newSink(t, dir, map[string]any{"command": `env > env2.out`,
		"pass_env": []any{"IGGY_TOKEN", "IGGY_CONNECTORS_SINK_X_*"}}, nil)
	require.NoError(t, consume(t, s, batch(0, "x")))
	got = read(t, filepath.Join(dir, "env2.out"))
	require.Contains(t, got, "IGGY_TOKEN=token-secret-4\n")
	require.Contains(t, got, "IGGY_CONNECTORS_SINK_X_PLUGIN_CONFIG_PASSWORD=conn-secret-1\n")
	for _, k := range []string{"IGGY_CONNECTORS_HTTP_API_KEY", "IGGY_PASSWORD", "IGGY_ROOT_PASSWORD", "FERRY_API_KEY"} {
		require.NotContains(t, got, secrets[k], "%s was not asked for", k)
	}
	s = newSink(t, dir, map[string]any{"command": `env > env3.out`, "pass_env": []any{"*"}}, nil)
	require.NoError(t, consume(t, s, batch(0, "x")))
	got = read(t, filepath.Join(dir, "env3.out"))
	for _, v := range secrets {
		require.Contains(t, got, v, `["*"] passes everything`)
	}

	for i, bad := range []any{"", "A=B", "*X", "A\x00", "A**"} {
		_, err := exec.New(connector.Config{Key: "k", Plugin: connector.PluginConfig{Source: "t.toml",
			Values: map[string]any{"command": "true", "pass_env": []any{"OK", bad}}}})
		require.ErrorContains(t, err, "t.toml: plugin_config.pass_env[1]", "case %d %q", i, bad)
	}
}
