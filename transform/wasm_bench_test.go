package transform

import (
	"context"
	"testing"

	"github.com/ferryhq/ferry/connector"
)

// BenchmarkWasmPerMessage is the per-message cost of a WebAssembly
// transform (the test guest's add_field: one field spliced into the JSON
// object, as add_fields sets one) on 200-byte JSON, next to the built-in
// add_fields, both through ApplyBatch as the runtime calls them, per
// batch size. ns/msg is the figure to compare.
func BenchmarkWasmPerMessage(b *testing.B) {
	dir := guestDir(b)
	builtin := build(b, "add_fields", map[string]any{"fields": []any{field("via", map[string]any{"static": "wasm"})}})
	module := wasmChain(b, dir, wasmSpecOf("add_field", map[string]any{"config": map[string]any{"key": "via", "value": "wasm"}}))
	keep := wasmChain(b, dir, wasmSpecOf("keep", nil))
	for _, n := range []int{1, 10, 100, 1000} {
		batch := make([]connector.Message, n)
		for i := range batch {
			batch[i].Payload = record200
		}
		for _, c := range []struct {
			name  string
			chain Chain
		}{{"add_fields", builtin}, {"wasm_add_field", module}, {"wasm_keep", keep}} {
			b.Run(c.name+"/200B/batch"+itoa(n), func(b *testing.B) {
				b.SetBytes(int64(n * len(record200)))
				b.ReportAllocs()
				for b.Loop() {
					res := c.chain.ApplyBatch(context.Background(), batch, connector.SchemaJSON)
					if len(res.Messages) != n {
						b.Fatalf("%d messages out of %d: %v", len(res.Messages), n, res.Failed)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
			})
		}
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
