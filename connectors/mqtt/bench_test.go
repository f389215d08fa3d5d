package mqtt

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/mqtttest"
)

// cpu is this process's user and system CPU time so far.
func cpu(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func report(b *testing.B, n int, cpu0 time.Duration) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((cpu(b)-cpu0).Microseconds())/float64(n), "cpu-µs/msg")
}

func payloads200() [][]byte {
	var out [][]byte
	for i := range 1000 {
		p := fmt.Sprintf(`{"n":%d,"text":"%s"}`, i, strings.Repeat("x", 200))
		out = append(out, []byte(p[:199]+"}"))
	}
	return out
}

// BenchmarkSink publishes batches of 1000 200-byte JSON messages at QoS 1
// (and 0, 2), each batch acknowledged before the next, as the runtime
// calls Consume. cpu-µs/msg is this process's CPU (the sink and paho),
// not the broker's.
func BenchmarkSink(b *testing.B) {
	url := mqtttest.Throughput(b).URL
	for _, qos := range []int64{0, 1, 2} {
		b.Run(fmt.Sprintf("qos%d", qos), func(b *testing.B) {
			s := newSink(b, map[string]any{"urls": []any{url}, "topic": mqtttest.Name(b, "bench") + "/{topic}", "qos": qos})
			open(b, s)
			batch := &connector.SinkBatch{Stream: "s", Topic: "t", Schema: connector.SchemaJSON}
			for i, p := range payloads200() {
				batch.Messages = append(batch.Messages, connector.Message{Payload: p, Offset: uint64(i)})
			}
			ctx := context.Background()
			b.SetBytes(200 * 1000)
			cpu0 := cpu(b)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Consume(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			report(b, 1000*b.N, cpu0)
		})
	}
}

// BenchmarkSource moves batches of 1000 200-byte JSON messages at QoS 1
// from a publisher (in this process, pipelined) through the broker to the
// source, polled in batches of 1000 and acknowledged. msgs/s and
// cpu-µs/msg include the publishing client. The broker saves its
// persistence file at its default interval (mqtttest.Throughput).
func BenchmarkSource(b *testing.B) {
	url := mqtttest.Throughput(b).URL
	topic := mqtttest.Name(b, "bench")
	s := newSource(b, map[string]any{"urls": []any{url}, "topics": []any{topic}, "client_id": mqtttest.Name(b, "cid"),
		"batch_size": int64(1000), "batch_wait": "50ms"})
	openSource(b, s)
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(mqtttest.Name(b, "pub")))
	if tok := pub.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		b.Fatal(tok.Error())
	}
	defer pub.Disconnect(100)
	ps := payloads200()
	ctx := context.Background()
	b.SetBytes(200 * 1000)
	cpu0 := cpu(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		done := make(chan error, 1)
		go func() {
			toks := make([]paho.Token, len(ps))
			for k, p := range ps {
				toks[k] = pub.Publish(topic, 1, false, p)
			}
			for _, tok := range toks {
				if err := wait(ctx, tok); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for got := 0; got < len(ps); {
			batch, err := s.Poll(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got += len(batch.Messages)
			if err := s.(connector.Acker).Ack(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	report(b, 1000*b.N, cpu0)
}
