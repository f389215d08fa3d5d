package postgres

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testDB is a fresh database of the test PostgreSQL.
type testDB struct {
	t    testing.TB
	dsn  string
	name string // the database name, also a unique replication slot name
	pool *pgxpool.Pool
}

func newDB(t testing.TB) *testDB {
	t.Helper()
	dsn := pgtest.DB(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return &testDB{t: t, dsn: dsn, name: pool.Config().ConnConfig.Database, pool: pool}
}

func (d *testDB) exec(sql string, args ...any) {
	d.t.Helper()
	_, err := d.pool.Exec(context.Background(), sql, args...)
	require.NoError(d.t, err, "%s", sql)
}

func (d *testDB) count(sql string, args ...any) int {
	d.t.Helper()
	var n int
	require.NoError(d.t, d.pool.QueryRow(context.Background(), sql, args...).Scan(&n), "%s", sql)
	return n
}

func plugin(values map[string]any) connector.PluginConfig {
	return connector.PluginConfig{Values: values, Source: "connectors/pg.toml"}
}

// openSource builds and opens a source, closed at the end of the test.
func openSource(t testing.TB, values map[string]any, state []byte) *Source {
	t.Helper()
	src, err := NewSource(connector.Config{Key: "pg", Plugin: plugin(values)})
	require.NoError(t, err)
	s := src.(*Source)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.Open(ctx, state))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// poll polls once with a generous deadline.
func poll(t testing.TB, s *Source) *connector.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := s.Poll(ctx)
	require.NoError(t, err)
	return b
}

// record is a decoded source message.
type record struct {
	Table   string          `json:"table_name"`
	Schema  string          `json:"schema"`
	Op      string          `json:"operation_type"`
	TS      string          `json:"timestamp"`
	LSN     string          `json:"lsn"`
	Data    json.RawMessage `json:"data"`
	OldData json.RawMessage `json:"old_data"`
}

func decode(t testing.TB, m connector.Message) record {
	t.Helper()
	var r record
	require.NoError(t, json.Unmarshal(m.Payload, &r), "%s", m.Payload)
	return r
}

// rowID is data.id (or old_data.id) of a record.
func (r record) rowID(t testing.TB) int64 {
	t.Helper()
	var v struct{ ID *int64 }
	src := r.Data
	if string(src) == "null" || len(src) == 0 {
		src = r.OldData
	}
	require.NoError(t, json.Unmarshal(src, &v), "%s", src)
	require.NotNil(t, v.ID, "no id in %s", src)
	return *v.ID
}

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }
