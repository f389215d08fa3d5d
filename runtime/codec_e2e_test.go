package runtime

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/codec"
	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// recordSource emits n JSON records, then waits for the end.
type recordSource struct {
	n    int
	done bool
}

func (s *recordSource) Open(context.Context, []byte) error { return nil }
func (s *recordSource) Close(context.Context) error        { return nil }

func (s *recordSource) Poll(ctx context.Context) (*connector.Batch, error) {
	if s.done {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s.done = true
	b := &connector.Batch{Schema: connector.SchemaJSON}
	for i := range s.n {
		b.Messages = append(b.Messages, connector.Message{Payload: fmt.Appendf(nil,
			`{"id":%d,"name":"user-%d ü","big":%d,"score":%d.5,"tags":["a","b"],"status":"new","secret":"x"}`,
			i, i, 9007199254740993+i, i)})
	}
	return b, nil
}

// schemaSink records each batch's schema and payloads.
type schemaSink struct {
	mu       sync.Mutex
	schemas  []connector.Schema
	payloads [][]byte
}

func (s *schemaSink) Open(context.Context) error  { return nil }
func (s *schemaSink) Close(context.Context) error { return nil }

func (s *schemaSink) Consume(_ context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range b.Messages {
		s.schemas = append(s.schemas, b.Schema)
		s.payloads = append(s.payloads, m.Payload)
	}
	return nil
}

func (s *schemaSink) got() ([]connector.Schema, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]connector.Schema(nil), s.schemas...), append([][]byte(nil), s.payloads...)
}

func registerCodecConnectors(t *testing.T, e *env, src *recordSource, sinks map[string]*schemaSink) {
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSource, Name: "records",
		NewSource: func(connector.Config) (connector.Source, error) { return src, nil }}))
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "schemas",
		NewSink: func(c connector.Config) (connector.Sink, error) {
			s, ok := sinks[c.Key]
			if !ok {
				return nil, fmt.Errorf("no test sink %q", c.Key)
			}
			return s, nil
		}}))
}

const eventAvsc = `{"type":"record","name":"Event","fields":[
  {"name":"id","type":"long"},{"name":"name","type":"string"},{"name":"big","type":"long"},
  {"name":"score","type":"double"},{"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"status","type":"string"},{"name":"source","type":["null","string"],"default":null}]}`

// TestJSONThroughAvroStream: a source of JSON records writes to a stream
// whose schema is Avro; a sink with transforms reads that stream back as
// JSON, and a raw reader of the same topic sees Avro datums.
func TestJSONThroughAvroStream(t *testing.T) {
	e := newEnv(t)
	src := &recordSource{n: 20}
	sinks := map[string]*schemaSink{"out": {}, "bytes": {}}
	registerCodecConnectors(t, e, src, sinks)
	e.write("event.avsc", eventAvsc)
	e.connector("gen", `
type = "source"
key = "gen"
path = "records"
[[streams]]
stream = "s"
topic = "avro"
schema = "avro"
avro_schema_path = "../event.avsc"
[transforms.add_fields]
[[transforms.add_fields.fields]]
key = "source"
value.static = "ferry"
`)
	e.connector("out", `
type = "sink"
key = "out"
path = "schemas"
[[streams]]
stream = "s"
topics = ["avro"]
schema = "avro"
avro_schema_path = "../event.avsc"
[transforms.delete_fields]
fields = ["tags"]
[transforms.update_fields]
[[transforms.update_fields.fields]]
key = "status"
value.static = "seen"
condition = "key_exists"
`)
	e.connector("bytes", `
type = "sink"
key = "bytes"
path = "schemas"
[[streams]]
stream = "s"
topics = ["avro"]
schema = "raw"
`)
	e.start()
	eventually(t, "20 records at both sinks", func() bool {
		_, a := sinks["out"].got()
		_, b := sinks["bytes"].got()
		return len(a) >= 20 && len(b) >= 20
	})
	schemas, payloads := sinks["out"].got()
	for i, p := range payloads {
		require.Equal(t, connector.SchemaJSON, schemas[i], "the sink batch carries the schema after decoding and transforms")
		require.Equal(t, fmt.Sprintf(`{"id":%d,"name":"user-%d ü","big":%d,"score":%d.5,"status":"seen","source":"ferry"}`,
			i, i, 9007199254740993+i, i), string(p), "record %d", i)
	}
	avro, err := codec.New(connector.SchemaAvro, codec.Options{AvroSchemaJSON: eventAvsc})
	require.NoError(t, err)
	schemas, payloads = sinks["bytes"].got()
	for i, p := range payloads {
		require.Equal(t, connector.SchemaRaw, schemas[i])
		require.NotEqual(t, byte('{'), p[0], "the topic holds Avro, not JSON")
		j, err := avro.ToJSON(nil, p)
		require.NoError(t, err, "record %d is an Avro datum", i)
		require.Equal(t, fmt.Sprintf(`{"id":%d,"name":"user-%d ü","big":%d,"score":%d.5,"tags":["a","b"],"status":"new","source":"ferry"}`,
			i, i, 9007199254740993+i, i), string(j))
	}
}

const eventProto = `syntax = "proto3";
package e2e;
message Event {
  int64 id = 1;
  string name = 2;
  int64 big = 3;
  double score = 4;
  repeated string tags = 5;
  string status = 6;
}
`

// TestJSONThroughProtoStream does the same through a protobuf stream
// compiled from a .proto file at start-up.
func TestJSONThroughProtoStream(t *testing.T) {
	e := newEnv(t)
	src := &recordSource{n: 10}
	sinks := map[string]*schemaSink{"out": {}}
	registerCodecConnectors(t, e, src, sinks)
	e.write("event.proto", eventProto)
	e.connector("gen", `
type = "source"
key = "gen"
path = "records"
[[streams]]
stream = "s"
topic = "pb"
schema = "proto"
proto_schema_path = "../event.proto"
proto_message_type = "e2e.Event"
`)
	e.connector("out", `
type = "sink"
key = "out"
path = "schemas"
[[streams]]
stream = "s"
topics = ["pb"]
schema = "proto"
proto_schema_path = "../event.proto"
proto_message_type = "Event"
[transforms.filter_fields]
keep_fields = ["id"]
[[transforms.filter_fields.patterns]]
key_pattern = { regex = "^(big|name)$" }
`)
	e.start()
	eventually(t, "10 records at the sink", func() bool { _, p := sinks["out"].got(); return len(p) >= 10 })
	schemas, payloads := sinks["out"].got()
	for i, p := range payloads {
		require.Equal(t, connector.SchemaJSON, schemas[i])
		require.Equal(t, fmt.Sprintf(`{"id":%d,"name":"user-%d ü","big":%d}`, i, i, 9007199254740993+i), string(p), "record %d", i)
	}
}

// TestStreamSchemaErrorsAtStartUp: a stream whose schema file is missing
// stops the connector with an error naming the file and the entry.
func TestStreamSchemaErrorsAtStartUp(t *testing.T) {
	e := newEnv(t)
	sinks := map[string]*schemaSink{"out": {}}
	registerCodecConnectors(t, e, &recordSource{}, sinks)
	e.connector("out", `
type = "sink"
key = "out"
path = "schemas"
[[streams]]
stream = "s"
topics = ["t"]
schema = "avro"
avro_schema_path = "missing.avsc"
`)
	rt := e.start()
	eventually(t, "the sink fails", func() bool {
		for _, c := range rt.Connectors(connector.KindSink) {
			if c.Status == StatusError {
				return true
			}
		}
		return false
	})
	info := rt.Connectors(connector.KindSink)[0]
	require.Contains(t, info.LastError, "out.toml: streams[0]: avro_schema_path: open")
	require.Contains(t, info.LastError, "missing.avsc")
}
