package iceberg

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/pgtest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"

	_ "github.com/ferryhq/ferry/connectors/file" // the file source, for the crash test's child runtime
)

// TestRuntimeChild is the runtime process the crash test kills.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// upstreamTOML is upstream's README example for the Iceberg sink as a
// connector file, changed only in the addresses (uri, warehouse), in
// catalog_type (no REST catalog server runs here: Ferry's sql on
// PostgreSQL) and store_class (fs: the warehouse is a local directory),
// and with dynamic routing off (upstream's example turns it on with an
// add_fields transform; TestDynamicRoutingAndHostileNames covers it).
func upstreamTOML(dsn, warehouse, extra string) string {
	return fmt.Sprintf(`type = "sink"
key = "iceberg"
enabled = true
version = 0
name = "Iceberg sink"
path = "target/release/libiggy_connector_iceberg_sink"

[[streams]]
stream = "example_stream"
topics = ["example_topic"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "iceberg_sink_connector"
%s
[plugin_config]
tables = ["nyc.users"]
catalog_type = "sql"
warehouse = %q
uri = %q
dynamic_routing = false
dynamic_route_field = "db_table"
store_url = "http://localhost:9000"
store_access_key_id = "admin"
store_secret_access_key = "password"
store_region = "us-east-1"
store_class = "fs"
`, extra, warehouse, dsn)
}

func send(t *testing.T, addr, stream, topic string, payloads ...string) {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), addr, iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var msgs []iggy.Message
	for _, p := range payloads {
		msgs = append(msgs, iggy.Message{Payload: []byte(p)})
	}
	_, err = admin.SendMessages(context.Background(), iggy.NamedID(stream), iggy.NamedID(topic), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
}

// Upstream's connector file runs through the embedded broker; a record
// the table's schema refuses is dead-lettered with the reason.
func TestUpstreamFileRunsAndDeadLettersARefusedRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	createTable(t, e.cat, "nyc.users")
	run := connectortest.Start(t, map[string]string{"iceberg.toml": upstreamTOML(e.dsn, e.warehouse,
		"on_error = \"dead_letter\"\ndead_letter_topic = \"dlq\"\nretry_backoff = \"5ms\"")})
	var ps []string
	for i := range 10 {
		p := fmt.Sprintf(`{"n":%d,"text":"row %d"}`, i, i)
		if i == 6 {
			p = `{"n":"six","text":"refused"}`
		}
		ps = append(ps, p)
	}
	send(t, run.Runtime.IggyAddress(), "example_stream", "example_topic", ps...)
	connectortest.Eventually(t, "9 rows", func() bool { return len(readRows(t, e.cat, "nyc.users")) == 9 })
	admin, err := iggy.Dial(context.Background(), run.Runtime.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var dead []iggy.Message
	connectortest.Eventually(t, "a dead letter", func() bool {
		r, err := admin.PollMessages(context.Background(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("example_stream"), Topic: iggy.NamedID("dlq"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
		if err != nil {
			return false
		}
		dead = r.Messages
		return len(dead) == 1
	})
	require.Equal(t, `{"n":"six","text":"refused"}`, string(dead[0].Payload))
	v, ok := header.Get(dead[0].Headers, runtime.HeaderDLQError)
	require.True(t, ok)
	require.Contains(t, v.String(), "does not fit the table's schema")
	require.Equal(t, 9, len(readRows(t, e.cat, "nyc.users")))
}

// Ten kill -9 of the runtime mid-stream, file source → Iggy → Iceberg:
// every record is in the table exactly once (read back with an
// iceberg-go scan), since a batch replayed after a kill is skipped by
// the offsets in the snapshot summary.
func TestEveryRecordOnceAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	e := newEnv(t)
	createTable(t, e.cat, "nyc.users")
	in := connectortest.NewFileInput(t, "example_stream", "example_topic", 50, func(n int) string { return fmt.Sprintf(`{"n":%d,"text":"line %d"}`, n, n) })
	sink := strings.Replace(upstreamTOML(e.dsn, e.warehouse, ""), "batch_length = 100", "batch_length = 50", 1)
	ce := connectortest.NewCrashEnv(t, map[string]string{
		"iceberg.toml": sink,
		"in.toml":      in.TOML,
	})
	write := func(int) error { return in.Append(10) }
	count := func() int {
		tbl, err := e.cat.LoadTable(context.Background(), []string{"nyc", "users"})
		if err != nil {
			return 0
		}
		return len(scanRows(t, context.Background(), tbl))
	}
	stop := connectortest.Feed(t, 15*time.Millisecond, write)
	// The first kill lands once rows arrive; later ones may land while a
	// runtime starts, opens or commits.
	first := ce.Start()
	connectortest.Eventually(t, "the first rows", func() bool { return count() > 0 })
	final := ce.KillLoop(first, 10, func() (int, int) { return count(), in.Written() })
	defer ce.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := in.Written()
	connectortest.Eventually(t, "every record in the table", func() bool { return count() >= total })
	// The file source is at-least-once: a kill between its send and its
	// state save puts lines in the topic twice, at new offsets. The sink
	// is exactly-once from the topic: the table holds each message of the
	// topic once.
	var inTopic []int64
	for _, m := range ce.Topic("example_stream", "example_topic") {
		var v struct{ N int64 }
		require.NoError(t, json.Unmarshal(m.Payload, &v))
		inTopic = append(inTopic, v.N)
	}
	slices.Sort(inTopic)
	rows := readRows(t, e.cat, "nyc.users")
	got := make([]int64, len(rows))
	for i, r := range rows {
		got[i] = r.N
	}
	require.Equal(t, inTopic, got, "the table holds every message of the topic exactly once")
	seen := map[int64]bool{}
	for _, n := range got {
		seen[n] = true
	}
	for i := range int64(total) {
		require.True(t, seen[i], "record %d was lost", i)
	}
	t.Logf("%d records, %d messages in the topic (the source repeated %d), %d rows, %d snapshots, %d kills",
		total, len(inTopic), len(inTopic)-total, len(rows), snapshotCount(t, e.cat, "nyc.users"), ce.Kills)
}

// PostgreSQL (the catalog) goes down mid-stream and comes back: the
// sink fails as Unavailable, the runtime restarts it with backoff, and
// every record sent meanwhile arrives once.
func TestCatalogOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and starts a PostgreSQL of its own")
	}
	t.Parallel()
	cluster := pgtest.Private(t)
	e := newEnvOn(t, cluster.DSN)
	createTable(t, e.cat, "nyc.users")
	run := connectortest.Start(t, map[string]string{"iceberg.toml": upstreamTOML(cluster.DSN, e.warehouse, "retry_backoff = \"5ms\"")})
	send(t, run.Runtime.IggyAddress(), "example_stream", "example_topic", `{"n":0}`, `{"n":1}`)
	connectortest.Eventually(t, "2 rows", func() bool { return len(readRows(t, e.cat, "nyc.users")) == 2 })

	ctx := context.Background()
	require.NoError(t, cluster.Halt(ctx))
	var during []string
	for i := 2; i < 12; i++ {
		during = append(during, fmt.Sprintf(`{"n":%d}`, i))
	}
	send(t, run.Runtime.IggyAddress(), "example_stream", "example_topic", during...)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	require.NoError(t, cluster.Resume(ctx))
	// The runtime restarts a sink with backoff of up to a minute: wait
	// longer than that (a liveness bound).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		tbl, err := e.cat.LoadTable(ctx, []string{"nyc", "users"})
		if err == nil && len(scanRows(t, ctx, tbl)) >= 12 {
			break
		}
		if time.Now().After(deadline) {
			for _, info := range run.Runtime.Connectors(connector.KindSink) {
				t.Logf("sink %s: %s, %d restarts, last error %q", info.Key, info.Status, info.Restarts, info.LastError)
			}
			t.Fatal("the records sent during the outage did not arrive")
		}
		time.Sleep(100 * time.Millisecond)
	}
	rows := readRows(t, e.cat, "nyc.users")
	require.Len(t, rows, 12, "every record once")
	for i, r := range rows {
		require.Equal(t, int64(i), r.N)
	}
}
