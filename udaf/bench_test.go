package udaf_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/udaf"
	"github.com/ferryhq/ferry/udaf/udaftest"
)

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAddCount measures the call itself: Add of the faulty module's
// count, whose guest work is two integer conversions.
func BenchmarkAddCount(b *testing.B) {
	m := load(b, udaftest.Faulty(b), udaf.Limits{})
	ctx := context.Background()
	st, input := []byte("0"), []byte(`{"n":1}`)
	b.ReportAllocs()
	cpu := cpuTime()
	b.ResetTimer()
	var err error
	for range b.N {
		if st, err = m.Add(ctx, st, input); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportCalls(b, cpu)
}

func reportCalls(b *testing.B, cpu time.Duration) {
	n := float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "calls/s")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/n, "µs/call")
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/n, "cpu-µs/call")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAdd measures the top-3 example's Add, a call with the group's
// state carried from one to the next: one goroutine, then one per
// GOMAXPROCS (the instance pool's case).
func BenchmarkAdd(b *testing.B) {
	m := load(b, udaftest.Top3(b), udaf.Limits{})
	ctx := context.Background()
	payloads := make([][]byte, 1024)
	for i := range payloads {
		payloads[i] = []byte(`{"id":"user-` + strconv.Itoa(i%97) + `","score":` + strconv.Itoa(i*7919%1000) + `}`)
	}
	b.Run("serial", func(b *testing.B) {
		st, err := m.Init(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		cpu := cpuTime()
		b.ResetTimer()
		for i := range b.N {
			if st, err = m.Add(ctx, st, payloads[i%len(payloads)]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportCalls(b, cpu)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuTime()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			st, err := m.Init(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			for i := 0; pb.Next(); i++ {
				if st, err = m.Add(ctx, st, payloads[i%len(payloads)]); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
		reportCalls(b, cpu)
	})
}

// BenchmarkAddAll measures AddAll of 100 inputs a call, per input: the
// count (the call's cost spread) and the top-3.
func BenchmarkAddAll(b *testing.B) {
	ctx := context.Background()
	batch := make([][]byte, 100)
	for i := range batch {
		batch[i] = []byte(`{"id":"user-` + strconv.Itoa(i%97) + `","score":` + strconv.Itoa(i*7919%1000) + `}`)
	}
	for _, tc := range []struct {
		name, path string
		init       []byte
	}{{"count", udaftest.Faulty(b), []byte("0")}, {"top3", udaftest.Top3(b), []byte{0}}} {
		b.Run(tc.name, func(b *testing.B) {
			m := load(b, tc.path, udaf.Limits{})
			st := tc.init
			b.ReportAllocs()
			cpu := cpuTime()
			b.ResetTimer()
			var err error
			for done := 0; done < b.N; done += len(batch) {
				if st, err = m.AddAll(ctx, st, batch[:min(len(batch), b.N-done)]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "inputs/s")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/n, "µs/input")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/n, "cpu-µs/input")
			b.ReportMetric(0, "ns/op")
		})
	}
}
