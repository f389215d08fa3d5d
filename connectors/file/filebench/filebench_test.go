package filebench

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSmallRunsDeliverEveryRecordTransformed(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{Records: 5000, Size: 120, BatchLength: 300},
		{Records: 3000, Size: 100, BatchLength: 200, Transforms: Add, Sinks: 2, Partitions: 3},
		{Records: 2000, Size: 64, BatchLength: 100, Transforms: None},
	} {
		require.NoError(t, o.Check())
		t.Run(fmt.Sprintf("%s-%dsinks-%dpartitions", o.Transforms, o.Sinks, o.Partitions), func(t *testing.T) {
			t.Parallel()
			o.Dir = t.TempDir()
			res, err := Run(context.Background(), o)
			require.NoError(t, err)
			require.Equal(t, o.Records, res.Records)
			require.Equal(t, int64(o.Records*(o.Size+1)), res.InputBytes)
			var want int64
			for i := range o.Records {
				want += int64(len(output(nil, i, o.Size, o.Transforms)) + 1)
			}
			require.Equal(t, want*int64(o.Sinks), res.OutputBytes, "every sink's files hold each record once (checkOutput)")
			require.Positive(t, res.Elapsed)
		})
	}
}

// The expected output is what the transforms make, not a copy of the
// input: a run whose chain did nothing would fail its check.
func TestOutputIsTheChainsResult(t *testing.T) {
	t.Parallel()
	require.Len(t, record(nil, 12345, 200), 200)
	require.Equal(t, `{"id":7,"title":"Hello","name":"World","text":"xxxxxxxxxxx"}`, string(record(nil, 7, 60)))
	require.Equal(t, `{"id":7,"name":"Ferry","text":"xxxxxxxxxxx","pipeline":"ferry","version":2}`, string(output(nil, 7, 60, Fields)))
	require.Equal(t, `{"id":7,"title":"Hello","name":"World","text":"xxxxxxxxxxx","pipeline":"ferry"}`, string(output(nil, 7, 60, Add)))
	require.Equal(t, string(record(nil, 7, 60)), string(output(nil, 7, 60, None)))
}

func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	for i, o := range []Options{{Records: -1}, {Size: 10}, {BatchLength: -5}, {Transforms: "upper"}, {Sinks: -1}, {Partitions: 5000}} {
		_, err := Run(context.Background(), o)
		require.Error(t, err, "case %d", i)
	}
}

// BenchmarkFilePipeline runs b.N records of 200 bytes through
// file → three field changes → broker → file. For the figure:
//
//	go test -run '^$' -bench FilePipeline -benchtime 1000000x ./connectors/file/filebench/
func BenchmarkFilePipeline(b *testing.B) {
	for _, size := range []int{200, 10 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			b.StopTimer() // Run times its own window; input generation is outside it
			res, err := Run(context.Background(), Options{Records: b.N, Size: size, Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(res.MessagesPerSecond(), "msgs/s")
			b.ReportMetric(res.MBPerSecond(), "MB/s")
			b.ReportMetric(res.CPUMicrosPerMessage(), "cpu-µs/msg")
			b.ReportMetric(float64(res.PeakRSS)/(1<<20), "peak-MiB")
			b.ReportMetric(float64(res.PeakAnon)/(1<<20), "peak-anon-MiB")
			b.ReportMetric(float64(res.Elapsed.Nanoseconds())/float64(b.N), "ns/op")
		})
	}
}
