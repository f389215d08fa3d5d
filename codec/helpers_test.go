package codec

import (
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/jsonx"
	"github.com/stretchr/testify/require"
)

// requireSameJSON compares two JSON documents by value: numbers by value
// (integers exactly), objects regardless of member order.
func requireSameJSON(t *testing.T, want, got string, msgAndArgs ...any) {
	t.Helper()
	require.True(t, jsonx.EqualRaw([]byte(want), []byte(got)), append([]any{"want %s\n got %s", want, got}, msgAndArgs...)...)
}

func mustNew(t testing.TB, s connector.Schema, o Options) Codec {
	t.Helper()
	c, err := New(s, o)
	require.NoError(t, err)
	return c
}

func avroOpts() Options { return Options{AvroSchemaPath: "testdata/event.avsc"} }
func protoOpts() Options {
	return Options{ProtoSchemaPath: "testdata/event.proto", ProtoMessage: "ferry.test.Event"}
}
func fbOpts() Options { return Options{FlatBufferSchemaPath: "testdata/event.bfbs"} }

// eventAvro is a record of every Avro type in event.avsc.
const eventAvro = `{"id":9007199254740993,"name":"Grüße 😀","count":-42,"score":1.5e300,"ratio":0.25,
"active":true,"tags":["a","b"],"address":{"street":"Main 1","city":"Zürich"},"kind":"UPDATED",
"attrs":{"x":1,"y":-9223372036854775808},"note":"hi","blob":[0,1,255],"digest":[1,2,3,4],"version":3}`

// eventProto is a record of event.proto (64-bit integers as numbers).
const eventProto = `{"id":9007199254740993,"name":"Grüße 😀","count":-42,"score":1.5,"ratio":0.25,"active":true,
"tags":["a","b"],"address":{"street":"Main 1","city":"Zürich"},"kind":"UPDATED","attrs":{"x":1,"y":2},
"note":"hi","blob":"AAH/","big":18446744073709551615,"at":"2024-05-06T07:08:09.123Z",
"lines":[{"sku":"A-1","qty":2},{"sku":"B-2","qty":0}]}`
