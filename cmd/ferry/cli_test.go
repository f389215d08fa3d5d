package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/stretchr/testify/require"
)

// ferry runs the CLI in-process with args and returns stdout and the error.
func ferry(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestAdminCommands(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	addr := "--address=" + b.Addr()
	run := func(stdin string, args ...string) string {
		t.Helper()
		out, err := ferry(t, stdin, append(args, addr)...)
		require.NoError(t, err, "ferry %v", args)
		return out
	}

	require.Contains(t, run("", "ping"), "pong from "+b.Addr())
	require.Contains(t, run("", "stream", "create", "example_stream"), `stream "example_stream" created with id 0`)
	require.Contains(t, run("", "topic", "create", "example_stream", "example_topic", "2", "none", "1d"), "2 partitions")
	require.Contains(t, run("", "message", "send", "example_stream", "example_topic", "--partition", "1", "hello", "world"), "sent 2 message(s)")
	require.Contains(t, run("line one\nline two\n", "message", "send", "example_stream", "example_topic", "--partition", "1"), "from offset 2")

	out := run("", "message", "poll", "example_stream", "example_topic", "1", "--first", "--count", "3")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	require.Contains(t, lines[0], "offset 0")
	require.True(t, strings.HasSuffix(lines[0], "hello"), lines[0])
	require.True(t, strings.HasSuffix(lines[2], "line one"), lines[2])

	var polled struct {
		Partition uint32
		Messages  []struct {
			Offset  uint64
			ID      string
			Payload string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(run("", "message", "poll", "example_stream", "example_topic", "1", "--offset", "3", "--json")), &polled))
	require.Equal(t, uint32(1), polled.Partition)
	require.Len(t, polled.Messages, 1)
	require.Equal(t, "line two", polled.Messages[0].Payload)
	require.Len(t, polled.Messages[0].ID, 36, "the zero id was replaced by a UUID")

	// --next with --commit moves a named consumer along.
	run("", "message", "poll", "example_stream", "example_topic", "1", "--next", "--count", "2", "--consumer", "reader", "--commit")
	out = run("", "message", "poll", "example_stream", "example_topic", "1", "--next", "--consumer", "reader")
	require.True(t, strings.HasPrefix(out, "offset 2 "), out)

	var topics []map[string]any
	require.NoError(t, json.Unmarshal([]byte(run("", "topic", "list", "example_stream", "--json")), &topics))
	require.Equal(t, "example_topic", topics[0]["name"])
	require.Equal(t, "24h0m0s", topics[0]["message_expiry"])
	require.Contains(t, run("", "topic", "get", "example_stream", "example_topic"), "PARTITION")
	require.Contains(t, run("", "stream", "get", "example_stream"), "example_topic")
	require.Contains(t, run("", "topic", "delete", "example_stream", "example_topic"), "deleted")
	require.Contains(t, run("", "stream", "delete", "0"), "deleted")
	require.NotContains(t, run("", "stream", "list"), "example_stream")
}

func TestAdminErrors(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	addr := "--address=" + b.Addr()
	for i, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"ping", "--password", "wrong"}, "invalid credentials", 1},
		{[]string{"stream", "get", "missing"}, "stream not found", 1},
		{[]string{"topic", "create", "s", "t", "x", "none"}, `PARTITIONS "x" is not a number`, 2},
		{[]string{"topic", "create", "s", "t", "1", "zstd"}, "use none or gzip", 2},
		{[]string{"topic", "create", "s", "t", "1", "none", "soon"}, `EXPIRY "soon"`, 2},
		{[]string{"message", "send", "s", "t", "--partition", "1", "--key", "k", "m"}, "cannot be used together", 2},
		{[]string{"message", "poll", "s", "t", "0", "--first", "--last"}, "only one of", 2},
	} {
		_, err := ferry(t, "", append(tc.args, addr)...)
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), tc.want, "case %d", i)
		require.Equal(t, tc.code, exitCode(err), "case %d", i)
	}
	// A URL carries the credentials; they never appear in errors.
	_, err := ferry(t, "", "ping", "--address", "iggy://iggy:s3cret-pw@"+b.Addr())
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret-pw")
	out, err := ferry(t, "", "ping", "--address", "iggy://iggy:iggy@"+b.Addr())
	require.NoError(t, err)
	require.Contains(t, out, "pong")
}

// Secrets in the environment never show in --help (cobra prints defaults).
func TestHelpHidesSecretsFromTheEnvironment(t *testing.T) {
	t.Setenv("IGGY_PASSWORD", "hunter2-secret")
	t.Setenv("IGGY_TOKEN", "tok-SECRET")
	t.Setenv("IGGY_ADDRESS", "iggy://iggy:addr-SECRET@127.0.0.1:1")
	t.Setenv("FERRY_API_KEY", "key-SECRET")
	for _, args := range [][]string{{"ping", "--help"}, {"message", "send", "--help"}, {"hook", "list", "--help"}} {
		out, err := ferry(t, "", args...)
		require.NoError(t, err)
		require.NotContains(t, out, "SECRET", "ferry %v", args)
		require.NotContains(t, out, "hunter2", "ferry %v", args)
	}
}

// The environment's credentials are used when no flag is given.
func TestCredentialsFromTheEnvironment(t *testing.T) {
	b := brokertest.Start(t, brokertest.InMemory())
	t.Setenv("IGGY_ADDRESS", b.Addr())
	t.Setenv("IGGY_PASSWORD", "wrong")
	_, err := ferry(t, "", "ping")
	require.ErrorContains(t, err, "invalid credentials")
	t.Setenv("IGGY_PASSWORD", "iggy")
	out, err := ferry(t, "", "ping")
	require.NoError(t, err)
	require.Contains(t, out, "pong")
}

// A very long expiry goes to the server in microseconds, not through a
// time.Duration that would overflow into "never".
func TestLongExpiry(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	addr := "--address=" + b.Addr()
	_, err := ferry(t, "", "stream", "create", "s", addr)
	require.NoError(t, err)
	_, err = ferry(t, "", "topic", "create", "s", "t", "1", "none", "400years", addr)
	require.ErrorContains(t, err, "overflows", "beyond what a duration holds: a clear error")
	_, err = ferry(t, "", "topic", "create", "s", "t", "1", "none", "10000000000000000", addr) // µs, 317 years
	require.NoError(t, err)
	out, err := ferry(t, "", "topic", "list", "s", "--json", addr)
	require.NoError(t, err)
	require.Contains(t, out, `"message_expiry": "115740d"`)
}
