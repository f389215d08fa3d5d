package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/pgtest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

func TestUnavailableErrors(t *testing.T) {
	t.Parallel()
	pg := func(code string) error {
		return fmt.Errorf("insert: %w", &pgconn.PgError{Severity: "ERROR", Code: code})
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for i, c := range []struct {
		err  error
		want bool
	}{
		{refused, true},
		{fmt.Errorf("begin: %w", &pgconn.ConnectError{}), true},
		{io.ErrUnexpectedEOF, true},
		{pgconn.ErrConnClosed, true},
		{pg("57P01"), true}, // admin_shutdown
		{pg("57P03"), true}, // cannot_connect_now
		{pg("08006"), true}, // connection_failure
		{pg("53300"), true}, // too_many_connections
		{pg("53100"), true}, // disk_full
		{pg("40001"), true}, // serialization_failure
		{pg("40P01"), true}, // deadlock_detected
		{pg("23505"), false},
		{pg("22P02"), false},
		{pg("42P01"), false},
		{errors.New("payload is not valid JSON"), false},
	} {
		require.Equal(t, c.want, unavailable(c.err), "case %d: %v", i, c.err)
		require.Equal(t, c.want, connector.IsUnavailable(orUnavailable(c.err)), "case %d", i)
	}
}

// A database that is down makes Consume say so (connector.Unavailable),
// not blame the messages; once it is back the same batch is written.
func TestSinkReportsADownDatabaseAsUnavailable(t *testing.T) {
	t.Parallel()
	c := pgtest.Private(t)
	s := openSink(t, map[string]any{"connection_string": c.DSN, "target_table": "rows", "auto_create_table": true,
		"payload_format": "json", "max_retries": int64(1), "retry_delay": "10ms"})
	ctx := context.Background()
	require.NoError(t, s.Consume(ctx, sinkBatch(1, 5, jsonPayload)))
	require.NoError(t, c.Halt(ctx))
	b := sinkBatch(6, 5, jsonPayload)
	b.Messages[2].Payload = []byte("not json") // a bad message does not hide the outage
	err := s.Consume(ctx, b)
	require.Error(t, err)
	require.True(t, connector.IsUnavailable(err), "a down database is unavailable: %v", err)
	require.False(t, connector.IsPermanent(err))
	require.NoError(t, c.Resume(ctx))
	err = s.Consume(ctx, b)
	var per connector.MessageErrors
	require.ErrorAs(t, err, &per, "back: only the bad message fails")
	require.Len(t, per, 1)
	require.True(t, connector.IsPermanent(per[2]))
	pool, err := pgxpool.New(ctx, c.DSN)
	require.NoError(t, err)
	defer pool.Close()
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rows`).Scan(&n))
	require.Equal(t, 9, n)
}

// PostgreSQL stopped for 35 s (3 s with -short) mid-stream under the real
// runtime, with the sink's and the runtime's default retries: every one
// of 200 messages is written once it is back, and none is dead-lettered.
// The test has a cluster of its own, stopped with pg_ctl stop -m fast
// (sessions ended with admin_shutdown, then connections refused) and
// started again on the same port.
func TestSinkSurvivesADatabaseOutage(t *testing.T) {
	t.Parallel()
	const before, total = 100, 200
	outage := 35 * time.Second
	if testing.Short() {
		outage = 3 * time.Second
	}
	c := pgtest.Private(t)
	rt := startSinkRuntime(t, fmt.Sprintf(`
type = "sink"
key = "pg"
path = "libiggy_connector_postgres_sink"
[[streams]]
stream = "events"
topics = ["in"]
schema = "json"
consumer_group = "pg-group"
batch_length = 50
on_error = "dead_letter"
dead_letter_topic = "dlq"
[plugin_config]
connection_string = %q
target_table = "rows"
auto_create_table = true
payload_format = "json"
`, c.DSN))
	ctx := context.Background()
	admin, err := iggy.Dial(ctx, rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	send := func(from, to int) {
		var msgs []iggy.Message
		for n := from; n < to; n++ {
			msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, `{"n":%d}`, n)})
		}
		_, err := admin.SendMessages(ctx, iggy.NamedID("events"), iggy.NamedID("in"), iggy.ToPartition(0), msgs)
		require.NoError(t, err)
	}
	pool, err := pgxpool.New(ctx, c.DSN)
	require.NoError(t, err)
	defer pool.Close()
	written := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(DISTINCT (payload->>'n')::int) FROM rows`).Scan(&n); err != nil {
			return -1 // down, or the table is not there yet
		}
		return n
	}

	send(0, before)
	awaitFor(t, "the first messages written", time.Minute, func() bool { return written() == before })
	require.NoError(t, c.Halt(ctx))
	began := time.Now()
	send(before, total)
	reported := false
	awaitFor(t, "the outage's end", outage+2*time.Minute, func() bool {
		// The outage lasts its full length, and until the sink said why
		// (a minute more at the most).
		i, err := rt.Connector(connector.KindSink, "pg")
		reported = reported || (err == nil && strings.Contains(i.LastError, "destination unavailable"))
		over := time.Since(began)
		return (reported && over >= outage) || over >= outage+time.Minute
	})
	require.NoError(t, c.Resume(ctx))

	awaitFor(t, "every message written after the outage", 3*time.Minute, func() bool { return written() == total })
	awaitFor(t, "the last offset committed", time.Minute, func() bool {
		off, err := admin.GetConsumerOffset(ctx, iggy.ConsumerGroup(iggy.NamedID("pg-group")),
			iggy.NamedID("events"), iggy.NamedID("in"), iggy.Partition(0))
		return err == nil && off.StoredOffset == total-1
	})
	reply, err := admin.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("events"), Topic: iggy.NamedID("dlq"),
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100,
	})
	if !errors.Is(err, iggy.ErrTopicNotFound) { // never created: nothing was dead-lettered
		require.NoError(t, err)
		require.Empty(t, reply.Messages, "nothing is dead-lettered while PostgreSQL is down")
	}
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM rows`).Scan(&rows))
	require.Equal(t, total, rows, "each message once (replays are absorbed by the id key)")
	require.True(t, reported, "while PostgreSQL was down the sink's last error said the destination is unavailable")
}

// startSinkRuntime runs the real runtime (embedded broker, built-in
// connectors) with one connector file.
func startSinkRuntime(t *testing.T, connectorTOML string) *runtime.Runtime {
	t.Helper()
	return connectortest.Start(t, map[string]string{"sink.toml": connectorTOML}).Runtime
}

// awaitFor polls cond until it holds, failing the test after limit (a
// liveness bound, not a timing assertion).
func awaitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for: %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
