package exec_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

// startRuntime runs the real runtime on the embedded broker with one
// connector file in dir; the exec sink is in connector.Default (this
// package's init registered it).
func startRuntime(t *testing.T, dir, connectorTOML string) *runtime.Runtime {
	t.Helper()
	return connectortest.Start(t, map[string]string{"hook.toml": connectorTOML}, connectortest.WithDir(dir)).Runtime
}

func TestFailingCommandIsRetriedThenDeadLettered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	rt := startRuntime(t, dir, `
type = "sink"
key = "hook-fail"
path = "exec"

[[streams]]
stream = "orders"
topics = ["created"]
schema = "raw"
batch_length = 1
max_retries = 2
retry_backoff = "10ms"
on_error = "dead_letter"
dead_letter_topic = "created_failed"

[plugin_config]
working_dir = "`+work+`"
command = """
printf '%s\n' {payload} >> attempts
case {payload} in poison*) echo "cannot process {offset}" >&2; exit 7;; esac
printf '%s\n' {payload} >> done
"""
`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := iggy.Dial(ctx, rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	eventually(t, "the hook is running", func() bool {
		i, err := rt.Connector("sink", "hook-fail")
		return err == nil && i.Status == runtime.StatusRunning
	})
	msgs := []iggy.Message{{Payload: []byte("first")}, {Payload: []byte("poison; touch pwned")}, {Payload: []byte("third")}}
	_, err = cl.SendMessages(ctx, iggy.NamedID("orders"), iggy.NamedID("created"), iggy.Balanced(), msgs)
	require.NoError(t, err)

	eventually(t, "the third message ran", func() bool {
		data, _ := os.ReadFile(filepath.Join(work, "done"))
		return strings.Contains(string(data), "third")
	})
	require.Equal(t, "first\nthird\n", read(t, filepath.Join(work, "done")))
	require.Equal(t, "first\npoison; touch pwned\npoison; touch pwned\npoison; touch pwned\nthird\n",
		read(t, filepath.Join(work, "attempts")), "one run, then max_retries = 2 more, then the dead-letter topic")
	require.NoFileExists(t, filepath.Join(work, "pwned"))

	var dead []iggy.Message
	eventually(t, "the poison message in the dead-letter topic", func() bool {
		r, err := cl.PollMessages(ctx, iggy.PollRequest{
			Consumer: iggy.SingleConsumer(iggy.NamedID("test")), Stream: iggy.NamedID("orders"), Topic: iggy.NamedID("created_failed"),
			Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10,
		})
		if err != nil {
			return false
		}
		dead = r.Messages
		return len(dead) > 0
	})
	require.Len(t, dead, 1)
	require.Equal(t, "poison; touch pwned", string(dead[0].Payload))
	require.Equal(t, msgs[1].ID, dead[0].ID, "the original id")
	h := dead[0].Headers
	header := func(k string) string {
		v, ok := wire.Lookup(h, k)
		require.True(t, ok, "header %s", k)
		return v.String()
	}
	require.Equal(t, "orders", header(runtime.HeaderDLQStream))
	require.Equal(t, "created", header(runtime.HeaderDLQTopic))
	require.Equal(t, "1", header(runtime.HeaderDLQOffset))
	require.Equal(t, "hook-fail", header(runtime.HeaderDLQConnector))
	require.Equal(t, "exit status 7: cannot process 1", header(runtime.HeaderDLQError))

	i, err := rt.Connector("sink", "hook-fail")
	require.NoError(t, err)
	require.Equal(t, runtime.StatusRunning, i.Status, "a dead-lettered message does not stop the hook")
}
