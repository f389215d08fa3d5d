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

func TestParseExpiryAndSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]uint64{"never": Unlimited, " None ": Unlimited, "unlimited": Unlimited,
		"default": 0, "server_default": 0, "1500": 1500, "1d": 86_400_000_000, "2h 30m": 9_000_000_000, "500ms": 500_000} {
		got, err := ParseExpiry(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := ParseExpiry("often")
	require.Error(t, err)
	for in, want := range map[string]uint64{"1GB": 1e9, "512 MiB": 512 << 20, "100": 100, "unlimited": Unlimited, "1.5KB": 1500} {
		got, err := ParseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err = ParseSize("12 parsecs")
	require.Error(t, err)
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1d", "2h 30m", "1GB", "512 MiB", "unlimited", "99999999999999999999d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseDuration(s)
		_, _ = ParseSize(s)
		_, _ = ParseExpiry(s)
	})
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
