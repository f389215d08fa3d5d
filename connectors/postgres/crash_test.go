package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

// TestRuntimeChild is the runtime process the crash tests kill.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

func newCrashEnv(t *testing.T, connectorTOML string) *connectortest.CrashEnv {
	t.Helper()
	return connectortest.NewCrashEnv(t, map[string]string{"pg.toml": connectorTOML})
}

func sourceTOML(plugin string) string {
	return `type = "source"
key = "pg"
path = "libiggy_connector_postgres_source"
[[streams]]
stream = "pg"
topic = "rows"
schema = "json"
batch_length = 50
linger_time = "0ms"
[plugin_config]
` + plugin
}

// The polling source delivers every row into the topic across kill -9
// and restarts; repeats come only from a batch sent but not yet recorded
// when the process died: at most one batch per kill.
func TestPollingSourceSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id bigserial PRIMARY KEY, body text)`)
	const batch = 50
	e := newCrashEnv(t, sourceTOML(fmt.Sprintf("connection_string = %q\nmode = \"polling\"\ntables = [\"items\"]\n"+
		"batch_size = %d\npoll_interval = \"20ms\"\n", db.dsn, batch)))
	var written atomic.Int64
	stop := connectortest.Feed(t, 10*time.Millisecond, func(int) error { // one writer: ids commit in order
		_, err := db.pool.Exec(context.Background(), `INSERT INTO items (body) SELECT 'row' FROM generate_series(1, 10)`)
		written.Add(10)
		return err
	})
	count := func() (map[int64]int, int) {
		seen := map[int64]int{}
		msgs := e.Topic("pg", "rows")
		for _, m := range msgs {
			var r record
			require.NoError(t, json.Unmarshal(m.Payload, &r))
			seen[r.rowID(t)]++
		}
		return seen, len(msgs)
	}
	final := e.KillLoop(nil, 5, func() (int, int) { seen, _ := count(); return len(seen), int(written.Load()) })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	total := stop() * 10
	eventually(t, "every row in the topic", func() bool { seen, _ := count(); return len(seen) == total })
	seen, messages := count()
	for id := int64(1); id <= int64(total); id++ {
		require.NotZero(t, seen[id], "row %d was lost", id)
	}
	dups := messages - total
	t.Logf("%d rows, %d messages: %d repeats after %d kills", total, messages, dups, e.Kills)
	require.LessOrEqual(t, dups, e.Kills*batch, "more than one batch repeated per kill")
}

// change is one change the writer made, as a CDC event shows it.
type change struct {
	op    string
	id, v int64
}

// The CDC source delivers the snapshot and every change exactly once
// into the topic across kill -9 and restarts; a change repeats (with the
// same message id) only from a batch sent but not yet recorded when the
// process died.
func TestCDCSourceSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)`)
	const initial, batch = 300, 50
	db.exec(`INSERT INTO items SELECT g, 0 FROM generate_series(1, $1::int) g`, initial)
	e := newCrashEnv(t, sourceTOML(fmt.Sprintf("connection_string = %q\nmode = \"cdc\"\ntables = [\"items\"]\n"+
		"batch_size = %d\nreplication_slot = %q\nreplica_identity_full = true\ncapture_operations = [\"INSERT\", \"UPDATE\", \"DELETE\"]\n",
		db.dsn, batch, db.name)))

	first := e.Start()
	// A slot is listed while it is still being created; it has a
	// confirmed position once consistent. Every change from then on
	// follows the consistent point (earlier ones are in the snapshot).
	eventually(t, "the replication slot", func() bool {
		return db.count(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn IS NOT NULL`, db.name) == 1
	})
	w := &changeWriter{db: db, initial: initial, next: initial + 1, version: map[int64]int64{}, rng: rand.New(rand.NewPCG(1, 2))}
	stop := connectortest.Feed(t, 10*time.Millisecond, w.round)

	type tally struct {
		byID     map[[16]byte]int
		changes  map[change]int
		snapshot map[int64]bool
		messages int
	}
	count := func() tally {
		tl := tally{byID: map[[16]byte]int{}, changes: map[change]int{}, snapshot: map[int64]bool{}}
		for _, m := range e.Topic("pg", "rows") {
			tl.messages++
			tl.byID[m.ID]++
			var r record
			require.NoError(t, json.Unmarshal(m.Payload, &r))
			var img struct{ ID, V int64 }
			src := r.Data
			if r.Op == "DELETE" {
				src = r.OldData
			}
			require.NoError(t, json.Unmarshal(src, &img), "%s", m.Payload)
			if r.Op == "SNAPSHOT" {
				tl.snapshot[img.ID] = true
				continue
			}
			tl.changes[change{r.Op, img.ID, img.V}]++
		}
		return tl
	}
	final := e.KillLoop(first, 5, func() (int, int) {
		tl := count()
		return len(tl.snapshot) + len(tl.changes), initial + w.count()
	})
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	want := w.done
	missing := func() []change {
		tl := count()
		var out []change
		for _, c := range want {
			if tl.changes[c] == 0 {
				out = append(out, c)
			}
		}
		for id := int64(1); id <= initial; id++ {
			if !tl.snapshot[id] {
				out = append(out, change{"SNAPSHOT", id, -1})
			}
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(missing()) > 0 {
		if time.Now().After(deadline) {
			m := missing()
			t.Fatalf("%d of %d changes missing, first %v; state %s; slot at %s", len(m), len(want), m[:min(10, len(m))], e.State(), slotLSN(t, db, db.name))
		}
		time.Sleep(50 * time.Millisecond)
	}
	tl := count()
	for id := int64(1); id <= initial; id++ {
		require.True(t, tl.snapshot[id], "snapshot row %d was lost", id)
	}
	for _, c := range want {
		require.NotZero(t, tl.changes[c], "change %+v was lost", c)
	}
	repeats := 0
	for _, n := range tl.byID {
		repeats += n - 1
	}
	t.Logf("%d snapshot rows, %d changes, %d messages: %d repeated message ids after %d kills",
		initial, len(want), tl.messages, repeats, e.Kills)
	require.LessOrEqual(t, repeats, e.Kills*batch, "more than one batch repeated per kill")
}

// changeWriter inserts, updates and deletes rows in transactions of
// varied size (every 50th larger than a batch, so restarts land inside
// one) and records what it committed.
type changeWriter struct {
	db            *testDB
	initial, next int64
	version       map[int64]int64
	rng           *rand.Rand
	mu            sync.Mutex
	done          []change
}

func (w *changeWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.done)
}

// round commits one transaction.
func (w *changeWriter) round(i int) error {
	ctx := context.Background()
	tx, err := w.db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	size := 1 + w.rng.IntN(8)
	if i%50 == 20 {
		size = 130
	}
	var out []change
	version := maps.Clone(w.version)
	next := w.next
	for j := 0; j < size; j++ {
		switch k := w.rng.IntN(10); {
		case k < 6:
			_, err = tx.Exec(ctx, `INSERT INTO items VALUES ($1, 0)`, next)
			out = append(out, change{"INSERT", next, 0})
			version[next] = 0
			next++
		case k < 9:
			id := 1 + w.rng.Int64N(w.initial) // the initial rows are never deleted
			version[id]++
			_, err = tx.Exec(ctx, `UPDATE items SET v = $2 WHERE id = $1`, id, version[id])
			out = append(out, change{"UPDATE", id, version[id]})
		default:
			id := next - 1
			if id <= w.initial || version[id] < 0 {
				continue
			}
			_, err = tx.Exec(ctx, `DELETE FROM items WHERE id = $1`, id)
			out = append(out, change{"DELETE", id, version[id]})
			version[id] = -1
		}
		if err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	w.version, w.next = version, next
	w.done = append(w.done, out...)
	w.mu.Unlock()
	return nil
}

// The sink writes every message of a topic exactly once into its table
// across kill -9 and restarts: a batch replayed after a crash inserts
// nothing twice.
func TestSinkSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	db := newDB(t)
	e := newCrashEnv(t, fmt.Sprintf(`type = "sink"
key = "pg"
path = "libiggy_connector_postgres_sink"
[[streams]]
stream = "in"
topics = ["events"]
schema = "json"
batch_length = 40
poll_interval = "5ms"
consumer_group = "pg_sink"
[plugin_config]
connection_string = %q
target_table = "sink_rows"
auto_create_table = true
payload_format = "json"
`, db.dsn))
	ctx := context.Background()
	_, err := e.Client.CreateStream(ctx, "in")
	require.NoError(t, err)
	_, err = e.Client.CreateTopic(ctx, iggy.NamedID("in"), "events", 1)
	require.NoError(t, err)
	const perSend = 40
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		msgs := make([]iggy.Message, perSend)
		for j := range msgs {
			msgs[j].Payload = fmt.Appendf(nil, `{"n":%d,"sql":"'); DROP TABLE sink_rows; --"}`, i*perSend+j)
		}
		_, err := e.Client.SendMessages(ctx, iggy.NamedID("in"), iggy.NamedID("events"), iggy.ToPartition(0), msgs)
		return err
	})
	rows := func() int {
		var n int
		if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM sink_rows`).Scan(&n); err != nil {
			return 0 // not created yet
		}
		return n
	}
	final := e.KillLoop(nil, 5, func() (int, int) { return rows(), len(e.Topic("in", "events")) })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	total := stop() * perSend
	eventually(t, "every message in the table", func() bool { return rows() >= total })
	require.Equal(t, total, db.count(`SELECT count(*) FROM sink_rows`))
	require.Equal(t, total, db.count(`SELECT count(DISTINCT (payload->>'n')::int) FROM sink_rows`))
	require.Equal(t, total, db.count(`SELECT count(DISTINCT iggy_offset) FROM sink_rows`))
	t.Logf("%d messages, %d rows after %d kills", total, total, e.Kills)
}
