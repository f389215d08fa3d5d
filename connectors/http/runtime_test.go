package httpsink

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

// startRuntime runs the real runtime (embedded broker) with one
// connector file.
func startRuntime(t *testing.T, connectorTOML string) *runtime.Runtime {
	t.Helper()
	return connectortest.Start(t, map[string]string{"sink.toml": connectorTOML}).Runtime
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	connectortest.Eventually(t, what, cond)
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
				reply, err := admin.PollMessages(context.Background(), iggy.PollRequest{
					Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("events"), Topic: iggy.NamedID("dlq"),
					Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10,
				})
				if err != nil {
					return false
				}
				dead = reply.Messages
				return len(dead) >= 2
			})
			require.Len(t, dead, 2)
			for i, m := range dead {
				require.Contains(t, string(m.Payload), "poison")
				h := m.Headers
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
