package clickhouse

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/chtest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"

	_ "github.com/ferryhq/ferry/connectors/file" // the file source, for the crash test's child runtime
)

// TestRuntimeChild is the runtime process the crash test kills.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// upstreamTOML is upstream's README example for the ClickHouse sink,
// adapted only in the address, the database and the dead-letter policy.
func upstreamTOML(url, db, extra string) string {
	return fmt.Sprintf(`type = "sink"
key = "clickhouse"
enabled = true
version = 0
name = "ClickHouse sink"
path = "target/release/libiggy_connector_clickhouse_sink"

[[streams]]
stream = "example_stream"
topics = ["example_topic"]
schema = "json"
batch_length = 1000
poll_interval = "5ms"
consumer_group = "clickhouse_sink_connector"
%s
[plugin_config]
url = %q
database = %q
username = "default"
password = ""
table = "events"
insert_format = "json_each_row"
timeout_seconds = 30
max_retries = 3
retry_delay = 1  # seconds
verbose_logging = false
`, extra, url, db)
}

// The upstream file runs in both JSON formats (row_binary: the same file
// with insert_format changed, as upstream's README's RowBinary example),
// and a refused row is dead-lettered with the reason: ClickHouse's own
// for json_each_row, the encoder's, naming field and column type, for
// row_binary.
func TestUpstreamFileRunsAndDeadLettersARefusedRow(t *testing.T) {
	t.Parallel()
	for format, reason := range map[string][]string{
		"json_each_row": {"Cannot parse input"},
		"row_binary":    {`field "n"`, "column n UInt32", "not an integer"},
	} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			upstreamFileRuns(t, format, reason)
		})
	}
}

func upstreamFileRuns(t *testing.T, format string, reason []string) {
	db := chtest.Database(t)
	query(t, "CREATE TABLE "+db+".events (n UInt32, text String) ENGINE = MergeTree ORDER BY n")
	file := upstreamTOML(chtest.URL(t), db, "on_error = \"dead_letter\"\ndead_letter_topic = \"dlq\"\nretry_backoff = \"5ms\"")
	file = strings.Replace(file, `insert_format = "json_each_row"`, fmt.Sprintf("insert_format = %q", format), 1)
	run := connectortest.Start(t, map[string]string{"ch.toml": file})
	admin, err := iggy.Dial(context.Background(), run.Runtime.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var msgs []iggy.Message
	for i := range 10 {
		p := fmt.Sprintf(`{"n":%d,"text":"row %d"}`, i, i)
		if i == 6 {
			p = `{"n":"six","text":"refused"}`
		}
		msgs = append(msgs, iggy.Message{Payload: []byte(p)})
	}
	_, err = admin.SendMessages(context.Background(), iggy.NamedID("example_stream"), iggy.NamedID("example_topic"), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
	connectortest.Eventually(t, "9 rows", func() bool {
		return strings.TrimSpace(query(t, "SELECT count() FROM "+db+".events")) == "9"
	})
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
	for _, r := range reason {
		require.Contains(t, v.String(), r)
	}
}

// Ten kill -9 of the runtime mid-stream, file source → Iggy → ClickHouse
// (ReplacingMergeTree by the Iggy message id, which the file source
// keeps stable): every record arrives, once after FINAL.
func TestEveryRecordArrivesAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	db := chtest.Database(t)
	query(t, "CREATE TABLE "+db+".events (iggy_id String, n UInt32, text String) ENGINE = ReplacingMergeTree ORDER BY iggy_id")
	in := connectortest.NewFileInput(t, "example_stream", "example_topic", 50, func(n int) string { return fmt.Sprintf(`{"n":%d,"text":"line %d"}`, n, n) })
	sink := strings.Replace(upstreamTOML(chtest.URL(t), db, ""), "verbose_logging = false", "verbose_logging = false\nid_column = \"iggy_id\"", 1)
	sink = strings.Replace(sink, "batch_length = 1000", "batch_length = 50", 1)
	e := connectortest.NewCrashEnv(t, map[string]string{
		"ch.toml": sink,
		"in.toml": in.TOML,
	})
	write := func(int) error { return in.Append(10) }
	count := func(q string) int {
		out, err := chtest.Query(chtest.URL(t), q)
		if err != nil {
			return 0
		}
		v, _ := strconv.Atoi(strings.TrimSpace(out))
		return v
	}
	distinct := func() int { return count("SELECT uniqExact(n) FROM " + db + ".events") }
	stop := connectortest.Feed(t, 15*time.Millisecond, write)
	final := e.KillLoop(nil, 10, func() (int, int) { return distinct(), in.Written() })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := in.Written()
	connectortest.Eventually(t, "every record in the table", func() bool { return distinct() >= total })
	rows := count("SELECT count() FROM " + db + ".events FINAL")
	require.Equal(t, total, rows, "every record once after FINAL (ReplacingMergeTree by message id)")
	t.Logf("%d records, %d rows before FINAL, %d after, %d kills", total, count("SELECT count() FROM "+db+".events"), rows, e.Kills)
}
