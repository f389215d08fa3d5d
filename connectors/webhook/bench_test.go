package webhook

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
)

// cpuTime is the process's user + system CPU time so far (the runtime,
// the embedded broker and the senders all run in this process).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Signed Standard Webhooks deliveries end to end: 256 concurrent senders
// → the listener → the runtime → the embedded broker, each answered 200
// once stored. Reports deliveries/s and CPU-µs per delivery (the CPU of
// the whole process: senders, signing and verifying included).
//
//	go test -run '^$' -bench BenchmarkDeliveries -benchtime 20000x ./connectors/webhook/
func BenchmarkDeliveries(b *testing.B) {
	addr := freeAddr(b)
	run := connectortest.Start(b, map[string]string{"hooks.toml": sourceTOML(addr, "max_pending = 5000\ndedup_max_entries = 100000")})
	_ = run
	p := newProvider(b, "http://"+addr+"/sw")
	body := []byte(`{"event":"invoice.paid","amount":4200,"currency":"eur","customer":"cus_0123456789"}`)
	// Warm up: the topic exists, connections are open.
	p.deliver(context.Background(), "warm", body)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu := cpuTime()
	for range 256 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if !p.deliver(context.Background(), fmt.Sprintf("bench-%d", i), body) {
					b.Error("a delivery failed")
					return
				}
			}
		}()
	}
	wg.Wait()
	used := cpuTime() - cpu
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
	b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-µs/delivery")
	b.ReportMetric(float64(p.attempts.Load()-1)/float64(b.N), "attempts/delivery")
}
