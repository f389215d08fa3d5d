package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// snapState is how far the initial snapshot got.
type snapState struct {
	// Tables are the published tables as [schema, table], fixed when the
	// snapshot began.
	Tables [][2]string `json:"tables"`
	// Table indexes Tables: the one being read.
	Table int `json:"table"`
	// Key is the last row's primary key (text values), or its ctid for a
	// table without one; empty before the table's first row.
	Key []string `json:"key,omitempty"`
	// Rows counts the rows sent, for their message ids.
	Rows uint64 `json:"rows"`
}

// snapshotter reads the published tables in one REPEATABLE READ
// transaction, a page at a time in primary-key order.
type snapshotter struct {
	c       *cdc
	conn    *pgx.Conn
	tx      pgx.Tx
	point   pglogrepl.LSN
	st      snapState
	keys    map[int][]string // key columns per table; empty: use ctid
	started time.Time
}

// snapshotBit marks snapshot rows' message ids (seq = bit | row number).
const snapshotBit = 1 << 63

// newSnapshotter opens the snapshot transaction: in the slot's exported
// snapshot when given (the first run), else in a new one (a resumed or
// slot-exists start; rows changed since point may then be read in their
// newer state, and their changes still follow in the stream, so nothing is
// missed).
func newSnapshotter(ctx context.Context, c *cdc, exported string, point pglogrepl.LSN, resume *snapState) (*snapshotter, error) {
	conn, err := pgx.ConnectConfig(ctx, c.s.poolCfg.ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("snapshot: connect: %w", err)
	}
	sn := &snapshotter{c: c, conn: conn, point: point, keys: map[int][]string{}, started: time.Now()}
	fail := func(err error) (*snapshotter, error) {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	sn.tx, err = conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fail(fmt.Errorf("snapshot: begin: %w", err))
	}
	if exported != "" {
		// The name comes from the server and was checked against [0-9A-F-]+.
		if _, err := sn.tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+exported+"'"); err != nil {
			return fail(fmt.Errorf("snapshot: import the slot's snapshot %s: %w", exported, err))
		}
	}
	if resume != nil {
		sn.st = *resume
		return sn, nil
	}
	tables, err := c.publishedTables(ctx)
	if err != nil {
		return fail(err)
	}
	for _, t := range tables {
		sn.st.Tables = append(sn.st.Tables, [2]string{t[0], t[1]})
	}
	c.s.log.Info("initial snapshot", "tables", len(tables), "stream_from", point, "exported", exported != "")
	return sn, nil
}

// next reads up to batch_size rows; done means the snapshot is complete
// (the batch's state then says "stream from point").
func (sn *snapshotter) next(ctx context.Context) (*connector.Batch, bool, error) {
	b := &connector.Batch{Schema: connector.SchemaJSON}
	before := sn.st
	for len(b.Messages) < sn.c.set.batchSize && sn.st.Table < len(sn.st.Tables) {
		want := sn.c.set.batchSize - len(b.Messages)
		n, err := sn.page(ctx, b, want)
		if err != nil {
			sn.st = before // the rows read are not returned: read them again
			return nil, false, err
		}
		if n < want {
			sn.st.Table++
			sn.st.Key = nil
		}
	}
	done := sn.st.Table >= len(sn.st.Tables)
	st := cdcState{Mode: "cdc", Slot: sn.c.set.slot, LSN: sn.point.String()}
	if !done {
		snap := sn.st
		snap.Key = append([]string(nil), sn.st.Key...)
		st.Snapshot = &snap
	}
	var err error
	if b.State, err = json.Marshal(st); err != nil {
		return nil, false, fmt.Errorf("encode state: %w", err)
	}
	return b, done, nil
}

// page appends up to limit rows of the current table after the last key.
func (sn *snapshotter) page(ctx context.Context, b *connector.Batch, limit int) (int, error) {
	i := sn.st.Table
	schema, name := sn.st.Tables[i][0], sn.st.Tables[i][1]
	table := pgx.Identifier{schema, name}.Sanitize()
	keys, err := sn.keyColumns(ctx, i, table)
	if err != nil {
		return 0, err
	}
	var sql string
	var args []any
	if len(keys) == 0 {
		sql = `SELECT ctid::text AS "ferry.ctid", * FROM ` + table
		if len(sn.st.Key) == 1 {
			sql += " WHERE ctid > $1::tid"
			args = append(args, sn.st.Key[0])
		}
		sql += fmt.Sprintf(" ORDER BY ctid LIMIT %d", limit)
	} else {
		quoted := make([]string, len(keys))
		params := make([]string, len(keys))
		for k, col := range keys {
			quoted[k] = pgx.Identifier{col}.Sanitize()
			params[k] = fmt.Sprintf("$%d", k+1)
		}
		sql = "SELECT * FROM " + table
		if len(sn.st.Key) == len(keys) {
			sql += fmt.Sprintf(" WHERE (%s) > (%s)", strings.Join(quoted, ", "), strings.Join(params, ", "))
			for _, v := range sn.st.Key {
				args = append(args, v)
			}
		}
		sql += fmt.Sprintf(" ORDER BY %s LIMIT %d", strings.Join(quoted, ", "), limit)
	}
	rows, err := sn.tx.Query(ctx, sql, append([]any{pgx.QueryResultFormats{pgx.TextFormatCode}}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("snapshot of %s: %w", table, err)
	}
	defer rows.Close()
	fields := rows.FieldDescriptions()
	cols := make([]column, len(fields))
	keyIdx := make([]int, 0, len(keys))
	for f, fd := range fields {
		cols[f] = column{name: fd.Name, oid: fd.DataTypeOID}
		for _, k := range keys {
			if fd.Name == k {
				keyIdx = append(keyIdx, f)
			}
		}
	}
	if len(keys) == 0 {
		cols[0].name = "" // the ctid
		keyIdx = []int{0}
	}
	n := 0
	lsn := sn.point.String()
	for rows.Next() {
		raw := rows.RawValues()
		e := envelope{table: name, schema: schema, op: "SNAPSHOT", ts: sn.started, lsn: lsn,
			data: appendObject(nil, sn.c.s.types, cols, raw)}
		sn.st.Rows++
		b.Messages = append(b.Messages, connector.Message{
			ID:      messageID(sn.point, snapshotBit|sn.st.Rows),
			Payload: e.append(nil),
		})
		key := make([]string, len(keyIdx))
		for k, idx := range keyIdx {
			key[k] = string(raw[idx])
		}
		sn.st.Key = key
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("snapshot of %s: %w", table, err)
	}
	return n, nil
}

// keyColumns returns the table's primary key columns in key order.
func (sn *snapshotter) keyColumns(ctx context.Context, i int, table string) ([]string, error) {
	if k, ok := sn.keys[i]; ok {
		return k, nil
	}
	rows, err := sn.tx.Query(ctx, `SELECT a.attname::text FROM pg_index x
		JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = ANY (x.indkey)
		WHERE x.indrelid = $1::regclass AND x.indisprimary
		ORDER BY array_position(x.indkey::int2[], a.attnum)`, table)
	if err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", table, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("primary key of %s: %w", table, err)
	}
	sn.keys[i] = keys
	return keys, nil
}

func (sn *snapshotter) close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	_ = sn.tx.Rollback(ctx)
	_ = sn.conn.Close(ctx)
}
