package transform

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
)

// record200 is a 200-byte JSON record; record2K a 2 KB one.
var (
	record200 = []byte(`{"id":1234567,"user":"alice","email":"alice@example.com","active":true,"score":98.6,` +
		`"tags":["a","b"],"created_at":"2024-05-06T07:08:09Z","status":"pending","text":"Lorem ipsum dolor sit amet, elit."}`)
	record2K = func() []byte {
		var b strings.Builder
		b.WriteString(`{"id":1234567,"user":"alice","email":"alice@example.com","active":true,"score":98.6,"status":"pending",`)
		for i := 0; b.Len() < 1990; i++ {
			fmt.Fprintf(&b, `"field_%02d":{"n":%d,"s":"value %d with some text","ok":false},`, i, i*1000003, i)
		}
		b.WriteString(`"text":"end"}`)
		return []byte(b.String())
	}()
)

var benchTransforms = []struct {
	name string
	cfg  map[string]any
}{
	{"add_fields", map[string]any{"fields": []any{
		field("source", map[string]any{"static": "ferry"}),
		field("received_at", map[string]any{"computed": "timestamp_millis"}),
	}}},
	{"delete_fields", map[string]any{"fields": []any{"email", "tags"}}},
	{"filter_fields", map[string]any{"keep_fields": []any{"id"}, "patterns": []any{
		map[string]any{"key_pattern": map[string]any{"starts_with": "s"}, "value_pattern": "is_string"},
	}}},
	{"update_fields", map[string]any{"fields": []any{
		map[string]any{"key": "status", "value": map[string]any{"static": "seen"}, "condition": "key_exists"},
		map[string]any{"key": "version", "value": map[string]any{"static": int64(1)}, "condition": "key_not_exists"},
	}}},
	{"unwrap_envelope", map[string]any{"field": "tags"}},
}

func benchRecords() []struct {
	name string
	p    []byte
} {
	return []struct {
		name string
		p    []byte
	}{{"200B", record200}, {"2KB", record2K}}
}

func benchApply(b *testing.B, c Chain, payload []byte) {
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	var m connector.Message
	for b.Loop() {
		m.Payload = payload
		if _, _, err := c.Apply(&m, connector.SchemaJSON); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTransform(b *testing.B) {
	for _, bt := range benchTransforms {
		c := build(b, bt.name, bt.cfg)
		for _, r := range benchRecords() {
			b.Run(bt.name+"/"+r.name, func(b *testing.B) { benchApply(b, c, r.p) })
		}
	}
}

// BenchmarkChain3 is the chain: add, delete and update.
func BenchmarkChain3(b *testing.B) {
	c, err := Build([]Spec{
		{Name: "add_fields", Config: benchTransforms[0].cfg},
		{Name: "delete_fields", Config: map[string]any{"fields": []any{"email"}}},
		{Name: "update_fields", Config: map[string]any{"fields": []any{
			map[string]any{"key": "status", "value": map[string]any{"static": "seen"}, "condition": "key_exists"},
		}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range benchRecords() {
		b.Run(r.name, func(b *testing.B) { benchApply(b, c, r.p) })
	}
}

func BenchmarkConvert(b *testing.B) {
	enc := build(b, "avro_convert", map[string]any{"source_format": "json", "target_format": "avro", "schema_path": "testdata/user.avsc"})
	b.Run("avro_convert/json-to-avro", func(b *testing.B) {
		benchApply(b, enc, []byte(`{"name":"Alice","age":30,"id":9007199254740993}`))
	})
}
