package storage

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkCompact compacts a file log of 200,000 messages over 10,000
// keys (1 MiB segments) per iteration: MB/s of sealed segment bytes
// compacted (before), and the process CPU per MB.
func BenchmarkCompact(b *testing.B) {
	ms := workload(200_000, 10_000, 21)
	var bytes, cpu float64
	var elapsed time.Duration
	for range b.N {
		b.StopTimer()
		l := openCompactLog(b, "file", b.TempDir(), 1<<20)
		appendWorkload(b, l, ms, testBatch)
		c0 := cpuNow()
		t0 := time.Now()
		b.StartTimer()
		st, err := l.Compact(context.Background(), CompactOptions{Now: farFuture})
		b.StopTimer()
		elapsed += time.Since(t0)
		cpu += (cpuNow() - c0).Seconds()
		require.NoError(b, err)
		require.NotEmpty(b, st.Segments)
		for _, s := range st.Segments {
			bytes += float64(s.BytesBefore)
		}
		require.NoError(b, l.Close())
	}
	mb := bytes / 1e6
	b.ReportMetric(mb/elapsed.Seconds(), "MB/s")
	b.ReportMetric(cpu*1e6/mb, "cpu-µs/MB")
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
