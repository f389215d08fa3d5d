package filebench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSmallRunDeliversEveryRecord(t *testing.T) {
	t.Parallel()
	res, err := Run(context.Background(), Options{Records: 5000, Size: 120, BatchLength: 300, Dir: t.TempDir()})
	require.NoError(t, err)
	require.Equal(t, 5000, res.Records)
	require.Equal(t, int64(5000*121), res.InputBytes)
	require.Equal(t, res.InputBytes+int64(5000*len(added)), res.OutputBytes)
	require.Positive(t, res.Elapsed)
}

func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	for i, o := range []Options{{Records: -1}, {Size: 10}, {BatchLength: -5}} {
		_, err := Run(context.Background(), o)
		require.Error(t, err, "case %d", i)
	}
	require.Len(t, record(nil, 12345, 200), 200)
}

// BenchmarkFilePipeline runs b.N records of 200 bytes through
// file → add_fields → broker → file. For the figure:
//
//	go test -run '^$' -bench FilePipeline -benchtime 1000000x ./connectors/file/filebench/
func BenchmarkFilePipeline(b *testing.B) {
	b.StopTimer() // Run times its own window; input generation is outside it
	res, err := Run(context.Background(), Options{Records: b.N, Size: 200, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(res.MessagesPerSecond(), "msgs/s")
	b.ReportMetric(res.MBPerSecond(), "MB/s")
	b.ReportMetric(res.CPUMicrosPerMessage(), "cpu-µs/msg")
	b.ReportMetric(float64(res.Elapsed.Nanoseconds())/float64(b.N), "ns/op")
}
