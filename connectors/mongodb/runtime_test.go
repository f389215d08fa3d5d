package mongodb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/mongotest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// upstreamSinkTOML is upstream's example connector file for the MongoDB
// sink (core/connectors/sinks/mongodb_sink/config.toml), changed only in
// the address and database, and in what makes upstream's own file no
// valid TOML: it sets batch_size twice and carries five keys of the
// InfluxDB sink (url, org, bucket, token, measurement, precision), which
// are left out. extra goes into the [[streams]] table.
func upstreamSinkTOML(uri, database, extra string) string {
	return fmt.Sprintf(`type = "sink"
key = "mongodb"
enabled = true
version = 0
name = "MongoDB sink"
path = "../../target/release/libiggy_connector_mongodb_sink"
verbose = false

[[streams]]
stream = "user_events"
topics = ["users", "orders"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "mongodb_sink"
%s
[plugin_config]
connection_uri = %q
database = %q
collection = "messages"
batch_size = 100
include_metadata = true
include_checksum = true
include_origin_timestamp = true
payload_format = "binary"
auto_create_collection = false
verbose_logging = false
max_retries = 3
retry_delay = "1s"
`, extra, uri, database)
}

func sendJSON(t *testing.T, addr, stream, topic string, payloads ...string) {
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

func count(t *testing.T, coll *mongo.Collection, filter bson.D) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := coll.CountDocuments(ctx, filter)
	if err != nil {
		return -1
	}
	return n
}

// deadLetters reads the dead-letter topic's messages.
func deadLetters(t *testing.T, addr, stream, topic string, want int) []iggy.Message {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), addr, iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var dead []iggy.Message
	connectortest.Eventually(t, fmt.Sprintf("%d dead letters", want), func() bool {
		r, err := admin.PollMessages(context.Background(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID(stream), Topic: iggy.NamedID(topic), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100})
		if err != nil {
			return false
		}
		dead = r.Messages
		return len(dead) >= want
	})
	return dead
}

// Upstream's connector file loads and runs: both topics' messages land
// in the collection as binary payloads, keyed by upstream's _id.
func TestUpstreamSinkFileRuns(t *testing.T) {
	t.Parallel()
	uri, db := mongotest.URL(t), mongotest.Database(t)
	coll := mongotest.Connect(t, uri).Database(db).Collection("messages")
	run := connectortest.Start(t, map[string]string{"mongodb.toml": upstreamSinkTOML(uri, db, "")})
	sendJSON(t, run.Runtime.IggyAddress(), "user_events", "users", `{"user":1}`, `{"user":2}`)
	sendJSON(t, run.Runtime.IggyAddress(), "user_events", "orders", `{"order":1}`)
	connectortest.Eventually(t, "three documents", func() bool { return count(t, coll, bson.D{}) == 3 })
	require.EqualValues(t, 2, count(t, coll, bson.D{{Key: "iggy_topic", Value: "users"}}))
	var doc bson.Raw
	require.NoError(t, coll.FindOne(context.Background(), bson.D{{Key: "iggy_topic", Value: "orders"}}).Decode(&doc))
	_, data := doc.Lookup("payload").Binary()
	require.Equal(t, `{"order":1}`, string(data))
	require.Regexp(t, `^user_events:orders:0:\d+$`, doc.Lookup("_id").StringValue())
}

// A document MongoDB refuses (a unique index on the payload's email) is
// dead-lettered with the server's reason; its neighbours are written.
func TestRefusedDocumentIsDeadLettered(t *testing.T) {
	t.Parallel()
	uri, db := mongotest.URL(t), mongotest.Database(t)
	coll := mongotest.Connect(t, uri).Database(db).Collection("messages")
	_, err := coll.Indexes().CreateOne(context.Background(), mongo.IndexModel{
		Keys: bson.D{{Key: "payload.email", Value: 1}}, Options: options.Index().SetUnique(true)})
	require.NoError(t, err)
	file := upstreamSinkTOML(uri, db, "on_error = \"dead_letter\"\ndead_letter_topic = \"dlq\"\nretry_backoff = \"5ms\"")
	file = replace(t, file, `payload_format = "binary"`, `payload_format = "json"`)
	run := connectortest.Start(t, map[string]string{"mongodb.toml": file})
	sendJSON(t, run.Runtime.IggyAddress(), "user_events", "users",
		`{"email":"a@example.com","n":0}`, `{"email":"a@example.com","n":1}`, `{"email":"b@example.com","n":2}`)
	dead := deadLetters(t, run.Runtime.IggyAddress(), "user_events", "dlq", 1)
	require.Len(t, dead, 1)
	require.Equal(t, `{"email":"a@example.com","n":1}`, string(dead[0].Payload))
	v, ok := header.Get(dead[0].Headers, runtime.HeaderDLQError)
	require.True(t, ok, "the dead letter carries its reason")
	require.Contains(t, v.String(), "E11000")
	connectortest.Eventually(t, "the neighbours written", func() bool { return count(t, coll, bson.D{}) == 2 })
	require.EqualValues(t, 0, count(t, coll, bson.D{{Key: "payload.n", Value: int64(1)}}))
}

// A MongoDB that is down for a while: the sink restarts with backoff and
// nothing sent to Iggy meanwhile is lost or written twice.
func TestSinkSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a FerretDB of its own")
	}
	t.Parallel()
	srv := mongotest.Private(t)
	db := mongotest.DatabaseOn(t, srv.URL)
	coll := mongotest.Connect(t, srv.URL).Database(db).Collection("messages")
	file := replace(t, upstreamSinkTOML(srv.URL, db, "retry_backoff = \"5ms\""), `retry_delay = "1s"`, `retry_delay = "50ms"`)
	run := connectortest.Start(t, map[string]string{"mongodb.toml": file})
	sendJSON(t, run.Runtime.IggyAddress(), "user_events", "users", `{"n":0}`, `{"n":1}`)
	connectortest.Eventually(t, "two documents", func() bool { return count(t, coll, bson.D{}) == 2 })

	srv.Halt()
	var during []string
	for i := 2; i < 12; i++ {
		during = append(during, fmt.Sprintf(`{"n":%d}`, i))
	}
	sendJSON(t, run.Runtime.IggyAddress(), "user_events", "users", during...)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	// The runtime restarts a sink with backoff of up to a minute: wait
	// longer than that (a liveness bound).
	deadline := time.Now().Add(3 * time.Minute)
	for count(t, coll, bson.D{}) != 12 {
		if time.Now().After(deadline) {
			for _, info := range run.Runtime.Connectors(connector.KindSink) {
				t.Logf("sink %s: %s, %d restarts, last error %q", info.Key, info.Status, info.Restarts, info.LastError)
			}
			t.Fatalf("after the outage %d of 12 documents", count(t, coll, bson.D{}))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var ids []string
	require.NoError(t, coll.Distinct(context.Background(), "_id", bson.D{}).Decode(&ids))
	require.Len(t, ids, 12, "one document per message")
}

func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	out := strings.Replace(s, old, new, 1)
	require.NotEqual(t, s, out, "%q not found", old)
	return out
}
