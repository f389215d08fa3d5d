package state

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the CPU time (user + system) this process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the process CPU time per operation since start, in
// microseconds, as the metric "cpu-µs/op".
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// BenchmarkFileStoreSave measures one durable Save after another, the state
// cost the runtime pays per acknowledged source batch.
func BenchmarkFileStoreSave(b *testing.B) {
	for _, size := range []int{64, 4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			s, err := OpenFile(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			data := make([]byte, size)
			var v Version
			b.SetBytes(int64(size))
			b.ReportAllocs()
			start := cpuTime(b)
			for b.Loop() {
				if v, err = s.Save(ctx, "bench", data, v); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, start)
		})
	}
}

// BenchmarkFileStoreSaveParallel measures Saves of 8 keys from 8
// goroutines sharing one store, as several sources of one runtime do.
// ns/op is wall time per Save across all goroutines.
func BenchmarkFileStoreSaveParallel(b *testing.B) {
	const keys = 8
	s, err := OpenFile(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	data := make([]byte, 256)
	var next atomic.Int32
	b.SetParallelism((keys + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)) // about 8 goroutines, one key each
	b.ReportAllocs()
	start := cpuTime(b)
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("bench-%d", next.Add(1))
		var v Version
		var err error
		for pb.Next() {
			if v, err = s.Save(ctx, key, data, v); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportCPU(b, start)
}

// BenchmarkFileLoad measures Load of a 4 KiB state.
func BenchmarkFileLoad(b *testing.B) {
	s, err := OpenFile(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Save(ctx, "bench", make([]byte, 4<<10), ""); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Load(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
