package host_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ferryhq/ferry/connector"
)

// BenchmarkSinkPluginConsume is the cost of one Consume of a batch of 100
// messages of 200 bytes through the go-sink example plugin (writing to
// /dev/null): the gRPC round trip, the copies and the plugin's writes.
func BenchmarkSinkPluginConsume(b *testing.B) {
	bin := build(b, "examples/plugins/go-sink")
	info, _, err := registry().Resolve(connector.KindSink, manifest(b, "go-sink", "sink", bin, nil, ""), "")
	if err != nil {
		b.Fatal(err)
	}
	snk, err := info.NewSink(connector.Config{Key: "bench", Plugin: connector.PluginConfig{Values: map[string]any{"path": "/dev/null"}}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := snk.Open(ctx); err != nil {
		b.Fatal(err)
	}
	defer snk.Close(ctx)
	batch := &connector.SinkBatch{Stream: "s", Topic: "t"}
	for i := range 100 {
		p := fmt.Sprintf(`{"n":%03d,"text":"%0182d"}`, i, i)
		batch.Messages = append(batch.Messages, connector.Message{ID: [16]byte{1, byte(i)}, Payload: []byte(p[:200])})
	}
	b.ResetTimer()
	for range b.N {
		if err := snk.Consume(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch.Messages)), "ns/msg")
}
