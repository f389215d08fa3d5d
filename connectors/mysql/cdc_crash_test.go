package mysql

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mysqltest"
	"github.com/stretchr/testify/require"
)

// cdcChange is one row change as the writer made it and an event shows it.
type cdcChange struct {
	op    string
	id, v int64
}

func (c cdcChange) String() string { return fmt.Sprintf("%s %d v%d", c.op, c.id, c.v) }

// cdcWriter makes transactions of inserts, updates and deletes on
// items(id, v), one at a time, and records the changes in commit order.
// Every tenth transaction is large: 150 changes, three batches.
type cdcWriter struct {
	db   *sql.DB
	rng  *rand.Rand
	mu   sync.Mutex
	next int64
	live []int64 // ids that exist, ascending
	ver  map[int64]int64
	done []cdcChange
}

func (w *cdcWriter) round(i int) error {
	tx, err := w.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var made []cdcChange
	live := append([]int64(nil), w.live...)
	ver := map[int64]int64{}
	version := func(id int64) int64 {
		if v, ok := ver[id]; ok {
			return v
		}
		return w.ver[id]
	}
	insert := func(n int) error {
		q, args := "INSERT INTO items (id, v) VALUES ", []any{}
		for k := range n {
			id := w.next + int64(k)
			if k > 0 {
				q += ", "
			}
			q += "(?, 0)"
			args = append(args, id)
			made = append(made, cdcChange{"INSERT", id, 0})
			live = append(live, id)
			ver[id] = 0
		}
		w.next += int64(n)
		_, err := tx.Exec(q, args...)
		return err
	}
	update := func(from, to int64) error { // every live id in [from, to], ascending
		for _, id := range live {
			if id >= from && id <= to {
				ver[id] = version(id) + 1
				made = append(made, cdcChange{"UPDATE", id, ver[id]})
			}
		}
		_, err := tx.Exec("UPDATE items SET v = v + 1 WHERE id BETWEEN ? AND ?", from, to)
		return err
	}
	if i%10 == 9 {
		first := w.next
		if err := insert(100); err != nil {
			return err
		}
		if err := update(first, first+49); err != nil {
			return err
		}
	} else {
		if err := insert(1 + w.rng.IntN(4)); err != nil {
			return err
		}
		if len(live) > 3 {
			k := w.rng.IntN(len(live) - 2)
			if err := update(live[k], live[k+1]); err != nil {
				return err
			}
			victim := live[w.rng.IntN(len(live))]
			made = append(made, cdcChange{"DELETE", victim, version(victim)})
			if _, err := tx.Exec("DELETE FROM items WHERE id = ?", victim); err != nil {
				return err
			}
			for j, id := range live {
				if id == victim {
					live = append(live[:j:j], live[j+1:]...)
					break
				}
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.live = live
	for id, v := range ver {
		w.ver[id] = v
	}
	w.done = append(w.done, made...)
	return nil
}

func (w *cdcWriter) changes() []cdcChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]cdcChange(nil), w.done...)
}

// Ten kill -9s of the runtime mid-stream, with the initial snapshot, a
// steady stream of small transactions and large ones (three batches
// each): the topic holds every snapshot row and every change exactly
// once, in commit order. The broker deduplicates by message id, as
// `ferry serve --dedup-max-entries` does; each change's id is fixed by
// its GTID and place in the transaction, and the state records how far
// into a transaction delivery got, so a restart resumes after the last
// change delivered: no id appears twice, no change is missing.
func TestCDCExactlyOnceAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const initial, batch = 200, 50
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn)
	mustExec(t, db, "CREATE TABLE items (id BIGINT PRIMARY KEY, v BIGINT NOT NULL)")
	w := &cdcWriter{db: db, rng: rand.New(rand.NewPCG(7, 9)), next: initial + 1, ver: map[int64]int64{}}
	for id := int64(1); id <= initial; id++ {
		mustExec(t, db, "INSERT INTO items VALUES (?, 0)", id)
		w.live = append(w.live, id)
	}
	e := connectortest.NewCrashEnv(t, map[string]string{"in.toml": fmt.Sprintf(`type = "source"
key = "cdc"
path = "mysql"
[[streams]]
stream = "bridge"
topic = "items"
schema = "json"
linger_time = "0ms"
[plugin_config]
dsn = %q
mode = "cdc"
tables = ["items"]
batch_size = %d
`, dsn, batch)}, brokertest.Config(func(c *broker.Config) { c.Dedup = broker.Dedup{MaxEntries: 1 << 20} }))

	type tally struct {
		ids      map[[16]byte]int
		snapshot map[int64]int
		changes  []cdcChange
	}
	read := func() tally {
		tl := tally{ids: map[[16]byte]int{}, snapshot: map[int64]int{}}
		for _, m := range e.Topic("bridge", "items") {
			tl.ids[m.ID]++
			var ev event
			require.NoError(t, json.Unmarshal(m.Payload, &ev), "%s", m.Payload)
			img := ev.Data
			if ev.Op == "DELETE" {
				img = ev.OldData
			}
			var row struct{ ID, V int64 }
			require.NoError(t, json.Unmarshal(img, &row), "%s", m.Payload)
			if ev.Op == "SNAPSHOT" {
				tl.snapshot[row.ID]++
				continue
			}
			tl.changes = append(tl.changes, cdcChange{ev.Op, row.ID, row.V})
		}
		return tl
	}
	first := e.Start()
	connectortest.Eventually(t, "the snapshot to start", func() bool { return len(e.Topic("bridge", "items")) > 0 })
	stop := connectortest.Feed(t, 15*time.Millisecond, w.round)
	final := e.KillLoop(first, 10, func() (int, int) {
		tl := read()
		return len(tl.snapshot) + len(tl.changes), initial + len(w.changes())
	})
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	rounds := stop()
	want := w.changes()
	connectortest.Eventually(t, "every change in the topic", func() bool { return len(read().changes) >= len(want) })
	tl := read()
	for id, n := range tl.ids {
		require.Equal(t, 1, n, "message id %x appears %d times", id, n)
	}
	for id := int64(1); id <= initial; id++ {
		require.Equal(t, 1, tl.snapshot[id], "snapshot row %d", id)
	}
	require.Len(t, tl.snapshot, initial)
	for i := range want {
		require.Less(t, i, len(tl.changes), "change %d (%v) missing", i, want[i])
		require.Equal(t, want[i], tl.changes[i], "change %d, in commit order", i)
	}
	require.Len(t, tl.changes, len(want), "no change beyond those made")
	t.Logf("%d snapshot rows and %d changes (%d transactions), each once and in order, across %d kills",
		initial, len(want), rounds, e.Kills)
}
