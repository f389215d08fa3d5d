package derive

import (
	"fmt"
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

// Aggregation throughput: count(*) and sum(amount) per key over 10,000
// keys, batches as the runtime delivers them, each applied, checkpointed
// (the whole state, synced) and its updates sent to a deduplicating
// broker in process. Reports input messages/s and CPU-µs per input
// message (the whole process: broker included).
func BenchmarkCountSumPerKey10k(b *testing.B) {
	for _, size := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			br := dedupBroker(b)
			s := newSink(b, br.Addr(), b.TempDir(), map[string]any{"aggregates": []any{"count(*)", "sum(amount)"}})
			defer closeSink(b, s)
			const keys = 10_000
			msgs := make([]connector.Message, size)
			for i := range msgs {
				msgs[i] = msg(0, fmt.Sprintf("key-%05d", i*7919%keys), fmt.Sprintf(`{"amount":%d,"note":"x"}`, i%100))
			}
			b.ResetTimer()
			cpu := cpuTime()
			off := uint64(0)
			for done := 0; done < b.N; done += size {
				for i := range msgs {
					msgs[i].Offset = off
					off++
				}
				if err := consume(b, s, batch(msgs...)); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(off)
			b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/n, "cpu-µs/msg")
		})
	}
}

// Changelog input (input = "changelog"): a table of 10,000 keys whose
// updates move them among 100 groups, with count(*), sum, min, max and
// latest per group; every batch retracts and adds, is checkpointed (the
// whole table, synced) and sent. Same metrics as above.
func BenchmarkChangelogPerKey10k(b *testing.B) {
	for _, size := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			br := dedupBroker(b)
			s := newSink(b, br.Addr(), b.TempDir(), map[string]any{"input": "changelog", "group_by": "user",
				"aggregates": []any{"count(*)", "sum(amount)", "min(amount)", "max(amount)", "latest(amount)"}})
			defer closeSink(b, s)
			const keys = 10_000
			b.ResetTimer()
			cpu := cpuTime()
			off := uint64(0)
			msgs := make([]connector.Message, size)
			for done := 0; done < b.N; done += size {
				for i := range msgs {
					n := int(off)
					msgs[i] = msg(off, fmt.Sprintf("key-%05d", n*7919%keys), fmt.Sprintf(`{"user":"u%d","amount":%d}`, n*31%100, n%100))
					off++
				}
				if err := consume(b, s, batch(msgs...)); err != nil {
					b.Fatal(err)
				}
			}
			n := float64(off)
			b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/n, "cpu-µs/msg")
		})
	}
}
