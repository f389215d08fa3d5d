package mysql

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/jsonx"
	"vitess.io/vitess/go/mysql"
	"vitess.io/vitess/go/mysql/replication"
	"vitess.io/vitess/go/vt/vttls"
)

// Timing of the binlog connection.
const (
	heartbeatPeriod = time.Second      // the server sends a heartbeat when idle this long
	silenceLimit    = 15 * time.Second // no event this long: the connection is dead
)

// MariaDB event types vitess does not decode: compressed events
// (log_bin_compress=ON) hold rows Ferry would otherwise miss.
const (
	eQueryCompressed     = 165
	eRowsCompressedFirst = 166
	eRowsCompressedLast  = 171
)

// item is one thing the reader hands to Poll: a row change, or the
// commit of a transaction (msg nil).
type item struct {
	msg *connector.Message
	txn replication.MariadbGTID
	seq uint64
}

// tableEntry is a TABLE_MAP the stream has seen.
type tableEntry struct {
	raw      []byte // the event's body, to recognise a repeat
	database string
	name     string
	captured bool
	tm       *mysql.TableMap
	cols     []column
}

// streamer owns the binlog connection: one goroutine reads events into
// a bounded channel.
type streamer struct {
	c     *cdcSource
	conn  *mysql.Conn
	items chan item
	errc  chan error
	done  chan struct{}
	stop  context.CancelFunc
	last  atomic.Int64 // unix nanoseconds of the last event

	// owned by the reader goroutine
	format     mysql.BinlogFormat
	tables     map[uint64]*tableEntry
	inTxn      bool
	standalone bool
	txn        replication.MariadbGTID
	ts         time.Time
	seq        uint64
	skipTxn    replication.MariadbGTID // a transaction partly delivered before a restart
	skipSeq    uint64                  // its changes to skip
}

// binlogParams are vitess's connection parameters for the source's DSN.
func binlogParams(c *conn) (*mysql.ConnParams, error) {
	p := &mysql.ConnParams{Uname: c.cfg.User, Pass: c.cfg.Passwd, ConnectTimeoutMs: uint64(c.cfg.Timeout.Milliseconds()),
		SslMode: vttls.Disabled}
	switch c.cfg.Net {
	case "unix":
		p.UnixSocket = c.cfg.Addr
	default:
		host, port, err := net.SplitHostPort(c.cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("server address %q: %w", c.cfg.Addr, err)
		}
		p.Host = host
		if p.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("server address %q: port: %w", c.cfg.Addr, err)
		}
	}
	switch c.cfg.TLSConfig {
	case "", "false":
	case "preferred", "skip-verify":
		p.SslMode = vttls.Preferred
	case "true":
		p.SslMode, p.ServerName = vttls.VerifyIdentity, p.Host
	default:
		return nil, fmt.Errorf("tls %q: the binlog connection takes false, true, skip-verify or preferred", c.cfg.TLSConfig)
	}
	return p, nil
}

// startStreamer connects and asks the server for the binlog after
// from.gtid, skipping the first from.seq changes of from.txn (delivered
// before a restart).
func startStreamer(ctx context.Context, c *cdcSource, from binlogPos) (*streamer, error) {
	params, err := binlogParams(c.conn)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.Connect(ctx, params)
	if err != nil {
		return nil, connector.Unavailable(fmt.Errorf("binlog connection to %s: %w", c.conn.describe(), err))
	}
	fail := func(what string, err error) (*streamer, error) {
		conn.Close()
		err = fmt.Errorf("binlog connection to %s: %s: %w", c.conn.describe(), what, err)
		if errors.Is(err, net.ErrClosed) || isConnErr(err) {
			return nil, connector.Unavailable(err)
		}
		return nil, err
	}
	for _, q := range []string{
		// Events come with the server's checksums, stripped after the
		// format description says which; the heartbeat shows a quiet
		// connection is alive.
		"SET @master_binlog_checksum = @@global.binlog_checksum",
		"SET @master_heartbeat_period = " + strconv.FormatInt(heartbeatPeriod.Nanoseconds(), 10),
	} {
		if _, err := conn.ExecuteFetch(q, 0, false); err != nil {
			return fail(q, err)
		}
	}
	// The GTID position's text is printed from numbers (parseGTIDSet), so
	// it is safe in vitess's SET @slave_connect_state='...'.
	start := replication.Position{GTIDSet: from.gtid}
	if from.gtid == nil {
		start.GTIDSet = replication.MariadbGTIDSet{}
	}
	if err := conn.SendBinlogDumpGTIDCommand(c.set.serverID, "", 0, start, 0); err != nil {
		return fail("start the binlog dump at "+from.gtid.String(), err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	st := &streamer{c: c, conn: conn, items: make(chan item, 2*c.set.batchSize), errc: make(chan error, 1),
		done: make(chan struct{}), stop: stop, tables: map[uint64]*tableEntry{},
		skipTxn: from.txn, skipSeq: from.seq}
	st.last.Store(time.Now().UnixNano())
	go st.run(runCtx)
	go st.watch(runCtx)
	return st, nil
}

// isConnErr says whether a vitess error is the connection failing.
func isConnErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "(errno 2013)") || strings.Contains(s, "(errno 2006)") || strings.Contains(s, "(errno 2003)") ||
		strings.Contains(s, "EOF") || strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe") ||
		strings.Contains(s, "(errno 1927)") || strings.Contains(s, "(errno 1053)")
}

func (st *streamer) close() {
	st.stop()
	st.conn.Close()
	<-st.done
}

// watch closes the connection when ctx ends or the server fell silent
// (no event, not even a heartbeat, for silenceLimit).
func (st *streamer) watch(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			st.conn.Close()
			return
		case <-st.done:
			return
		case <-tick.C:
			if time.Since(time.Unix(0, st.last.Load())) > silenceLimit {
				st.conn.Close()
				return
			}
		}
	}
}

func (st *streamer) run(ctx context.Context) {
	defer close(st.done)
	// The runtime isolates panics in calls it makes; this goroutine is
	// ours, so a panic (in decoding) becomes Poll's error instead of
	// ending the process.
	defer func() {
		if r := recover(); r != nil {
			st.errc <- fmt.Errorf("binlog stream: panic: %v", r)
		}
	}()
	if err := st.loop(ctx); err != nil && ctx.Err() == nil {
		st.errc <- err
	}
}

func (st *streamer) loop(ctx context.Context) error {
	for {
		ev, err := st.conn.ReadBinlogEvent()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			err = fmt.Errorf("binlog stream from %s: %w", st.c.conn.describe(), err)
			if isConnErr(err) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "closed") {
				return connector.Unavailable(err)
			}
			return err
		}
		st.last.Store(time.Now().UnixNano())
		if err := st.safeEvent(ctx, ev); err != nil {
			return err
		}
	}
}

// safeEvent is event, with a panic in decoding (vitess's decoders trust
// the lengths inside an event) turned into an error.
func (st *streamer) safeEvent(ctx context.Context, ev mysql.BinlogEvent) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("binlog stream: malformed event (%d bytes, type %d) in %s: %v", len(ev.Bytes()), eventType(ev), st.txn, r)
		}
	}()
	return st.event(ctx, ev)
}

func eventType(ev mysql.BinlogEvent) int {
	if b := ev.Bytes(); len(b) > 4 {
		return int(b[4])
	}
	return -1
}

// event handles one binlog event.
func (st *streamer) event(ctx context.Context, ev mysql.BinlogEvent) error {
	if !ev.IsValid() {
		return fmt.Errorf("binlog stream: invalid event (%d bytes)", len(ev.Bytes()))
	}
	if ev.IsFormatDescription() {
		f, err := ev.Format()
		if err != nil {
			return fmt.Errorf("binlog stream: format description: %w", err)
		}
		st.format = f
		return nil
	}
	if st.format.IsZero() {
		return nil // the fake rotate before the format description
	}
	ev, _, err := ev.StripChecksum(st.format)
	if err != nil {
		return fmt.Errorf("binlog stream: %w", err)
	}
	typ := ev.Bytes()[4]
	switch {
	case typ == eQueryCompressed || (typ >= eRowsCompressedFirst && typ <= eRowsCompressedLast):
		return fmt.Errorf("binlog stream: compressed event (type %d): set log_bin_compress=OFF on the server; the mysql source cannot read compressed binlog events", typ)
	case ev.IsGTID():
		g, hasBegin, _, _, err := ev.GTID(st.format)
		if err != nil {
			return fmt.Errorf("binlog stream: GTID event: %w", err)
		}
		mg, ok := g.(replication.MariadbGTID)
		if !ok {
			return fmt.Errorf("binlog stream: GTID %v is not a MariaDB GTID", g)
		}
		st.inTxn, st.standalone, st.txn, st.seq = true, !hasBegin, mg, 0
		st.ts = time.Unix(int64(ev.Timestamp()), 0).UTC()
	case ev.IsXID():
		return st.commit(ctx)
	case ev.IsQuery():
		q, err := ev.Query(st.format)
		if err != nil {
			return fmt.Errorf("binlog stream: query event: %w", err)
		}
		switch strings.ToUpper(strings.TrimSpace(q.SQL)) {
		case "BEGIN":
			return nil
		case "COMMIT":
			return st.commit(ctx)
		}
		// DDL (or a statement logged as such): tables may have changed;
		// TABLE_MAPs after it carry the new columns, and cached
		// information_schema columns are read again.
		st.c.schema.forget("")
		clear(st.tables)
		if st.standalone {
			return st.commit(ctx)
		}
	case ev.IsTableMap():
		return st.tableMap(ctx, ev)
	case ev.IsWriteRows(), ev.IsUpdateRows(), ev.IsDeleteRows():
		return st.rows(ctx, ev)
	case ev.IsPartialUpdateRows():
		return errors.New("binlog stream: partial JSON update rows (MySQL's binlog_row_value_options=PARTIAL_JSON) are not supported")
	}
	return nil
}

func (st *streamer) commit(ctx context.Context) error {
	if !st.inTxn {
		return nil
	}
	if st.txn == st.skipTxn {
		st.skipTxn, st.skipSeq = replication.MariadbGTID{}, 0
	}
	st.inTxn, st.standalone = false, false
	return st.push(ctx, item{txn: st.txn})
}

func (st *streamer) push(ctx context.Context, it item) error {
	select {
	case st.items <- it:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tableMap records a TABLE_MAP; the columns of a captured table come
// from its optional metadata or from information_schema.
func (st *streamer) tableMap(ctx context.Context, ev mysql.BinlogEvent) error {
	id := ev.TableID(st.format)
	body := ev.Bytes()[st.format.HeaderLength:]
	if t, ok := st.tables[id]; ok && bytes.Equal(t.raw, body) {
		return nil
	}
	tm, err := ev.TableMap(st.format)
	if err != nil {
		return fmt.Errorf("binlog stream: table map event: %w", err)
	}
	t := &tableEntry{raw: append([]byte(nil), body...), database: tm.Database, name: tm.Name, tm: tm,
		captured: st.c.set.captures(tm.Database, tm.Name)}
	if t.captured {
		idLen := 6
		if st.format.HeaderSize(19) == 6 { // TABLE_MAP_EVENT
			idLen = 4
		}
		if t.cols, err = tableColumns(ctx, st.c.schema, tm, body, idLen); err != nil {
			return fmt.Errorf("binlog stream: %w", err)
		}
	}
	st.tables[id] = t
	return nil
}

// tableColumns is the columns of a TABLE_MAP event.
func tableColumns(ctx context.Context, schema *schemaCache, tm *mysql.TableMap, body []byte, idLen int) ([]column, error) {
	opt, n, err := optionalMetadata(body, idLen)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", tm.Database, tm.Name, err)
	}
	if n != len(tm.Types) {
		return nil, fmt.Errorf("%s.%s: table map: %d columns, %d types", tm.Database, tm.Name, n, len(tm.Types))
	}
	rts := make([]byte, n)
	for i, t := range tm.Types {
		rts[i] = realType(t, tm.Metadata[i])
	}
	meta, err := parseTableMeta(opt, rts)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", tm.Database, tm.Name, err)
	}
	return schema.columns(ctx, tm.Database, tm.Name, tm.Types, tm.Metadata, meta)
}

// rows turns a rows event into one change per row.
func (st *streamer) rows(ctx context.Context, ev mysql.BinlogEvent) error {
	if !st.inTxn {
		return errors.New("binlog stream: rows event outside a transaction")
	}
	t, ok := st.tables[ev.TableID(st.format)]
	if !ok {
		return fmt.Errorf("binlog stream: rows event for table id %d without its table map", ev.TableID(st.format))
	}
	if !t.captured {
		return nil
	}
	op := "INSERT"
	switch {
	case ev.IsUpdateRows():
		op = "UPDATE"
	case ev.IsDeleteRows():
		op = "DELETE"
	}
	if err := checkRowsHeader(ev, st.format, len(t.tm.Types)); err != nil {
		return fmt.Errorf("binlog stream: rows of %s.%s: %w", t.database, t.name, err)
	}
	rs, err := ev.Rows(st.format, t.tm)
	if err != nil {
		return fmt.Errorf("binlog stream: rows of %s.%s: %w", t.database, t.name, err)
	}
	for i := range rs.Rows {
		st.seq++
		if st.txn == st.skipTxn && st.seq <= st.skipSeq {
			continue // delivered before the restart
		}
		if !st.c.set.capture[op] {
			continue
		}
		m, err := st.change(t, op, &rs, &rs.Rows[i])
		if err != nil {
			return fmt.Errorf("binlog stream: %s of %s.%s in %s: %w", op, t.database, t.name, st.txn, err)
		}
		if err := st.push(ctx, item{msg: m, txn: st.txn, seq: st.seq}); err != nil {
			return err
		}
	}
	return nil
}

// checkRowsHeader checks what vitess's Rows trusts: the event's column
// count is the table map's, and each image has a column (vitess loops
// forever on images of none).
func checkRowsHeader(ev mysql.BinlogEvent, f mysql.BinlogFormat, ncols int) error {
	typ := ev.Bytes()[4]
	r := reader{b: ev.Bytes()[f.HeaderLength:]}
	if f.HeaderSize(typ) == 6 {
		r.skip(4 + 2)
	} else {
		r.skip(6 + 2)
	}
	if typ >= 30 && typ <= 32 { // version 2: extra data, its length included
		n := int(r.byte()) | int(r.byte())<<8
		r.skip(n - 2)
	}
	cols := r.lenenc()
	if r.err != nil || cols != uint64(ncols) {
		return fmt.Errorf("event has %d columns, its table map %d", cols, ncols)
	}
	images := 1
	if ev.IsUpdateRows() {
		images = 2
	}
	for range images {
		bm := r.b[r.i:min(len(r.b), r.i+(ncols+7)/8)]
		r.skip((ncols + 7) / 8)
		if r.err != nil {
			return errors.New("event truncated in its column bitmaps")
		}
		any := false
		for c := range ncols {
			if bm[c/8]&(1<<(c%8)) != 0 {
				any = true
			}
		}
		if !any {
			return errors.New("event has a row image of no column")
		}
	}
	return nil
}

func (st *streamer) change(t *tableEntry, op string, rs *mysql.Rows, row *mysql.Row) (*connector.Message, error) {
	e := envelope{table: t.name, schema: t.database, op: op, ts: st.ts, gtid: st.txn.String()}
	var err error
	if op != "INSERT" {
		if e.oldData, err = appendRow(nil, t.cols, rs.IdentifyColumns.Bit, row.NullIdentifyColumns.Bit, row.Identify); err != nil {
			return nil, err
		}
	}
	if op != "DELETE" {
		if e.data, err = appendRow(nil, t.cols, rs.DataColumns.Bit, row.NullColumns.Bit, row.Data); err != nil {
			return nil, err
		}
	}
	id, err := changeID(st.txn, st.seq)
	if err != nil {
		return nil, err
	}
	return &connector.Message{ID: id, Payload: e.append(make([]byte, 0, len(e.data)+len(e.oldData)+len(t.name)+len(t.database)+128)),
		OriginTimestamp: st.ts}, nil
}

// envelope is a change event as JSON, in the postgres source's shape.
type envelope struct {
	table, schema, op string
	ts                time.Time
	gtid              string
	data, oldData     []byte // JSON; nil is null
}

func (e *envelope) append(dst []byte) []byte {
	dst = append(dst, `{"table_name":`...)
	dst = jsonx.AppendString(dst, e.table)
	dst = append(dst, `,"schema":`...)
	dst = jsonx.AppendString(dst, e.schema)
	dst = append(dst, `,"operation_type":`...)
	dst = jsonx.AppendString(dst, e.op)
	dst = append(dst, `,"timestamp":"`...)
	dst = e.ts.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","gtid":"`...)
	dst = append(dst, e.gtid...)
	dst = append(dst, `","data":`...)
	dst = appendRaw(dst, e.data)
	dst = append(dst, `,"old_data":`...)
	dst = appendRaw(dst, e.oldData)
	return append(dst, '}')
}

func appendRaw(dst, v []byte) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	return append(dst, v...)
}
