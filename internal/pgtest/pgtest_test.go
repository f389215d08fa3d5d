package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { Main(m) }

func TestDBIsFreshAndLogical(t *testing.T) {
	t.Parallel()
	dsn := DB(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var level string
	require.NoError(t, conn.QueryRow(ctx, "SHOW wal_level").Scan(&level))
	require.Equal(t, "logical", level)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n))
	require.Zero(t, n)
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for i, c := range []struct{ in, want string }{
		{"postgres://u@h:5/postgres?sslmode=disable", "postgres://u@h:5/x?sslmode=disable"},
		{"host=h user=u", "host=h user=u dbname='x'"},
	} {
		require.Equal(t, c.want, WithDatabase(c.in, "x"), "case %d", i)
	}
}

func TestPrivateClusterHaltsAndResumes(t *testing.T) {
	t.Parallel()
	c := Private(t)
	ctx := context.Background()
	ping := func() error {
		conn, err := pgx.Connect(ctx, c.DSN)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return conn.Ping(ctx)
	}
	require.NoError(t, ping())
	require.NoError(t, c.Halt(ctx))
	require.ErrorContains(t, ping(), "connection refused", "a halted server refuses connections")
	require.NoError(t, c.Resume(ctx))
	require.NoError(t, ping(), "the server is back on the same port")
}
