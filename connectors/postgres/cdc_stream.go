package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/backoff"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Timing of the replication connection.
const (
	receiveWake    = time.Second      // how often the reader looks up from the socket
	statusInterval = 10 * time.Second // the longest gap between standby status updates
)

// item is one thing the reader hands to Poll: a change event, or the end
// of a transaction.
type item struct {
	msg *connector.Message // a change; nil for a commit
	txn pglogrepl.LSN      // the change's transaction (its final LSN)
	seq uint64             // the change's number in its transaction, from 1
	end pglogrepl.LSN      // a commit: the transaction's end LSN
}

// relation is a table as pgoutput described it.
type relation struct {
	schema, name string
	cols         []column
}

// streamer owns the replication connection: one goroutine reads changes
// into a bounded channel and sends standby status updates that report the
// acknowledged position and never more.
type streamer struct {
	c     *cdc
	conn  *pgconn.PgConn
	items chan item
	errc  chan error
	done  chan struct{}
	stop  context.CancelFunc

	acked atomic.Uint64 // LSN: every transaction ending here or before is acknowledged

	// owned by the reader goroutine
	rels       map[uint32]*relation
	inTxn      bool
	txn        pglogrepl.LSN
	commitTime time.Time
	seq        uint64
	skipTxn    pglogrepl.LSN // a transaction partly delivered before a restart
	skipSeq    uint64        // its changes to skip
	lastEnd    pglogrepl.LSN // the position of the last item pushed
	idleAt     time.Time     // when the last keepalive position was pushed
	reported   pglogrepl.LSN
	reportedAt time.Time
}

// startStreamer starts replication at from.lsn, skipping the first from.seq
// changes of transaction from.txn (they were delivered before a restart).
func startStreamer(ctx context.Context, c *cdc, from position) (*streamer, error) {
	conn, err := startReplication(ctx, c, from)
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	st := &streamer{c: c, conn: conn, items: make(chan item, 2*c.set.batchSize), errc: make(chan error, 1),
		done: make(chan struct{}), stop: stop, rels: map[uint32]*relation{},
		skipTxn: from.txn, skipSeq: from.seq, lastEnd: from.lsn}
	st.acked.Store(uint64(from.lsn))
	go st.run(runCtx)
	return st, nil
}

// slotBusyWait bounds how long startReplication waits for a slot still
// held by a previous connection: the server releases it only once that
// connection's backend has ended, which lags its close (and after a
// crash lasts until wal_sender_timeout; the runtime's restart backoff
// covers that).
const slotBusyWait = 10 * time.Second

// startReplication opens a replication connection streaming the slot from
// from.lsn, waiting while the slot is still active for an earlier
// connection (SQLSTATE 55006, object_in_use).
func startReplication(ctx context.Context, c *cdc, from position) (*pgconn.PgConn, error) {
	args := []string{"proto_version '1'", "publication_names '" + c.set.publication + "'"}
	retry := backoff.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	deadline := time.Now().Add(slotBusyWait)
	for {
		conn, err := c.replicationConn(ctx)
		if err != nil {
			return nil, err
		}
		err = pglogrepl.StartReplication(ctx, conn, c.set.slot, from.lsn,
			pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: args})
		if err == nil {
			return conn, nil
		}
		conn.Close(context.WithoutCancel(ctx))
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "55006" || time.Now().After(deadline) {
			return nil, fmt.Errorf("start replication from slot %q at %s: %w", c.set.slot, from.lsn, err)
		}
		if err := backoff.Sleep(ctx, retry.Next()); err != nil {
			return nil, fmt.Errorf("start replication from slot %q: %w", c.set.slot, err)
		}
	}
}

// acknowledge records that every transaction ending at or before lsn is
// durable downstream (and its state saved).
func (st *streamer) acknowledge(lsn pglogrepl.LSN) {
	for {
		cur := st.acked.Load()
		if uint64(lsn) <= cur || st.acked.CompareAndSwap(cur, uint64(lsn)) {
			return
		}
	}
}

func (st *streamer) close(ctx context.Context) error {
	st.stop()
	<-st.done
	return st.conn.Close(context.WithoutCancel(ctx))
}

func (st *streamer) run(ctx context.Context) {
	defer close(st.done)
	// The runtime isolates panics in calls it makes; this goroutine is
	// ours, so a panic (a decoder bug) becomes Poll's error instead of
	// ending the process.
	defer func() {
		if r := recover(); r != nil {
			st.errc <- fmt.Errorf("replication stream: panic: %v", r)
		}
	}()
	if err := st.loop(ctx); err != nil && ctx.Err() == nil {
		st.errc <- err
	}
}

func (st *streamer) loop(ctx context.Context) error {
	for {
		if err := st.status(false); err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, receiveWake)
		raw, err := st.conn.ReceiveMessage(rctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("replication stream: %w", err)
		}
		switch m := raw.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(m))
		case *pgproto3.CopyData:
			if err := st.copyData(ctx, m.Data); err != nil {
				return err
			}
		}
	}
}

func (st *streamer) copyData(ctx context.Context, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		k, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return fmt.Errorf("replication stream: %w", err)
		}
		if k.ReplyRequested {
			if err := st.status(true); err != nil {
				return err
			}
		}
		// Everything before the keepalive's WAL end was sent before it, so
		// outside a transaction it is a position like a commit's end: it
		// goes to Poll (as a batch with only a state), and once that is
		// acknowledged the slot may move past WAL that holds nothing
		// published (a quiet table on a busy server would otherwise pin WAL
		// forever). At most one a second.
		if !st.inTxn && k.ServerWALEnd > st.lastEnd && time.Since(st.idleAt) >= time.Second {
			st.idleAt = time.Now()
			return st.push(ctx, item{end: k.ServerWALEnd})
		}
	case pglogrepl.XLogDataByteID:
		x, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return fmt.Errorf("replication stream: %w", err)
		}
		return st.xlog(ctx, x)
	}
	return nil
}

// status sends a standby status update when the acknowledged position
// moved, when statusInterval passed, or when forced. It reports the
// acknowledged position as written, flushed and applied: never more.
func (st *streamer) status(force bool) error {
	pos := pglogrepl.LSN(st.acked.Load())
	if pos == 0 || (!force && pos == st.reported && time.Since(st.reportedAt) < statusInterval) {
		return nil
	}
	err := pglogrepl.SendStandbyStatusUpdate(context.Background(), st.conn, pglogrepl.StandbyStatusUpdate{
		WALWritePosition: pos, WALFlushPosition: pos, WALApplyPosition: pos})
	if err != nil {
		return fmt.Errorf("replication stream: send status: %w", err)
	}
	st.reported, st.reportedAt = pos, time.Now()
	return nil
}

// push hands an item to Poll, keeping the connection alive while Poll is
// slow.
func (st *streamer) push(ctx context.Context, it item) error {
	if it.msg == nil {
		st.lastEnd = it.end
	}
	select {
	case st.items <- it:
		return nil
	default:
	}
	tick := time.NewTicker(receiveWake)
	defer tick.Stop()
	for {
		select {
		case st.items <- it:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := st.status(false); err != nil {
				return err
			}
		}
	}
}

// xlog handles one pgoutput message.
func (st *streamer) xlog(ctx context.Context, x pglogrepl.XLogData) error {
	msg, err := parsePgoutput(x.WALData)
	if err != nil {
		return fmt.Errorf("replication stream: decode pgoutput message at %s: %w", x.WALStart, err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		rel := &relation{schema: m.Namespace, name: m.RelationName, cols: make([]column, len(m.Columns))}
		for i, col := range m.Columns {
			rel.cols[i] = column{name: col.Name, oid: col.DataType}
		}
		st.rels[m.RelationID] = rel
	case *pglogrepl.BeginMessage:
		st.inTxn, st.txn, st.commitTime, st.seq = true, m.FinalLSN, m.CommitTime, 0
	case *pglogrepl.CommitMessage:
		if st.txn == st.skipTxn {
			st.skipTxn, st.skipSeq = 0, 0
		}
		st.inTxn = false
		return st.push(ctx, item{end: m.TransactionEndLSN})
	case *pglogrepl.InsertMessage:
		return st.change(ctx, x.WALStart, "INSERT", m.RelationID, nil, m.Tuple)
	case *pglogrepl.UpdateMessage:
		return st.change(ctx, x.WALStart, "UPDATE", m.RelationID, m.OldTuple, m.NewTuple)
	case *pglogrepl.DeleteMessage:
		return st.change(ctx, x.WALStart, "DELETE", m.RelationID, m.OldTuple, nil)
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if err := st.change(ctx, x.WALStart, "TRUNCATE", id, nil, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// parsePgoutput decodes a pgoutput message. pglogrepl trusts the counts
// and lengths inside a message (it allocates what they say, then panics
// when the message is shorter), so they are checked first, and a panic
// still becomes an error.
func parsePgoutput(data []byte) (msg pglogrepl.Message, err error) {
	if len(data) == 0 {
		return nil, errors.New("empty message")
	}
	if !sizesFit(data) {
		return nil, fmt.Errorf("malformed message (%d bytes, type %q): counts or lengths exceed it", len(data), data[0])
	}
	defer func() {
		if r := recover(); r != nil {
			msg, err = nil, fmt.Errorf("malformed message (%d bytes, type %q): %v", len(data), data[0], r)
		}
	}()
	return pglogrepl.Parse(data)
}

// change turns one row change into an event.
func (st *streamer) change(ctx context.Context, lsn pglogrepl.LSN, op string, relID uint32, before, after *pglogrepl.TupleData) error {
	if !st.inTxn {
		return fmt.Errorf("replication stream: %s at %s outside a transaction", op, lsn)
	}
	st.seq++
	if st.txn == st.skipTxn && st.seq <= st.skipSeq {
		return nil // delivered before the restart
	}
	if !st.c.set.capture[op] {
		return nil
	}
	rel, ok := st.rels[relID]
	if !ok {
		return fmt.Errorf("replication stream: %s at %s: unknown relation %d", op, lsn, relID)
	}
	e := envelope{table: rel.name, schema: rel.schema, op: op, ts: st.commitTime, lsn: lsn.String()}
	var err error
	if before != nil {
		if e.oldData, err = st.tuple(rel, before, nil); err != nil {
			return err
		}
	}
	if after != nil {
		if e.data, err = st.tuple(rel, after, before); err != nil {
			return err
		}
	}
	payload := e.append(make([]byte, 0, len(e.data)+len(e.oldData)+len(rel.name)+len(rel.schema)+160))
	m := &connector.Message{ID: messageID(st.txn, st.seq), Payload: payload, OriginTimestamp: st.commitTime}
	return st.push(ctx, item{msg: m, txn: st.txn, seq: st.seq})
}

// tuple encodes a row image. An unchanged TOAST value ('u') is taken from
// the old image when that has it, else left out.
func (st *streamer) tuple(rel *relation, t, old *pglogrepl.TupleData) ([]byte, error) {
	if len(t.Columns) > len(rel.cols) {
		return nil, fmt.Errorf("replication stream: %s.%s: tuple has %d columns, relation %d", rel.schema, rel.name, len(t.Columns), len(rel.cols))
	}
	size := 2
	for _, col := range t.Columns {
		size += len(col.Data) + 24
	}
	dst := append(make([]byte, 0, size), '{')
	first := true
	for i, col := range t.Columns {
		data, kind := col.Data, col.DataType
		if kind == pglogrepl.TupleDataTypeToast && old != nil && i < len(old.Columns) &&
			old.Columns[i].DataType == pglogrepl.TupleDataTypeText {
			data, kind = old.Columns[i].Data, pglogrepl.TupleDataTypeText
		}
		switch kind {
		case pglogrepl.TupleDataTypeToast:
			continue
		case pglogrepl.TupleDataTypeNull:
			data = nil
		case pglogrepl.TupleDataTypeText:
			if data == nil {
				data = []byte{} // an empty value, not NULL
			}
		default:
			return nil, errors.New("replication stream: binary tuple data was not requested")
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendObjectField(dst, st.c.s.types, rel.cols[i], data)
	}
	return append(dst, '}'), nil
}

// sizesFit reports whether the counts and lengths in a truncate, insert,
// update or delete message fit in it.
func sizesFit(m []byte) bool {
	switch m[0] {
	case 'T': // 'T' count(4) options(1) ids(4 each)
		return len(m) >= 6 && uint64(binary.BigEndian.Uint32(m[1:]))*4 <= uint64(len(m)-6)
	case 'I', 'U', 'D': // type relid(4) then tuples, each after a 'K', 'O' or 'N'
		i := 5
		for i < len(m) {
			if m[i] != 'K' && m[i] != 'O' && m[i] != 'N' {
				return true // not a tuple: pglogrepl reports it
			}
			n, ok := tupleSize(m[i+1:])
			if !ok {
				return false
			}
			i += 1 + n
		}
	}
	return true
}

// tupleSize is the length of the TupleData at the start of b.
func tupleSize(b []byte) (int, bool) {
	if len(b) < 2 {
		return 0, false
	}
	cols := int(binary.BigEndian.Uint16(b))
	i := 2
	for c := 0; c < cols; c++ {
		if i >= len(b) {
			return 0, false
		}
		kind := b[i]
		i++
		if kind == pglogrepl.TupleDataTypeText || kind == pglogrepl.TupleDataTypeBinary {
			if len(b)-i < 4 {
				return 0, false
			}
			n := uint64(binary.BigEndian.Uint32(b[i:]))
			i += 4
			if n > uint64(len(b)-i) {
				return 0, false
			}
			i += int(n)
		}
	}
	return i, true
}
