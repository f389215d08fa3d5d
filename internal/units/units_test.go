package units

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"0", 0}, {"000", 0}, {" 0 ", 0}, {"0s", 0}, {"250ms", 250 * time.Millisecond},
		{"1h 30m", 90 * time.Minute}, {"1h30m", 90 * time.Minute}, {"2days", 48 * time.Hour},
	} {
		got, err := ParseDuration(tc.in)
		require.NoError(t, err, "case %d", i)
		require.Equal(t, tc.want, got, "case %d", i)
	}
	for i, in := range []string{"", "often", "5", "1h 5", "s", "99999999999999999999h"} {
		_, err := ParseDuration(in)
		require.Error(t, err, "case %d: %q", i, in)
	}
}

func TestFormatRoundTrips(t *testing.T) {
	t.Parallel()
	for i, d := range []time.Duration{0, time.Millisecond, 90 * time.Minute, 1500 * time.Millisecond} {
		got, err := ParseDuration(FormatDuration(d))
		require.NoError(t, err, "case %d", i)
		require.Equal(t, d, got, "case %d", i)
	}
	for i, n := range []uint64{0, 1, 1000, 4096, 64 << 20, 3 << 30} {
		got, err := ParseSize(FormatSize(n))
		require.NoError(t, err, "case %d", i)
		require.Equal(t, n, got, "case %d", i)
	}
	require.Equal(t, "64MiB", FormatSize(64<<20))
	require.Equal(t, "64MB", FormatSize(64_000_000))
	require.Equal(t, "1500B", FormatSize(1500))
}
