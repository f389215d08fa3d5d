package mongodb

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mongotest"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func TestMain(m *testing.M) { mongotest.Main(m) }

func cfg(values map[string]any) connector.Config {
	return connector.Config{Key: "mongo", Plugin: connector.PluginConfig{Source: "mongo.toml", Values: values}}
}

func newSink(t testing.TB, values map[string]any) *Sink {
	t.Helper()
	s, err := NewSink(cfg(values))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.Open(ctx))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s.(*Sink)
}

// payloads returns the payload field of every document in coll, sorted
// by iggy_offset, as JSON text (json format) or the string.
func payloads(t *testing.T, coll *mongo.Collection) []string {
	t.Helper()
	ctx := context.Background()
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "iggy_offset", Value: 1}}))
	require.NoError(t, err)
	defer cur.Close(ctx)
	var out []string
	for cur.Next(ctx) {
		v := cur.Current.Lookup("payload")
		switch v.Type {
		case bson.TypeString:
			out = append(out, v.StringValue())
		case bson.TypeBinary:
			_, data := v.Binary()
			out = append(out, string(data))
		default:
			out = append(out, canonicalJSON(t, v))
		}
	}
	require.NoError(t, cur.Err())
	return out
}

// canonicalJSON renders a BSON value as compact plain JSON.
func canonicalJSON(t *testing.T, v bson.RawValue) string {
	t.Helper()
	b, err := bson.MarshalExtJSON(bson.D{{Key: "v", Value: v}}, false, false)
	require.NoError(t, err)
	var m struct{ V json.RawMessage }
	require.NoError(t, json.Unmarshal(b, &m))
	return string(m.V)
}

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"json", "string", "binary"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			uri, db := mongotest.URL(t), mongotest.Database(t)
			coll := mongotest.Connect(t, uri).Database(db).Collection("events")
			connectortest.Sink(t, connectortest.SinkSuite{
				New: func(t *testing.T) connector.Sink {
					s, err := NewSink(cfg(map[string]any{"connection_uri": uri, "database": db, "collection": "events",
						"payload_format": format, "max_retries": int64(1)}))
					require.NoError(t, err)
					return s
				},
				Read:       func(t *testing.T) []string { return payloads(t, coll) },
				Idempotent: true,
				Poison:     map[string][]byte{"json": []byte(`{"n":`), "string": {0xff, 0xfe}}[format],
			})
		})
	}
}

// Each document is upstream's: the _id from stream, topic, partition
// and the u128 message id; the metadata fields and their BSON types.
func TestSinkDocumentShape(t *testing.T) {
	t.Parallel()
	uri, db := mongotest.URL(t), mongotest.Database(t)
	s := newSink(t, map[string]any{"connection_uri": uri, "database": db, "collection": "shape", "payload_format": "json",
		"auto_create_collection": true})
	var id [16]byte
	id[0] = 42 // little-endian u128 42
	ts := time.UnixMilli(1_700_000_000_123).UTC()
	require.NoError(t, s.Consume(context.Background(), &connector.SinkBatch{Stream: "shop", Topic: "orders", Partition: 3,
		Schema: connector.SchemaJSON, Messages: []connector.Message{{ID: id, Offset: 7, Timestamp: ts, OriginTimestamp: ts.Add(-time.Second),
			Checksum: 1<<63 + 5, Payload: []byte(`{"b":1,"a":{"z":[true,null,"s"]},"n":1.5,"b":2}`)}}}))
	var doc bson.D
	require.NoError(t, mongotest.Connect(t, uri).Database(db).Collection("shape").FindOne(context.Background(), bson.D{}).Decode(&doc))
	want := bson.D{{Key: "_id", Value: "shop:orders:3:42"}, {Key: "iggy_offset", Value: int64(7)},
		{Key: "iggy_timestamp", Value: bson.NewDateTimeFromTime(ts)}, {Key: "iggy_stream", Value: "shop"},
		{Key: "iggy_topic", Value: "orders"}, {Key: "iggy_partition_id", Value: int32(3)},
		{Key: "iggy_checksum", Value: "9223372036854775813"}, {Key: "iggy_origin_timestamp", Value: bson.NewDateTimeFromTime(ts.Add(-time.Second))},
		// Key order kept; a repeated key keeps its place and its last value.
		{Key: "payload", Value: bson.D{{Key: "b", Value: int64(2)}, {Key: "a", Value: bson.D{{Key: "z", Value: bson.A{true, nil, "s"}}}},
			{Key: "n", Value: 1.5}}}}
	require.Equal(t, want, doc)
}
