package mysql

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/mysqltest"
	"github.com/stretchr/testify/require"
)

// TestRuntimeChild is the runtime process the crash tests kill.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9 of the runtime mid-stream, Iggy → MySQL: every message sent
// to Iggy is in the table exactly once. The table's key is the message
// id, so a batch delivered again after a kill adds nothing.
func TestSinkEveryMessageOnceAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	e := connectortest.NewCrashEnv(t, map[string]string{"out.toml": fmt.Sprintf(`type = "sink"
key = "to_mysql"
path = "mysql"
[[streams]]
stream = "bridge"
topics = ["events"]
schema = "json"
batch_length = 20
poll_interval = "5ms"
consumer_group = "to_mysql"
[plugin_config]
dsn = %q
table = "events"
auto_create_table = true
payload_format = "json"
batch_size = 7
`, dsn)})
	ctx := context.Background()
	_, err := e.Client.CreateStream(ctx, "bridge")
	require.NoError(t, err)
	_, err = e.Client.CreateTopic(ctx, iggy.NamedID("bridge"), "events", 1)
	require.NoError(t, err)
	var sent atomic.Int64
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		var msgs []iggy.Message
		for k := range 5 {
			msgs = append(msgs, iggy.Message{Payload: []byte(fmt.Sprintf(`{"n":%d}`, i*5+k))})
		}
		_, err := e.Client.SendMessages(ctx, iggy.NamedID("bridge"), iggy.NamedID("events"), iggy.ToPartition(0), msgs)
		if err == nil {
			sent.Add(5)
		}
		return err
	})
	final := e.KillLoop(nil, 10, func() (int, int) { return max(countRows(t, db, "events"), 0), int(sent.Load()) })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := int(sent.Load())
	connectortest.Eventually(t, "every message in MySQL", func() bool { return countRows(t, db, "events") >= total })
	require.Equal(t, total, countRows(t, db, "events"), "no message written twice")
	require.Len(t, queryStrings(t, db, "SELECT DISTINCT JSON_VALUE(payload, '$.n') FROM events"), total, "every n once")
	t.Logf("%d messages, each once, across %d kills", total, e.Kills)
}

// Ten kill -9 of the runtime mid-stream, MySQL → Iggy: every row reaches
// the topic; a kill repeats at most the batches in flight, and a repeated
// row keeps its id.
func TestSourceEveryRowArrivesAcrossKills(t *testing.T) {
	sourceAcrossKills(t, "table = \"orders\"\n")
}

// The same with a custom query that breaks ties of seq with $key.
func TestSourceQueryEveryRowArrivesAcrossKills(t *testing.T) {
	sourceAcrossKills(t, `custom_query = """SELECT id, seq, n FROM orders
  WHERE seq > $offset OR (seq = $offset AND id > $key) ORDER BY seq, id LIMIT $limit"""
initial_offset = -1
`)
}

// sourceAcrossKills runs the kill test with plugin naming what to read.
func sourceAcrossKills(t *testing.T, plugin string) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const batch = 10
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	_, err := db.Exec("CREATE TABLE orders (id BIGINT PRIMARY KEY, seq BIGINT NOT NULL, n BIGINT NOT NULL)")
	require.NoError(t, err)
	e := connectortest.NewCrashEnv(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_mysql"
path = "mysql"
[[streams]]
stream = "bridge"
topic = "orders"
schema = "json"
linger_time = "0ms"
[plugin_config]
dsn = %q
%stracking_column = "seq"
primary_key_column = "id"
batch_size = %d
poll_interval = "10ms"
`, dsn, plugin, batch)})
	var added atomic.Int64
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		var args []any
		for k := range 5 {
			n := i*5 + k
			args = append(args, n, n/2, n) // ties of seq, broken by id
		}
		_, err := db.Exec("INSERT INTO orders VALUES (?, ?, ?), (?, ?, ?), (?, ?, ?), (?, ?, ?), (?, ?, ?)", args...)
		if err == nil {
			added.Add(5)
		}
		return err
	})
	read := func() map[int]int {
		copies, ids := map[int]int{}, map[int][16]byte{}
		for _, m := range e.Topic("bridge", "orders") {
			var v struct{ N int }
			require.NoError(t, json.Unmarshal(m.Payload, &v), "%s", m.Payload)
			if id, ok := ids[v.N]; ok {
				require.Equal(t, id, m.ID, "row %d repeated with another id", v.N)
			}
			copies[v.N]++
			ids[v.N] = m.ID
		}
		return copies
	}
	final := e.KillLoop(nil, 10, func() (int, int) { return len(read()), int(added.Load()) })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := int(added.Load())
	connectortest.Eventually(t, "every row in Iggy", func() bool { return len(read()) >= total })
	copies := read()
	sum := 0
	for n := 0; n < total; n++ {
		require.NotZero(t, copies[n], "row %d was lost", n)
		sum += copies[n]
	}
	t.Logf("%d rows, %d messages (%d repeated by %d kills)", total, sum, sum-total, e.Kills)
	require.LessOrEqual(t, sum-total, e.Kills*2*batch, "more repeats than the batches in flight at the kills")
}
