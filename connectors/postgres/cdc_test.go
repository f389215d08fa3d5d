package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"

	"github.com/ferryhq/ferry/connector"
	"github.com/jackc/pglogrepl"
	"github.com/stretchr/testify/require"
)

func cdcConfig(db *testDB, extra map[string]any) map[string]any {
	cfg := map[string]any{"connection_string": db.dsn, "mode": "cdc", "tables": []any{"items"},
		"replica_identity_full": true, "batch_size": int64(10), "replication_slot": db.name}
	for k, v := range extra {
		cfg[k] = v
	}
	return cfg
}

// pollChanges polls until a batch has messages, acknowledging the
// state-only batches before it.
func pollChanges(t *testing.T, s *Source) *connector.Batch {
	t.Helper()
	for {
		b := poll(t, s)
		if len(b.Messages) > 0 {
			return b
		}
		require.NoError(t, s.Ack(context.Background(), b))
	}
}

// finalLSN is the transaction LSN in a change's message id.
func finalLSN(m connector.Message) pglogrepl.LSN {
	return pglogrepl.LSN(binary.LittleEndian.Uint64(m.ID[8:]))
}

// collect polls (acking each batch) until n messages arrived.
func collect(t *testing.T, s *Source, n int) []record {
	t.Helper()
	var out []record
	for len(out) < n {
		b := poll(t, s)
		for _, m := range b.Messages {
			out = append(out, decode(t, m))
		}
		require.NoError(t, s.Ack(context.Background(), b))
	}
	require.Len(t, out, n, "more messages than expected")
	return out
}

func TestCDCSnapshotThenStream(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)`)
	db.exec(`INSERT INTO items SELECT g, 0 FROM generate_series(1, 25) g`)
	s := openSource(t, cdcConfig(db, nil), nil)
	// Changes after Open (after the slot's snapshot) come from the stream only.
	db.exec(`INSERT INTO items SELECT g, 0 FROM generate_series(26, 30) g`)
	db.exec(`UPDATE items SET v = 1 WHERE id = 3`)
	db.exec(`DELETE FROM items WHERE id = 4`)
	recs := collect(t, s, 25+5+1+1)
	for i, r := range recs[:25] {
		require.Equal(t, "SNAPSHOT", r.Op)
		require.Equal(t, int64(i+1), r.rowID(t))
		require.Equal(t, "public", r.Schema)
		require.Equal(t, "items", r.Table)
		require.JSONEq(t, `null`, string(r.OldData))
	}
	for i, r := range recs[25:30] {
		require.Equal(t, "INSERT", r.Op)
		require.Equal(t, int64(26+i), r.rowID(t))
		require.NotEmpty(t, r.LSN)
	}
	upd, del := recs[30], recs[31]
	require.Equal(t, "UPDATE", upd.Op)
	require.JSONEq(t, `{"id":3,"v":1}`, string(upd.Data))
	require.JSONEq(t, `{"id":3,"v":0}`, string(upd.OldData), "REPLICA IDENTITY FULL gives the whole old row")
	require.Equal(t, "DELETE", del.Op)
	require.JSONEq(t, `null`, string(del.Data))
	require.JSONEq(t, `{"id":4,"v":0}`, string(del.OldData))
	ts, err := time.Parse(time.RFC3339Nano, upd.TS)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), ts, time.Hour, "the commit time")
}

// slotLSN is the slot's confirmed_flush_lsn.
func slotLSN(t *testing.T, db *testDB, slot string) pglogrepl.LSN {
	t.Helper()
	var s string
	require.NoError(t, db.pool.QueryRow(context.Background(), `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&s))
	lsn, err := pglogrepl.ParseLSN(s)
	require.NoError(t, err)
	return lsn
}

func stateLSN(t *testing.T, b *connector.Batch) pglogrepl.LSN {
	t.Helper()
	var st cdcState
	require.NoError(t, json.Unmarshal(b.State, &st))
	lsn, err := pglogrepl.ParseLSN(st.LSN)
	require.NoError(t, err)
	return lsn
}

// The slot's confirmed position never passes what was acknowledged, and
// reaches it after the Ack.
func TestCDCSlotAdvancesOnlyOnAck(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)`)
	slot := db.name
	s := openSource(t, cdcConfig(db, map[string]any{"snapshot": "never"}), nil)
	start := slotLSN(t, db, slot)
	db.exec(`INSERT INTO items VALUES (1, 0)`)
	b1 := pollChanges(t, s)
	require.Len(t, b1.Messages, 1)
	db.exec(`INSERT INTO items VALUES (2, 0)`)
	b2 := pollChanges(t, s)
	require.Len(t, b2.Messages, 1)
	// For a few status intervals without an Ack, the slot stays where a
	// restart would replay both changes.
	for i := 0; i < 30; i++ {
		require.LessOrEqual(t, slotLSN(t, db, slot), finalLSN(b1.Messages[0]), "confirmed past an unacknowledged change")
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, s.Ack(context.Background(), b1))
	acked := stateLSN(t, b1)
	require.Greater(t, acked, start)
	eventually(t, "the slot to reach the first ack", func() bool { return slotLSN(t, db, slot) >= acked })
	for i := 0; i < 15; i++ {
		require.LessOrEqual(t, slotLSN(t, db, slot), finalLSN(b2.Messages[0]), "the second batch is not acknowledged")
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, s.Ack(context.Background(), b2))
	eventually(t, "the slot to reach the second ack", func() bool { return slotLSN(t, db, slot) >= stateLSN(t, b2) })
}

// A restart inside a transaction larger than a batch continues after the
// changes already delivered, with the same message ids.
func TestCDCResumeMidTransaction(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)`)
	cfg := cdcConfig(db, map[string]any{"snapshot": "never"})
	s := openSource(t, cfg, nil)
	db.exec(`INSERT INTO items SELECT g, 0 FROM generate_series(1, 30) g`) // one transaction
	db.exec(`INSERT INTO items VALUES (31, 0)`)
	b := pollChanges(t, s)
	n := int64(len(b.Messages)) // 10, or fewer when the reader lags behind Poll
	require.Equal(t, seq(1, n), ids(t, b))
	require.NoError(t, s.Ack(context.Background(), b))
	var st cdcState
	require.NoError(t, json.Unmarshal(b.State, &st))
	require.Equal(t, uint64(n), st.Seq, "the changes of the open transaction delivered")
	require.NotEmpty(t, st.Txn)
	firstIDs := map[[16]byte]bool{}
	for _, m := range b.Messages {
		firstIDs[m.ID] = true
	}
	b2 := pollChanges(t, s) // delivered but never acknowledged: replayed after the restart
	require.NoError(t, s.Close(context.Background()))

	s2 := openSource(t, cfg, b.State)
	var got []int64
	var replayed []connector.Message
	for int64(len(got)) < 31-n {
		b := poll(t, s2)
		got = append(got, ids(t, b)...)
		replayed = append(replayed, b.Messages...)
		require.NoError(t, s2.Ack(context.Background(), b))
	}
	require.Equal(t, seq(n+1, 31), got)
	for i, m := range replayed[:len(b2.Messages)] {
		require.Equal(t, b2.Messages[i].ID, m.ID, "a replayed change keeps its message id")
		require.False(t, firstIDs[m.ID])
	}
	seqOf := binary.LittleEndian.Uint64(replayed[0].ID[:8])
	require.Equal(t, uint64(n+1), seqOf)
}

// Poll with a canceled context never loses changes it already took.
func TestCDCPollCanceledKeepsChanges(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)`)
	s := openSource(t, cdcConfig(db, map[string]any{"snapshot": "never", "batch_size": int64(1000)}), nil)
	for i := 1; i <= 40; i++ {
		db.exec(`INSERT INTO items VALUES ($1, 0)`, i)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	carried := false
	eventually(t, "changes taken and carried over", func() bool {
		_, err := s.Poll(canceled)
		require.ErrorIs(t, err, context.Canceled)
		carried = carried || len(s.mode.(*cdc).carry) > 0
		return carried
	})
	for i := 0; i < 20; i++ {
		_, err := s.Poll(canceled)
		require.ErrorIs(t, err, context.Canceled)
	}
	var got []int64
	for len(got) < 40 {
		b := poll(t, s)
		got = append(got, ids(t, b)...)
		require.NoError(t, s.Ack(context.Background(), b))
	}
	require.Equal(t, seq(1, 40), got)
	stream := s.mode.(*cdc).stream
	require.NoError(t, s.Close(context.Background()))
	select {
	case <-stream.done:
	default:
		t.Fatal("the replication reader outlived Close")
	}
	require.NoError(t, s.Close(context.Background()), "Close is idempotent")
}

// A snapshot cut short resumes after its last acknowledged row, and the
// stream then brings every change since the slot was created.
func TestCDCResumeSnapshot(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)`)
	db.exec(`CREATE TABLE nokey (n int)`)
	db.exec(`INSERT INTO items SELECT g, 0 FROM generate_series(1, 35) g`)
	db.exec(`INSERT INTO nokey SELECT g FROM generate_series(1, 12) g`)
	cfg := cdcConfig(db, map[string]any{"tables": []any{"items", "nokey"}})
	s := openSource(t, cfg, nil)
	b1 := poll(t, s)
	b2 := poll(t, s)
	require.Equal(t, seq(1, 20), append(ids(t, b1), ids(t, b2)...))
	require.NoError(t, s.Close(context.Background()))
	db.exec(`UPDATE items SET v = 7 WHERE id IN (5, 30)`)
	db.exec(`INSERT INTO items VALUES (36, 0)`)

	s2 := openSource(t, cfg, b2.State)
	// The resumed snapshot is a new one: it already sees row 36 and row
	// 30's update, which the stream then brings too (at least once, never
	// a gap).
	recs := collect(t, s2, 16+12+3)
	var snapIDs []int64
	var nokey []int64
	for _, r := range recs[:28] {
		require.Equal(t, "SNAPSHOT", r.Op)
		if r.Table == "nokey" {
			var v struct{ N int64 }
			require.NoError(t, json.Unmarshal(r.Data, &v))
			nokey = append(nokey, v.N)
			continue
		}
		snapIDs = append(snapIDs, r.rowID(t))
	}
	require.Equal(t, seq(21, 36), snapIDs)
	require.ElementsMatch(t, seq(1, 12), nokey, "a table without a primary key is read in ctid order")
	ops := []string{recs[28].Op, recs[29].Op, recs[30].Op}
	require.Equal(t, []string{"UPDATE", "UPDATE", "INSERT"}, ops)
	require.Equal(t, []int64{5, 30, 36}, []int64{recs[28].rowID(t), recs[29].rowID(t), recs[30].rowID(t)})
}

// With a slot but no saved state (state lost, or a crash before the first
// batch was saved), the snapshot is taken anew and the stream starts at
// the slot: nothing is missed.
func TestCDCSlotExistsWithoutState(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)`)
	cfg := cdcConfig(db, map[string]any{"snapshot": "never"})
	first := openSource(t, cfg, nil)
	require.NoError(t, first.Close(context.Background()))
	db.exec(`INSERT INTO items SELECT g, 0 FROM generate_series(1, 5) g`)
	cfg["snapshot"] = "initial"
	s := openSource(t, cfg, nil)
	recs := collect(t, s, 10)
	for i, r := range recs {
		want := "SNAPSHOT"
		if i >= 5 {
			want = "INSERT"
		}
		require.Equal(t, want, r.Op, "record %d", i)
		require.Equal(t, int64(i%5+1), r.rowID(t))
	}
}

func TestCDCSlotProblems(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY)`)
	old := db.name + "_old"
	db.exec(`SELECT pg_create_logical_replication_slot($1, 'test_decoding')`, old)
	src, err := NewSource(connector.Config{Plugin: plugin(cdcConfig(db, map[string]any{"replication_slot": old}))})
	require.NoError(t, err)
	err = src.Open(context.Background(), nil)
	require.ErrorContains(t, err, `replication slot "`+old+`" uses plugin "test_decoding"`)
	require.NoError(t, src.Close(context.Background()))

	gone := db.name + "_gone"
	src, err = NewSource(connector.Config{Plugin: plugin(cdcConfig(db, map[string]any{"replication_slot": gone}))})
	require.NoError(t, err)
	state, _ := json.Marshal(cdcState{Mode: "cdc", Slot: gone, LSN: "0/16B3748"})
	require.ErrorContains(t, src.Open(context.Background(), state), `replication slot "`+gone+`" is gone`)
	require.NoError(t, src.Close(context.Background()))
}

// eventually waits for cond (connectortest.Eventually).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	connectortest.Eventually(t, what, cond)
}

// WAL with nothing published (another table's writes) reaches Poll as a
// state-only batch; once it is acknowledged the slot moves past it, so a
// quiet table does not pin WAL.
func TestCDCQuietSlotAdvancesOnAckedKeepalive(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)`)
	db.exec(`CREATE TABLE other (n int)`)
	s := openSource(t, cdcConfig(db, map[string]any{"snapshot": "never"}), nil)
	start := slotLSN(t, db, db.name)
	db.exec(`INSERT INTO other SELECT generate_series(1, 1000)`)
	var b *connector.Batch
	eventually(t, "a state-only batch past the other table's WAL", func() bool {
		b = poll(t, s)
		require.Empty(t, b.Messages)
		return stateLSN(t, b) > start
	})
	require.Equal(t, start, slotLSN(t, db, db.name), "not before the Ack")
	require.NoError(t, s.Ack(context.Background(), b))
	eventually(t, "the slot to move", func() bool { return slotLSN(t, db, db.name) >= stateLSN(t, b) })
}

func TestCDCTruncateAndCaptureFilter(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)`)
	s := openSource(t, cdcConfig(db, map[string]any{"snapshot": "never", "capture_operations": []any{"insert", "TRUNCATE"}}), nil)
	db.exec(`INSERT INTO items VALUES (1, 0)`)
	db.exec(`UPDATE items SET v = 1`)
	db.exec(`TRUNCATE items`)
	db.exec(`INSERT INTO items VALUES (2, 0)`)
	recs := collect(t, s, 3)
	require.Equal(t, []string{"INSERT", "TRUNCATE", "INSERT"}, []string{recs[0].Op, recs[1].Op, recs[2].Op})
	require.JSONEq(t, `null`, string(recs[1].Data))
	require.Equal(t, int64(2), recs[2].rowID(t))
}

// A slot still held by an earlier connection (a source closed a moment
// ago, whose server backend has not ended yet) makes Open wait for it,
// not fail: the conformance suite's reopen failed so on a loaded machine.
func TestCDCOpenWaitsForABusySlot(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL)`)
	first := openSource(t, cdcConfig(db, map[string]any{"snapshot": "never"}), nil)
	var state []byte // none: the slot exists, so the second streams from it at once
	src, err := NewSource(connector.Config{Key: "pg", Plugin: plugin(cdcConfig(db, map[string]any{"snapshot": "never"}))})
	require.NoError(t, err)
	second := src.(*Source)
	t.Cleanup(func() { _ = second.Close(context.Background()) })
	opened := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		opened <- second.Open(ctx, state)
	}()
	time.Sleep(300 * time.Millisecond) // the second Open meets the busy slot
	select {
	case err := <-opened:
		t.Fatalf("Open returned while the slot was held: %v", err)
	default:
	}
	require.NoError(t, first.Close(context.Background()))
	require.NoError(t, <-opened)
	db.exec(`INSERT INTO items VALUES (1, 1)`)
	recs := collect(t, second, 1)
	require.Equal(t, "INSERT", recs[0].Op)
}
