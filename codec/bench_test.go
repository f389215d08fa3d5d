package codec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
)

// benchRecord returns a JSON record of about size bytes that every bench
// schema (testdata/bench.*) describes.
func benchRecord(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"id":1234567,"user":"alice","email":"alice@example.com","active":true,"score":98.6,"tags":["a","b"],` +
		`"created_at":"2024-05-06T07:08:09Z","status":"pending","text":"Lorem ipsum","items":[`)
	for i := 0; b.Len() < size-40; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"n":%d,"s":"value %d with text","ok":true}`, i*1000003, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkCodec(b *testing.B) {
	codecs := []struct {
		name string
		c    Codec
	}{
		{"json", mustNew(b, connector.SchemaJSON, Options{})},
		{"avro", mustNew(b, connector.SchemaAvro, Options{AvroSchemaPath: "testdata/bench.avsc"})},
		{"proto", mustNew(b, connector.SchemaProto, Options{ProtoSchemaPath: "testdata/bench.proto", ProtoMessage: "bench.Record"})},
		{"flatbuffer", mustNew(b, connector.SchemaFlatBuffer, Options{FlatBufferSchemaPath: "testdata/bench.bfbs"})},
	}
	for _, size := range []int{200, 2048} {
		doc := benchRecord(size)
		for _, cc := range codecs {
			payload, err := cc.c.FromJSON(nil, doc)
			if err != nil {
				b.Fatal(err)
			}
			label := fmt.Sprintf("%s/%dB", cc.name, len(doc))
			b.Run("FromJSON/"+label, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := cc.c.FromJSON(nil, doc); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("ToJSON/"+label, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := cc.c.ToJSON(nil, payload); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("Validate/"+label, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := cc.c.Validate(payload); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
