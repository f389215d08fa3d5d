package httpsink

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

// startRuntime runs the real runtime (embedded broker) on a config
// directory holding one connector file.
func startRuntime(t *testing.T, connectorTOML string) *runtime.Runtime {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(
		"[iggy]\naddress = \"embedded\"\nembedded_address = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n[connectors]\nconfig_dir = \"connectors\"\n[http]\nenabled = false\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "connectors", "sink.toml"), []byte(connectorTOML), 0o644))
	env := config.WithEnv(config.MapEnv(nil))
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), env)
	require.NoError(t, err)
	rt, err := runtime.New(cfg, runtime.Options{ConfigOptions: []config.Option{env}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, rt.Start(ctx))
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	return rt
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClientErrorGoesToTheDeadLetterTopic runs the http sink in the real
// runtime: a 4xx answer dead-letters exactly the rejected messages (per
// message in individual mode, isolated by the runtime in ndjson mode)
// while the others are delivered.
func TestClientErrorGoesToTheDeadLetterTopic(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{ModeIndividual, ModeNDJSON} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, func(_ int, _ *http.Request, body []byte) (int, map[string]string) {
				if bytes.Contains(body, []byte("poison")) {
					return http.StatusUnprocessableEntity, nil
				}
				return http.StatusOK, nil
			})
			rt := startRuntime(t, fmt.Sprintf(`
type = "sink"
key = "webhook"
path = "libiggy_connector_http_sink"
[[streams]]
stream = "events"
topics = ["in"]
schema = "json"
max_retries = 5
retry_backoff = "5ms"
on_error = "dead_letter"
dead_letter_topic = "dlq"
[plugin_config]
url = %q
batch_mode = %q
include_metadata = false
retry_delay = "1ms"
`, srv.URL+"/hook", mode))
			admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
			require.NoError(t, err)
			defer admin.Close()
			var msgs []iggy.Message
			for i := range 10 {
				p := fmt.Sprintf(`{"n":%d}`, i)
				if i == 4 || i == 7 {
					p = fmt.Sprintf(`{"n":%d,"kind":"poison"}`, i)
				}
				msgs = append(msgs, iggy.Message{Payload: []byte(p)})
			}
			_, err = admin.SendMessages(context.Background(), iggy.NamedID("events"), iggy.NamedID("in"), iggy.ToPartition(0), msgs)
			require.NoError(t, err)

			var dead []iggy.Message
			eventually(t, "two dead letters", func() bool {
				reply, err := admin.PollMessages(context.Background(), iggy.SingleConsumer(iggy.NumericID(1)),
					iggy.NamedID("events"), iggy.NamedID("dlq"), iggy.Partition(0), iggy.First(), 10, false)
				if err != nil {
					return false
				}
				dead = reply.Messages
				return len(dead) >= 2
			})
			require.Len(t, dead, 2)
			for i, m := range dead {
				require.Contains(t, string(m.Payload), "poison")
				h, err := wire.ParseTLV(m.Headers)
				require.NoError(t, err)
				v, ok := wire.Lookup(h, runtime.HeaderDLQError)
				require.True(t, ok)
				require.Contains(t, v.String(), "422", "dead letter %d", i)
				off, _ := wire.Lookup(h, runtime.HeaderDLQOffset)
				require.Equal(t, []string{"4", "7"}[i], off.String())
			}
			delivered := map[string]bool{}
			for _, r := range srv.requests() {
				for _, line := range strings.Split(strings.TrimSpace(string(r.body)), "\n") {
					if !strings.Contains(line, "poison") {
						delivered[line] = true
					}
				}
			}
			for i := range 10 {
				if i != 4 && i != 7 {
					require.True(t, delivered[fmt.Sprintf(`{"n":%d}`, i)], "message %d delivered", i)
				}
			}
		})
	}
}
