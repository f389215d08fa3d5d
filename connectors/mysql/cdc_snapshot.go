package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
	"vitess.io/vitess/go/mysql/replication"
)

// snapshotter reads the captured tables in one consistent-snapshot
// transaction, a page at a time in primary-key order.
type snapshotter struct {
	c       *cdcSource
	conn    *sql.Conn
	point   replication.MariadbGTIDSet // where streaming starts
	st      snapState
	keys    map[int][]string // primary key columns per table; empty: none
	offset  int              // rows of a keyless table read in this transaction
	started time.Time
}

// newSnapshotter opens a REPEATABLE READ transaction WITH CONSISTENT
// SNAPSHOT. Fresh (resume nil), the snapshot's own binlog position
// (binlog_snapshot_file/position, as GTIDs by BINLOG_GTID_POS) is where
// streaming will start: the snapshot and the stream meet with neither a
// gap nor an overlap. Resumed, the new snapshot continues after the last
// row delivered and streaming still starts at point: rows changed
// meanwhile may be read in their newer state, and their changes follow.
func newSnapshotter(ctx context.Context, c *cdcSource, resume *snapState, point replication.MariadbGTIDSet) (*snapshotter, error) {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot: connect: %w", err)
	}
	sn := &snapshotter{c: c, conn: conn, point: point, keys: map[int][]string{}, started: time.Now().UTC()}
	fail := func(err error) (*snapshotter, error) {
		sn.close()
		return nil, err
	}
	for _, q := range []string{"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
		"START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fail(fmt.Errorf("snapshot: %s: %w", q, err))
		}
	}
	if resume != nil {
		sn.st = *resume
		if sn.st.Table < len(sn.st.Tables) && len(sn.st.Key) == 0 {
			sn.st.Key = nil
		}
		return sn, nil
	}
	var file, pos string
	rows, err := conn.QueryContext(ctx, "SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return fail(fmt.Errorf("snapshot: binlog position: %w", err))
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return fail(fmt.Errorf("snapshot: binlog position: %w", err))
		}
		switch strings.ToLower(k) {
		case "binlog_snapshot_file":
			file = v
		case "binlog_snapshot_position":
			pos = v
		}
	}
	rows.Close()
	if file == "" || pos == "" {
		return fail(fmt.Errorf("snapshot: the server reports no binlog_snapshot_file/position (is log_bin on?)"))
	}
	var gtid sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS(?, ?)", file, pos).Scan(&gtid); err != nil || !gtid.Valid {
		return fail(fmt.Errorf("snapshot: BINLOG_GTID_POS(%s, %s): %v", file, pos, err))
	}
	if sn.point, err = parseGTIDSet(gtid.String); err != nil {
		return fail(fmt.Errorf("snapshot: GTID position %q: %w", gtid.String, err))
	}
	if sn.st.Tables, err = c.snapshotTables(ctx, conn); err != nil {
		return fail(err)
	}
	c.log.Info("initial snapshot", "tables", len(sn.st.Tables), "stream_from", gtid.String, "binlog", file+":"+pos)
	return sn, nil
}

// snapshotTables are the configured tables, or every base table of the
// database.
func (c *cdcSource) snapshotTables(ctx context.Context, conn *sql.Conn) ([][2]string, error) {
	if len(c.set.order) > 0 {
		return c.set.order, nil
	}
	rows, err := conn.QueryContext(ctx, `SELECT TABLE_NAME FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME`, c.set.database)
	if err != nil {
		return nil, fmt.Errorf("snapshot: tables of %s: %w", c.set.database, err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("snapshot: tables of %s: %w", c.set.database, err)
		}
		out = append(out, [2]string{c.set.database, t})
	}
	return out, rows.Err()
}

// next reads up to batch_size rows; done means the snapshot is complete
// (the batch's state then says "stream from point").
func (sn *snapshotter) next(ctx context.Context) (*connector.Batch, bool, error) {
	b := &connector.Batch{Schema: connector.SchemaJSON}
	before, offset := sn.st, sn.offset
	for len(b.Messages) < sn.c.set.batchSize && sn.st.Table < len(sn.st.Tables) {
		want := sn.c.set.batchSize - len(b.Messages)
		n, err := sn.page(ctx, b, want)
		if err != nil {
			sn.st, sn.offset = before, offset // the rows read are not returned: read them again
			return nil, false, err
		}
		if n < want {
			sn.st.Table++
			sn.st.Key, sn.offset = nil, 0
		}
	}
	done := sn.st.Table >= len(sn.st.Tables)
	st := cdcState{Mode: "cdc", GTID: sn.point.String()}
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

// page appends up to limit rows of the current table after the last key
// (or, for a table without a primary key, after the rows read so far in
// this transaction).
func (sn *snapshotter) page(ctx context.Context, b *connector.Batch, limit int) (int, error) {
	i := sn.st.Table
	database, name := sn.st.Tables[i][0], sn.st.Tables[i][1]
	table, err := tableName(database + "." + name)
	if err != nil {
		return 0, fmt.Errorf("snapshot of %s.%s: %w", database, name, err)
	}
	if strings.Contains(database, ".") { // tableName splits at the first dot
		return 0, fmt.Errorf("snapshot of %s.%s: a database name with a dot cannot be named", database, name)
	}
	keys, err := sn.keyColumns(ctx, i)
	if err != nil {
		return 0, err
	}
	query := "SELECT * FROM " + table
	var args []any
	if len(keys) > 0 {
		quoted := make([]string, len(keys))
		for k, col := range keys {
			quoted[k], _ = ident(col)
		}
		if len(sn.st.Key) == len(keys) {
			query += " WHERE (" + strings.Join(quoted, ", ") + ") > (" + strings.TrimSuffix(strings.Repeat("?, ", len(keys)), ", ") + ")"
			for _, v := range sn.st.Key {
				args = append(args, v)
			}
		}
		query += " ORDER BY " + strings.Join(quoted, ", ") + " LIMIT " + strconv.Itoa(limit)
	} else {
		query += " LIMIT " + strconv.Itoa(limit) + " OFFSET " + strconv.Itoa(sn.offset)
	}
	rows, err := sn.conn.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("snapshot of %s: %w", table, err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return 0, fmt.Errorf("snapshot of %s: %w", table, err)
	}
	names := make([]string, len(types))
	for k, t := range types {
		names[k] = t.Name()
	}
	keyIdx := make([]int, len(keys))
	for k, col := range keys {
		keyIdx[k] = -1
		for f, n := range names {
			if n == col {
				keyIdx[k] = f
			}
		}
		if keyIdx[k] < 0 {
			return 0, fmt.Errorf("snapshot of %s: primary key column %q not in the result", table, col)
		}
	}
	gtid := sn.point.String()
	n := 0
	for rows.Next() {
		vals := make([]any, len(names))
		ptrs := make([]any, len(names))
		for k := range vals {
			ptrs[k] = &vals[k]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return 0, fmt.Errorf("snapshot of %s: %w", table, err)
		}
		rec := make(map[string]any, len(names))
		for k, nm := range names {
			rec[nm] = jsonValue(types[k], vals[k])
		}
		data, err := json.Marshal(orderedRecord{names, rec})
		if err != nil {
			return 0, fmt.Errorf("snapshot of %s: row as JSON: %w", table, err)
		}
		idKey := database + "\x00" + name + "\x00"
		if len(keys) > 0 {
			key := make([]string, len(keys))
			for k, f := range keyIdx {
				key[k] = text(vals[f])
			}
			sn.st.Key = key
			idKey += "k\x00" + strings.Join(key, "\x00")
		} else {
			sn.offset++
			idKey += "n\x00" + strconv.Itoa(sn.offset)
		}
		sn.st.Rows++
		e := envelope{table: name, schema: database, op: "SNAPSHOT", ts: sn.started, gtid: gtid, data: data}
		b.Messages = append(b.Messages, connector.Message{
			ID:              uuid.NewSHA1(idSpace, []byte("snapshot\x00"+gtid+"\x00"+idKey)),
			Payload:         e.append(nil),
			OriginTimestamp: sn.started,
		})
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("snapshot of %s: %w", table, err)
	}
	return n, nil
}

// keyColumns returns the table's primary key columns in key order.
func (sn *snapshotter) keyColumns(ctx context.Context, i int) ([]string, error) {
	if k, ok := sn.keys[i]; ok {
		return k, nil
	}
	database, name := sn.st.Tables[i][0], sn.st.Tables[i][1]
	rows, err := sn.conn.QueryContext(ctx, `SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION`, database, name)
	if err != nil {
		return nil, fmt.Errorf("primary key of %s.%s: %w", database, name, err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("primary key of %s.%s: %w", database, name, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("primary key of %s.%s: %w", database, name, err)
	}
	sn.keys[i] = keys
	return keys, nil
}

func (sn *snapshotter) close() {
	if sn.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = sn.conn.ExecContext(ctx, "ROLLBACK")
		_ = sn.conn.Close()
		sn.conn = nil
	}
}
