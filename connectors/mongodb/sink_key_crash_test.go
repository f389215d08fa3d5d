package mongodb

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/mongotest"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// With id_from = "key", after kill -9s and restarts the collection is
// exactly the latest message of each key (deleted keys absent), as
// computed from the topic: replays overwrite no newer document and leave
// no deleted key behind.
func TestSinkIDFromKeyAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	uri, db := mongotest.URL(t), mongotest.Database(t)
	coll := mongotest.Connect(t, uri).Database(db).Collection("users")
	e := connectortest.NewCrashEnv(t, map[string]string{"out.toml": fmt.Sprintf(`type = "sink"
key = "to_mongo"
path = "libiggy_connector_mongodb_sink"
[[streams]]
stream = "bridge"
topics = ["users"]
schema = "json"
batch_length = 20
poll_interval = "5ms"
consumer_group = "to_mongo"
[plugin_config]
connection_uri = %q
database = %q
collection = "users"
payload_format = "json"
id_from = "key"
batch_size = 7
`, uri, db)})
	ctx := context.Background()
	_, err := e.Client.CreateStream(ctx, "bridge")
	require.NoError(t, err)
	_, err = e.Client.CreateTopic(ctx, iggy.NamedID("bridge"), "users", 1)
	require.NoError(t, err)
	const perSend, keys = 10, 20
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		msgs := make([]iggy.Message, perSend)
		for j := range msgs {
			n := i*perSend + j
			hs := []iggy.Entry{iggy.Header(iggy.KeyHeader, iggy.StringValue(fmt.Sprintf("u%d", n*7%keys)))}
			msgs[j].Payload = fmt.Appendf(nil, `{"v":"%d"}`, n)
			if n%11 == 5 {
				hs, msgs[j].Payload = append(hs, iggy.Header(iggy.DeletedHeader, iggy.BoolValue(true))), []byte("null")
			}
			msgs[j].Headers = hs
		}
		_, err := e.Client.SendMessages(ctx, iggy.NamedID("bridge"), iggy.NamedID("users"), iggy.ToPartition(0), msgs)
		return err
	})
	maxOffset := func() int {
		var doc struct {
			Offset int64 `bson:"iggy_offset"`
		}
		err := coll.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "iggy_offset", Value: -1}})).Decode(&doc)
		if err != nil {
			return 0
		}
		return int(doc.Offset) + 1
	}
	final := e.KillLoop(nil, 5, func() (int, int) { return maxOffset(), len(e.Topic("bridge", "users")) })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	total := stop() * perSend

	// The reference from the topic (e.Topic drops headers: the key and the
	// marker are recomputed from n, the offset: one sender, one partition).
	msgs := e.Topic("bridge", "users")
	require.Len(t, msgs, total)
	ref := map[string]string{}
	for _, m := range msgs {
		n := int(m.Offset)
		k := fmt.Sprintf("u%d", n*7%keys)
		if n%11 == 5 {
			delete(ref, k)
			continue
		}
		ref[k] = fmt.Sprintf("%s=%d@%d", k, n, n)
	}
	want := make([]string, 0, len(ref))
	for _, v := range ref {
		want = append(want, v)
	}
	sort.Strings(want)
	connectortest.Eventually(t, "the collection equal to the latest message of each key", func() bool {
		return fmt.Sprint(byKey(t, coll)) == fmt.Sprint(want)
	})
	require.Equal(t, want, byKey(t, coll))
	t.Logf("%d messages over %d keys, %d documents after %d kills", total, keys, len(want), e.Kills)
}
