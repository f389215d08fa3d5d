package postgres

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	_ "github.com/ferryhq/ferry/connectors/file" // the file source, for the child runtime
	"github.com/ferryhq/ferry/connectortest"
)

// e2eSinkTOML is a PostgreSQL sink of topic pg/rows into table e2e_rows,
// deduplicating by message id (the default).
func e2eSinkTOML(dsn string) string {
	return fmt.Sprintf(`type = "sink"
key = "out"
path = "libiggy_connector_postgres_sink"
[[streams]]
stream = "pg"
topics = ["rows"]
schema = "json"
batch_length = 50
poll_interval = "5ms"
consumer_group = "pg_out"
[plugin_config]
connection_string = %q
target_table = "e2e_rows"
auto_create_table = true
payload_format = "json"
`, dsn)
}

// Ten kill -9 of the runtime mid-stream, from a source through the
// broker into the PostgreSQL sink: the table ends with exactly the
// distinct input records. A source replays at most a batch after a kill;
// its replayed messages carry the same ids (stable ids), and the sink's
// unique id column absorbs them, so exactly-once rows hold across crash
// replays, not only across the runtime's own retries.
func TestEndToEndExactlyOnceAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const kills = 10
	for _, tc := range []struct {
		name   string
		source func(t *testing.T, db *testDB, dir string) (tomlText string, write func(i int) error, records func() int)
	}{
		{"file source", func(t *testing.T, _ *testDB, dir string) (string, func(int) error, func() int) {
			path := filepath.Join(dir, "in.ndjson")
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			require.NoError(t, err)
			t.Cleanup(func() { f.Close() })
			var mu sync.Mutex
			n := 0
			write := func(int) error {
				mu.Lock()
				defer mu.Unlock()
				var lines []byte
				for range 10 {
					lines = fmt.Appendf(lines, `{"record":%d,"text":"line %d"}`+"\n", n, n)
					n++
				}
				_, err := f.Write(lines)
				return err
			}
			return fmt.Sprintf(`type = "source"
key = "in"
path = "file"
[[streams]]
stream = "pg"
topic = "rows"
schema = "json"
batch_length = 50
linger_time = "0ms"
[plugin_config]
paths = [%q]
follow = true
poll_interval = "10ms"
batch_size = 50
`, path), write, func() int { mu.Lock(); defer mu.Unlock(); return n }
		}},
		{"polling PostgreSQL source", func(t *testing.T, db *testDB, _ string) (string, func(int) error, func() int) {
			db.exec(`CREATE TABLE items (id bigserial PRIMARY KEY, body text)`)
			var mu sync.Mutex
			n := 0
			write := func(int) error {
				mu.Lock()
				defer mu.Unlock()
				_, err := db.pool.Exec(context.Background(), `INSERT INTO items (body) SELECT 'row ' || g FROM generate_series(1, 10) g`)
				if err == nil {
					n += 10
				}
				return err
			}
			return sourceTOML(fmt.Sprintf("connection_string = %q\nmode = \"polling\"\ntables = [\"items\"]\n"+
					"batch_size = 50\npoll_interval = \"20ms\"\n", db.dsn)),
				write, func() int { mu.Lock(); defer mu.Unlock(); return n }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			e := newCrashEnv(t, e2eSinkTOML(db.dsn))
			src, write, records := tc.source(t, db, e.Dir)
			require.NoError(t, os.WriteFile(filepath.Join(e.Dir, "connectors", "in.toml"), []byte(src), 0o644))
			rows := func() int {
				var n int
				if err := db.pool.QueryRow(context.Background(), `SELECT count(*) FROM e2e_rows`).Scan(&n); err != nil {
					return 0 // not created yet
				}
				return n
			}
			stop := connectortest.Feed(t, 15*time.Millisecond, write)
			final := e.KillLoop(nil, kills, func() (int, int) { return rows(), records() })
			defer e.Kill(final)
			time.Sleep(300 * time.Millisecond)
			stop()
			total := records()
			eventually(t, "every record in the table", func() bool { return rows() >= total })
			topic := len(e.Topic("pg", "rows"))
			require.Equal(t, total, rows(), "rows: every record once (the topic holds %d messages for %d records)", topic, total)
			require.Equal(t, total, db.count(`SELECT count(DISTINCT payload::text) FROM e2e_rows`), "no record lost, none twice")
			t.Logf("%d records, %d messages in the topic (%d repeated by %d kills), %d rows", total, topic, topic-total, e.Kills, rows())
		})
	}
}
