package broker_test

import (
	"context"
	"testing"

	"github.com/ferryhq/ferry/broker"
	"github.com/stretchr/testify/require"
)

func TestParseFsyncPolicy(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		in   string
		want broker.FsyncPolicy
	}{{"", broker.FsyncInterval}, {"interval", broker.FsyncInterval}, {"ALWAYS", broker.FsyncAlways}, {" never ", broker.FsyncNever}} {
		got, err := broker.ParseFsyncPolicy(tc.in)
		require.NoError(t, err, "case %d", i)
		require.Equal(t, tc.want, got, "case %d", i)
		require.Equal(t, got, must(broker.ParseFsyncPolicy(got.String())), "case %d: String round-trips", i)
	}
	_, err := broker.ParseFsyncPolicy("sometimes")
	require.ErrorContains(t, err, "sometimes")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestStartRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for i, cfg := range []broker.Config{
		{Addr: "127.0.0.1:0", RootUsername: "ab"},
		{Addr: "127.0.0.1:0", RootPassword: "x"},
		{Addr: "127.0.0.1:0", Fsync: 7},
		{Addr: "127.0.0.1:0", HeartbeatInterval: -1},
		{Addr: "not an address"},
	} {
		_, err := broker.Start(context.Background(), cfg)
		require.Error(t, err, "case %d", i)
	}
}

// The connection caps must be consistent: the cap on connections not
// logged in may not pass the total cap, and neither may be negative.
func TestConnectionCapsAreValidated(t *testing.T) {
	t.Parallel()
	for i, cfg := range []broker.Config{
		{MaxConns: 10, MaxUnauthConns: 11},
		{MaxConns: -1},
		{MaxUnauthConns: -1},
		{MaxUnauthConns: broker.DefaultMaxConns + 1},
	} {
		cfg.Addr = "127.0.0.1:0"
		_, err := broker.Start(context.Background(), cfg)
		require.ErrorContains(t, err, "cap", "case %d", i)
	}
	// A total cap below the default cap on connections not logged in
	// lowers that one too.
	b, err := broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0", MaxConns: 10})
	require.NoError(t, err)
	require.NoError(t, b.Close())
}
