package mongodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/mongotest"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Hostile payloads never panic and never get past the sink unchecked:
// each is either stored exactly as sent or refused for good with a
// reason, and its neighbours are written. Keys are never read as
// operators or Extended JSON.
func TestSinkHostilePayloads(t *testing.T) {
	t.Parallel()
	uri, db := mongotest.URL(t), mongotest.Database(t)
	s := newSink(t, map[string]any{"connection_uri": uri, "database": db, "collection": "odd.name-ü 1",
		"payload_format": "json", "max_document_size": "64KiB", "auto_create_collection": true})
	deep := strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1000)
	cases := []struct {
		payload string
		refused string // "" may be stored or refused by the server; else refused by Ferry with this text
	}{
		{payload: `{"ok":1}`},
		{payload: `{"$where":"sleep(1000)"}`},
		{payload: `{"a.b":{"$set":{"x":1}}}`},
		{payload: `{"_id":{"$oid":"65a1b2c3d4e5f60718293a4b"},"$gt":""}`},
		{payload: `{"":1,"k\u0000ey":2}`, refused: "cannot be BSON"},
		{payload: deep, refused: "nested deeper"},
		{payload: `{"big":"` + strings.Repeat("x", 70<<10) + `"}`, refused: "above the limit"},
		{payload: `{"n":`, refused: "not JSON"},
		{payload: `[1,2] 3`, refused: "not JSON"},
		{payload: `{"n":1e999}`, refused: "out of range"},
		{payload: `"just a string"`},
		{payload: `{"ok":2}`},
	}
	b := &connector.SinkBatch{Stream: "s:with:colons", Topic: "t", Schema: connector.SchemaJSON}
	for i, c := range cases {
		var id [16]byte
		id[0] = byte(i + 1)
		b.Messages = append(b.Messages, connector.Message{ID: id, Offset: uint64(i), Payload: []byte(c.payload)})
	}
	err := s.Consume(context.Background(), b)
	var per connector.MessageErrors
	require.True(t, errors.As(err, &per), "per-message errors, got %v", err)
	coll := mongotest.Connect(t, uri).Database(db).Collection("odd.name-ü 1")
	for i, c := range cases {
		var doc bson.Raw
		findErr := coll.FindOne(context.Background(), bson.D{{Key: "iggy_offset", Value: int64(i)}}).Decode(&doc)
		e, refused := per[i]
		switch {
		case c.refused != "":
			require.True(t, refused, "case %d must be refused", i)
			require.True(t, connector.IsPermanent(e), "case %d: %v", i, e)
			require.Contains(t, e.Error(), c.refused, "case %d", i)
			require.Error(t, findErr, "case %d was refused yet stored", i)
		case refused:
			require.True(t, connector.IsPermanent(e), "case %d: %v", i, e)
			require.Contains(t, e.Error(), "MongoDB refused the document", "case %d carries the server's reason", i)
			require.Error(t, findErr, "case %d was refused yet stored", i)
			t.Logf("case %d refused by the server: %v", i, e)
		default:
			require.NoError(t, findErr, "case %d neither stored nor refused", i)
			require.JSONEq(t, c.payload, canonicalJSON(t, doc.Lookup("payload")), "case %d stored as sent", i)
			require.Equal(t, fmt.Sprintf("s:with:colons:t:0:%d", i+1), doc.Lookup("_id").StringValue())
		}
	}
	require.NotContains(t, per, 0)
	require.NotContains(t, per, len(cases)-1)
}

// Names MongoDB refuses, or that would reach outside the collection,
// are refused at load with the key named.
func TestSinkRefusesBadNames(t *testing.T) {
	t.Parallel()
	base := map[string]any{"connection_uri": "mongodb://localhost:27017", "database": "d", "collection": "c"}
	for _, c := range []struct{ key, value string }{
		{"collection", "$cmd"}, {"collection", "system.users"}, {"collection", ""}, {"collection", "a\x00b"},
		{"collection", ".a"}, {"collection", strings.Repeat("c", 256)},
		{"database", "a/b"}, {"database", "a.b"}, {"database", "a b"}, {"database", "$x"}, {"database", ""},
		{"connection_uri", "http://localhost"}, {"payload_format", "xml"}, {"batch_size", "0"},
	} {
		values := map[string]any{}
		for k, v := range base {
			values[k] = v
		}
		values[c.key] = c.value
		if c.key == "batch_size" {
			values[c.key] = int64(0)
		}
		_, err := NewSink(cfg(values))
		require.Error(t, err, "%s = %q", c.key, c.value)
		require.Contains(t, err.Error(), c.key)
	}
	for _, key := range []string{"connection_uri", "database", "collection"} {
		values := map[string]any{}
		for k, v := range base {
			if k != key {
				values[k] = v
			}
		}
		_, err := NewSink(cfg(values))
		require.ErrorContains(t, err, key)
	}
	values := map[string]any{"connection_uri": "mongodb://localhost:27017", "database": "d", "collection": "c", "payload_format": "TEXT"}
	s, err := NewSink(cfg(values))
	require.NoError(t, err, "upstream's alias text")
	require.Equal(t, "string", s.(*Sink).format)
}

// Credentials in connection_uri never show in errors or logs.
func TestSinkRedactsCredentials(t *testing.T) {
	t.Parallel()
	for _, uri := range []string{
		"mongodb://ferry:s3cr3t-pw@127.0.0.1:1/?serverSelectionTimeoutMS=300&connectTimeoutMS=300",
		"mongodb://ferry:s3cr3t%2Dpw@127.0.0.1:1,127.0.0.1:2/db?authSource=admin&serverSelectionTimeoutMS=300",
	} {
		s, err := NewSink(cfg(map[string]any{"connection_uri": uri, "database": "d", "collection": "c"}))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = s.Open(ctx)
		cancel()
		require.Error(t, err)
		require.True(t, connector.IsUnavailable(err), "a server that is not there is Unavailable: %v", err)
		require.NotContains(t, err.Error(), "s3cr3t")
		require.NotContains(t, err.Error(), "ferry:")
		require.Contains(t, err.Error(), "127.0.0.1:1")
		require.NotContains(t, redactURI(uri), "s3cr3t")
	}
	for _, bad := range []string{"mongodb://u:s3cr3t@h:notaport", "mongodb://u:s3:cr3t@h/"} {
		_, err := NewSink(cfg(map[string]any{"connection_uri": bad, "database": "d", "collection": "c"}))
		require.ErrorContains(t, err, "connection_uri")
		require.NotContains(t, err.Error(), "s3cr3t")
		require.NotContains(t, err.Error(), "cr3t")
	}
	require.True(t, SinkSpec.Secret("connection_uri"))
}

// A payload key with quotes and braces (FerretDB's SQLite backend fails
// a whole insert over such a key at the top level) is stored, or else
// refused as no outage: the error is not Unavailable, so the runtime
// tries each message alone, and its neighbours are written.
func TestSinkWholeInsertRefusalIsNotAnOutage(t *testing.T) {
	t.Parallel()
	uri, db := mongotest.URL(t), mongotest.Database(t)
	s := newSink(t, map[string]any{"connection_uri": uri, "database": db, "collection": "q", "payload_format": "json"})
	b := &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaJSON}
	for i, p := range []string{`{"ok":0}`, `{"we'ird \"f}{eld":1}`, `{"ok":2}`} {
		var id [16]byte
		id[0] = byte(i + 1)
		b.Messages = append(b.Messages, connector.Message{ID: id, Offset: uint64(i), Payload: []byte(p)})
	}
	err := s.Consume(context.Background(), b)
	if err == nil {
		t.Log("the server took the key")
		return
	}
	require.False(t, connector.IsUnavailable(err), "%v", err)
	for _, i := range []int{0, 2} {
		one := *b
		one.Messages = b.Messages[i : i+1]
		require.NoError(t, s.Consume(context.Background(), &one))
	}
	one := *b
	one.Messages = b.Messages[1:2]
	err = s.Consume(context.Background(), &one)
	require.Error(t, err)
	require.False(t, connector.IsUnavailable(err), "%v", err)
	t.Logf("refused alone: %v", err)
}
