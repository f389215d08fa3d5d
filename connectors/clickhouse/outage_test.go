package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/chtest"
	"github.com/stretchr/testify/require"
)

// A ClickHouse that is down for a while (killed as a crash kills it, then
// started again on its data): the sink notices, restarts with backoff, and
// every message sent meanwhile arrives, once.
func TestSinkSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a ClickHouse of its own")
	}
	t.Parallel()
	srv := chtest.Server.Private(t)
	q := func(s string) string {
		out, err := chtest.Query(srv.URL, s)
		require.NoError(t, err)
		return strings.TrimSpace(out)
	}
	q("CREATE DATABASE outage")
	q("CREATE TABLE outage.events (iggy_id String, n UInt32, text String) ENGINE = ReplacingMergeTree ORDER BY iggy_id")
	file := strings.Replace(upstreamTOML(srv.URL, "outage", `retry_backoff = "5ms"`), "verbose_logging = false",
		"verbose_logging = false\nid_column = \"iggy_id\"", 1)
	run := connectortest.Start(t, map[string]string{"ch.toml": file})
	admin, err := iggy.Dial(context.Background(), run.Runtime.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	send := func(from, to int) {
		var msgs []iggy.Message
		for i := from; i < to; i++ {
			msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, `{"n":%d,"text":"row %d"}`, i, i)})
		}
		_, err := admin.SendMessages(context.Background(), iggy.NamedID("example_stream"), iggy.NamedID("example_topic"), iggy.ToPartition(0), msgs)
		require.NoError(t, err)
	}
	count := func() string {
		out, err := chtest.Query(srv.URL, "SELECT count() FROM outage.events FINAL")
		if err != nil {
			return ""
		}
		return strings.TrimSpace(out)
	}
	send(0, 2)
	connectortest.Eventually(t, "the first rows", func() bool { return count() == "2" })

	srv.Halt()
	send(2, 12)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	// The runtime restarts a sink with backoff of up to a minute, so its
	// next try may come that long after the server is back (a liveness
	// bound, not a timing).
	deadline := time.Now().Add(3 * time.Minute)
	for count() != "12" {
		if time.Now().After(deadline) {
			t.Fatalf("%s rows after the outage, want 12; sink %+v", count(), run.Runtime.Connectors(connector.KindSink))
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, "12", q("SELECT uniqExact(n) FROM outage.events"), "every message")
}
