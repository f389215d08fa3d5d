package mongodb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mongotest"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestSourceConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		extra map[string]any
		doc   func(k int) bson.D
	}{
		{"by ObjectId", nil, func(k int) bson.D {
			return bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "body", Value: bson.D{{Key: "n", Value: int64(k)}}}}
		}},
		// Three documents share each seq: ties are read in _id order.
		{"by a numeric field with ties", map[string]any{"tracking_field": "meta.seq"}, func(k int) bson.D {
			return bson.D{{Key: "_id", Value: fmt.Sprintf("id-%06d", k)}, {Key: "meta", Value: bson.D{{Key: "seq", Value: int64(k / 3)}}},
				{Key: "body", Value: bson.D{{Key: "n", Value: int64(k)}}}}
		}},
		{"by time, deleting what was delivered", map[string]any{"tracking_field": "at", "delete_after_read": true}, func(k int) bson.D {
			return bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "at", Value: bson.NewDateTimeFromTime(time.UnixMilli(int64(1_700_000_000_000 + k)))},
				{Key: "body", Value: bson.D{{Key: "n", Value: int64(k)}}}}
		}},
		{"marking what was delivered", map[string]any{"processed_field": "done"}, func(k int) bson.D {
			return bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "body", Value: bson.D{{Key: "n", Value: int64(k)}}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			uri, db := mongotest.URL(t), mongotest.Database(t)
			coll := mongotest.Connect(t, uri).Database(db).Collection("events")
			next := 0
			connectortest.Source(t, connectortest.SourceSuite{
				New: func(t *testing.T) connector.Source {
					values := map[string]any{"connection_uri": uri, "database": db, "collection": "events", "batch_size": int64(5),
						"poll_interval": "20ms", "payload_field": "body"}
					for k, v := range tc.extra {
						values[k] = v
					}
					s, err := NewSource(cfg(values))
					require.NoError(t, err)
					return s
				},
				Add: func(t *testing.T, n int) []string {
					var docs []any
					var want []string
					for range n {
						docs = append(docs, tc.doc(next))
						want = append(want, fmt.Sprintf(`{"n":%d}`, next))
						next++
					}
					_, err := coll.InsertMany(context.Background(), docs)
					require.NoError(t, err)
					return want
				},
				StableIDs: true,
			})
		})
	}
}

// delete_after_read removes exactly the delivered documents, and
// processed_field marks them, once acknowledged, not before.
func TestSourceDeletesOrMarksOnlyAfterAck(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"delete_after_read", "processed_field"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			uri, db := mongotest.URL(t), mongotest.Database(t)
			coll := mongotest.Connect(t, uri).Database(db).Collection("jobs")
			var docs []any
			for k := range 7 {
				docs = append(docs, bson.D{{Key: "_id", Value: int64(k)}, {Key: "v", Value: k}})
			}
			_, err := coll.InsertMany(context.Background(), docs)
			require.NoError(t, err)
			values := map[string]any{"connection_uri": uri, "database": db, "collection": "jobs", "batch_size": int64(4), "poll_interval": "20ms"}
			if mode == "delete_after_read" {
				values[mode] = true
			} else {
				values[mode] = "done"
			}
			src, err := NewSource(cfg(values))
			require.NoError(t, err)
			ctx := context.Background()
			require.NoError(t, src.Open(ctx, nil))
			defer src.Close(ctx)
			b, err := src.Poll(ctx)
			require.NoError(t, err)
			require.Len(t, b.Messages, 4)
			require.Equal(t, `{"_id":0,"v":0}`, string(b.Messages[0].Payload))
			v, _ := b.Messages[0].Header("mongodb_id")
			require.Equal(t, "0", v.String())
			gone := bson.D{{Key: "done", Value: true}}
			if mode == "delete_after_read" {
				gone = bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: 4}}}}
			}
			before := count(t, coll, bson.D{})
			marked := count(t, coll, bson.D{{Key: "done", Value: true}})
			require.EqualValues(t, 7, before, "nothing deleted before the ack")
			require.EqualValues(t, 0, marked, "nothing marked before the ack")
			require.NoError(t, src.(connector.Acker).Ack(ctx, b))
			if mode == "delete_after_read" {
				require.EqualValues(t, 0, count(t, coll, gone))
				require.EqualValues(t, 3, count(t, coll, bson.D{}))
			} else {
				require.EqualValues(t, 4, count(t, coll, gone))
			}
		})
	}
}

// Hostile configuration never becomes a query: field paths that could be
// operators are refused at load, with the key named, and a tracking
// field with odd characters is only ever a field name.
func TestSourceRefusesHostileConfig(t *testing.T) {
	t.Parallel()
	base := map[string]any{"connection_uri": "mongodb://localhost:27017", "database": "d", "collection": "c"}
	for _, c := range []struct{ key, value string }{
		{"tracking_field", "$where"}, {"tracking_field", "a..b"}, {"tracking_field", "a.$gt"}, {"tracking_field", ""},
		{"payload_field", "$$ROOT"}, {"processed_field", "$set"}, {"collection", "x$y"},
		{"schema", "text"}, // without payload_field
	} {
		values := map[string]any{}
		for k, v := range base {
			values[k] = v
		}
		values[c.key] = c.value
		_, err := NewSource(cfg(values))
		require.ErrorContains(t, err, c.key, "%s = %q", c.key, c.value)
	}
	_, err := NewSource(cfg(map[string]any{"connection_uri": "mongodb://localhost:27017", "database": "d", "collection": "c",
		"delete_after_read": true, "processed_field": "done"}))
	require.ErrorContains(t, err, "processed_field")
}

// A tracking field whose name is odd (spaces, quotes, braces) is read
// as a plain field.
func TestSourceOddTrackingFieldName(t *testing.T) {
	t.Parallel()
	uri, db := mongotest.URL(t), mongotest.Database(t)
	coll := mongotest.Connect(t, uri).Database(db).Collection("odd")
	const field = "we'ird f}{eld ü" // FerretDB's SQLite backend fails on a key holding a double quote
	var docs []any
	for k := range 5 {
		docs = append(docs, bson.D{{Key: "_id", Value: int64(10 - k)}, {Key: field, Value: int64(k)}})
	}
	_, err := coll.InsertMany(context.Background(), docs)
	require.NoError(t, err)
	src, err := NewSource(cfg(map[string]any{"connection_uri": uri, "database": db, "collection": "odd",
		"tracking_field": field, "poll_interval": "20ms", "include_metadata": false}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, src.Open(ctx, nil))
	defer src.Close(ctx)
	b, err := src.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, b.Messages, 5)
	for k, m := range b.Messages {
		require.Contains(t, string(m.Payload), fmt.Sprintf(`"_id":%d`, 10-k), "in the tracking field's order")
	}
	require.Empty(t, b.Messages[0].Headers)
}
