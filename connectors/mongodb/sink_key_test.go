package mongodb

import (
	"context"
	"fmt"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/mongotest"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// km is a message of key k (binary when bin) at offset off; deleted
// makes it a deletion marker with the payload "null".
type km struct {
	k       string
	off     uint64
	v       string
	deleted bool
	bin     bool
}

func keyBatch(ms ...km) *connector.SinkBatch {
	b := &connector.SinkBatch{Stream: "shop", Topic: "users", Partition: 0, Schema: connector.SchemaJSON}
	for _, m := range ms {
		var id [16]byte
		id[0], id[1] = byte(m.off), byte(m.off>>8)
		kv := header.StringValue(m.k)
		if m.bin {
			kv = header.RawValue([]byte(m.k))
		}
		hs := []header.Header{header.New(iggy.KeyHeader, kv)}
		payload := m.v
		if m.deleted {
			hs, payload = append(hs, header.New(iggy.DeletedHeader, header.BoolValue(true))), "null"
		}
		b.Messages = append(b.Messages, connector.Message{ID: id, Offset: m.off, Payload: []byte(payload), Headers: hs,
			Timestamp: time.UnixMicro(1700000000000000 + int64(m.off))})
	}
	return b
}

// byKey is the collection as "_id=payload.v@iggy_offset" strings, sorted;
// a binary _id prints as 0x and hex.
func byKey(t *testing.T, coll *mongo.Collection) []string {
	t.Helper()
	ctx := context.Background()
	cur, err := coll.Find(ctx, bson.D{})
	require.NoError(t, err)
	defer cur.Close(ctx)
	var out []string
	for cur.Next(ctx) {
		id := cur.Current.Lookup("_id")
		var k string
		if id.Type == bson.TypeBinary {
			_, data := id.Binary()
			k = fmt.Sprintf("0x%x", data)
		} else {
			k = id.StringValue()
		}
		out = append(out, fmt.Sprintf("%s=%s@%d", k, cur.Current.Lookup("payload", "v").StringValue(), cur.Current.Lookup("iggy_offset").Int64()))
	}
	require.NoError(t, cur.Err())
	sort.Strings(out)
	return out
}

// id_from = "key": one document per key, the latest offset winning in a
// batch and across batches; a replay of an older batch overwrites
// nothing; deletion markers delete, an older one nothing; binary keys are
// binary _ids, apart from equal string keys.
func TestSinkIDFromKey(t *testing.T) {
	t.Parallel()
	uri, db := mongotest.URL(t), mongotest.Database(t)
	s := newSink(t, map[string]any{"connection_uri": uri, "database": db, "collection": "users", "payload_format": "json",
		"id_from": "key", "batch_size": int64(2)})
	coll := mongotest.Connect(t, uri).Database(db).Collection("users")
	ctx := context.Background()
	old := keyBatch(km{k: "a", off: 1, v: `{"v":"a1"}`}, km{k: "b", off: 2, v: `{"v":"b2"}`}, km{k: "a", off: 3, v: `{"v":"a3"}`},
		km{k: "c", off: 4, v: `{"v":"c4"}`}, km{k: "a", off: 5, v: `{"v":"bin5"}`, bin: true})
	require.NoError(t, s.Consume(ctx, old))
	require.Equal(t, []string{"0x61=bin5@5", "a=a3@3", "b=b2@2", "c=c4@4"}, byKey(t, coll))

	require.NoError(t, s.Consume(ctx, keyBatch(km{k: "a", off: 6, v: `{"v":"a6"}`}, km{k: "b", off: 7, deleted: true},
		km{k: "c", off: 8, v: `{"v":"c8"}`})))
	want := []string{"0x61=bin5@5", "a=a6@6", "c=c8@8"}
	require.Equal(t, want, byKey(t, coll))

	// The replay of the first batch changes no newer document (b may
	// come back until the replay reaches its marker again).
	require.NoError(t, s.Consume(ctx, old))
	got := byKey(t, coll)
	require.Subset(t, got, want, "no newer document overwritten")
	require.Subset(t, append(want, "b=b2@2"), got, "at most b back, as it was")
	require.NoError(t, s.Consume(ctx, keyBatch(km{k: "b", off: 7, deleted: true})))
	require.Equal(t, want, byKey(t, coll))

	// An older marker deletes nothing; a newer one deletes.
	require.NoError(t, s.Consume(ctx, keyBatch(km{k: "c", off: 5, deleted: true})))
	require.Equal(t, want, byKey(t, coll))
	require.NoError(t, s.Consume(ctx, keyBatch(km{k: "c", off: 9, deleted: true}, km{k: "a", off: 10, deleted: true, bin: true})))
	require.Equal(t, []string{"a=a6@6"}, byKey(t, coll))
}

func TestSinkIDFromKeyFailures(t *testing.T) {
	t.Parallel()
	uri, db := mongotest.URL(t), mongotest.Database(t)
	s := newSink(t, map[string]any{"connection_uri": uri, "database": db, "collection": "kv", "payload_format": "json", "id_from": "key"})
	b := keyBatch(km{k: "ok", off: 1, v: `{"v":"x"}`}, km{k: "bad", off: 2, v: `not json`})
	b.Messages = append(b.Messages, connector.Message{Offset: 3, Payload: []byte(`{}`)})
	err := s.Consume(context.Background(), b)
	var me connector.MessageErrors
	require.ErrorAs(t, err, &me)
	require.Len(t, me, 2, "%v", err)
	require.ErrorContains(t, me[2], `no "key" header`)
	require.Contains(t, me, 1)
	require.Equal(t, []string{"ok=x@1"}, byKey(t, mongotest.Connect(t, uri).Database(db).Collection("kv")))

	_, err = NewSink(cfg(map[string]any{"connection_uri": uri, "database": db, "collection": "kv", "id_from": "key", "include_metadata": false}))
	require.ErrorContains(t, err, "needs include_metadata = true")
	_, err = NewSink(cfg(map[string]any{"connection_uri": uri, "database": db, "collection": "kv", "id_from": "offset"}))
	require.ErrorContains(t, err, "id_from")
}

// BenchmarkSinkIDFromKey writes batches of 100 messages over 1,000 keys
// (FerretDB over SQLite scans for each guarded upsert: its figures are
// FerretDB's, far below MongoDB's).
func BenchmarkSinkIDFromKey(b *testing.B) {
	uri, db := mongotest.URL(b), mongotest.Database(b)
	s := newSink(b, map[string]any{"connection_uri": uri, "database": db, "collection": "bench", "payload_format": "json",
		"id_from": "key", "batch_size": int64(100)})
	ctx := context.Background()
	var ru syscall.Rusage
	cpu := func() time.Duration {
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start, off := cpu(), uint64(0)
	for b.Loop() {
		ms := make([]km, 100)
		for i := range ms {
			off++
			ms[i] = km{k: fmt.Sprintf("k%d", off*7919%1000), off: off, v: fmt.Sprintf(`{"v":"%d"}`, off)}
		}
		if err := s.Consume(ctx, keyBatch(ms...)); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N) * 100
	b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((cpu()-start).Microseconds())/n, "cpu-µs/msg")
}
