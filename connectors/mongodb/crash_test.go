package mongodb

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/mongotest"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestRuntimeChild is the runtime process the crash tests kill.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9 of the runtime mid-stream, Iggy → MongoDB: every message
// sent to Iggy is in the collection exactly once. The sink is keyed by
// message id, so a batch delivered again after a kill adds nothing.
func TestSinkEveryMessageOnceAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	uri, db := mongotest.URL(t), mongotest.Database(t)
	coll := mongotest.Connect(t, uri).Database(db).Collection("events")
	e := connectortest.NewCrashEnv(t, map[string]string{"out.toml": fmt.Sprintf(`type = "sink"
key = "to_mongo"
path = "libiggy_connector_mongodb_sink"
[[streams]]
stream = "bridge"
topics = ["events"]
schema = "json"
batch_length = 20
poll_interval = "5ms"
consumer_group = "to_mongo"
[plugin_config]
connection_uri = %q
database = %q
collection = "events"
payload_format = "json"
batch_size = 7
`, uri, db)})
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
	final := e.KillLoop(nil, 10, func() (int, int) { return int(count(t, coll, bson.D{})), int(sent.Load()) })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := sent.Load()
	connectortest.Eventually(t, "every message in MongoDB", func() bool { return count(t, coll, bson.D{}) >= total })
	require.EqualValues(t, total, count(t, coll, bson.D{}), "no message written twice")
	var ns []int64
	require.NoError(t, coll.Distinct(ctx, "payload.n", bson.D{}).Decode(&ns))
	require.Len(t, ns, int(total), "every n once")
	t.Logf("%d messages, each once, across %d kills", total, e.Kills)
}

// Ten kill -9 of the runtime mid-stream, MongoDB → Iggy: every document
// reaches the topic; a kill repeats at most the batches in flight (one
// being sent and one read ahead), and a repeated document keeps its id.
func TestSourceEveryDocumentArrivesAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const batch = 10
	uri, db := mongotest.URL(t), mongotest.Database(t)
	coll := mongotest.Connect(t, uri).Database(db).Collection("orders")
	e := connectortest.NewCrashEnv(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "from_mongo"
path = "mongodb"
[[streams]]
stream = "bridge"
topic = "orders"
schema = "json"
linger_time = "0ms"
[plugin_config]
connection_uri = %q
database = %q
collection = "orders"
tracking_field = "seq"
batch_size = %d
poll_interval = "10ms"
payload_field = "body"
`, uri, db, batch)})
	ctx := context.Background()
	var added atomic.Int64
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		var docs []any
		for k := range 5 {
			n := i*5 + k
			docs = append(docs, bson.D{{Key: "seq", Value: int64(n / 2)}, {Key: "body", Value: bson.D{{Key: "n", Value: int64(n)}}}})
		}
		_, err := coll.InsertMany(ctx, docs)
		if err == nil {
			added.Add(5)
		}
		return err
	})
	read := func() (map[int]int, map[int][16]byte) {
		copies, ids := map[int]int{}, map[int][16]byte{}
		for _, m := range e.Topic("bridge", "orders") {
			var v struct{ N int }
			require.NoError(t, json.Unmarshal(m.Payload, &v), "%s", m.Payload)
			if id, ok := ids[v.N]; ok {
				require.Equal(t, id, m.ID, "document %d repeated with another id", v.N)
			}
			copies[v.N]++
			ids[v.N] = m.ID
		}
		return copies, ids
	}
	final := e.KillLoop(nil, 10, func() (int, int) { c, _ := read(); return len(c), int(added.Load()) })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := int(added.Load())
	connectortest.Eventually(t, "every document in Iggy", func() bool { c, _ := read(); return len(c) >= total })
	copies, _ := read()
	sum := 0
	for n := 0; n < total; n++ {
		require.NotZero(t, copies[n], "document %d was lost", n)
		sum += copies[n]
	}
	t.Logf("%d documents, %d messages (%d repeated by %d kills)", total, sum, sum-total, e.Kills)
	require.LessOrEqual(t, sum-total, e.Kills*2*batch, "more repeats than the batches in flight at the kills")
}
