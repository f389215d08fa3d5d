package eventtypes

import (
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkValidate measures validating one message against its type:
// msgs/s and CPU-µs per message.
func BenchmarkValidate(b *testing.B) {
	c := sample(b)
	order := []byte(`{"type":"order.created","order_id":"o-1","customer":{"id":"c-1","email":"a@example.com"},"total":12.5,"currency":"EUR","lines":[{"sku":"a","quantity":2},{"sku":"b","quantity":1}]}`)
	for _, bc := range []struct {
		name, typ string
		schema    connector.Schema
		payload   []byte
	}{
		{"json_schema", "order.created", connector.SchemaJSON, order},
		{"avro_json", "payment.settled", connector.SchemaJSON, []byte(`{"payment_id":"p-1","amount_cents":1250,"status":"SETTLED"}`)},
		{"avro_binary", "payment.settled", connector.SchemaAvro, []byte{6, 'p', '-', '1', 0xc4, 0x13, 0}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if err := c.ValidateEncoded(bc.typ, bc.schema, bc.payload); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				if err := c.ValidateEncoded(bc.typ, bc.schema, bc.payload); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/n, "cpu-µs/msg")
		})
	}
}
