package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/gather"
)

// cdcSource is the mysql source in CDC mode: the initial snapshot, then
// row changes from the binary log.
type cdcSource struct {
	conn *conn
	set  *cdcSettings
	log  *slog.Logger

	db     *sql.DB
	schema *schemaCache
	snap   *snapshotter // during the initial snapshot
	stream *streamer    // once streaming
	read   binlogPos    // after the last batch polled
	first  bool         // the first Poll reports the start position alone
	carry  []item       // taken from the stream but not yet returned (ctx ended)

	mu      sync.Mutex
	pending map[*connector.Batch]*binlogPos // nil for snapshot batches
	acked   binlogPos                       // the last acknowledged batch's
}

func newCDCSource(c *conn, parsed *connector.Settings, log *slog.Logger) *cdcSource {
	return &cdcSource{conn: c, set: cdcSettingsFrom(parsed, c.cfg.DBName), log: log,
		pending: map[*connector.Batch]*binlogPos{}}
}

// Open checks the server's binlog settings and takes the saved state:
// the snapshot goes on, or streaming resumes after the last change
// delivered. Without a state it starts the snapshot, or (snapshot =
// "never") streams from the server's current GTID position.
func (c *cdcSource) Open(ctx context.Context, state []byte) error {
	st, pos, err := decodeCDCState(state)
	if err != nil {
		return fmt.Errorf("mysql source: %w", err)
	}
	db, err := c.conn.open(ctx)
	if err != nil {
		return orUnavailable(fmt.Errorf("mysql source: %w", err))
	}
	c.db, c.schema = db, newSchemaCache(db)
	fail := func(err error) error {
		db.Close()
		c.db = nil
		return orUnavailable(fmt.Errorf("mysql source: %w", err))
	}
	if err := c.checkServer(ctx); err != nil {
		return fail(err)
	}
	switch {
	case st != nil && st.Snapshot != nil:
		c.log.Info("resuming the initial snapshot", "table", st.Snapshot.Table, "rows", st.Snapshot.Rows, "stream_from", st.GTID)
		if c.snap, err = newSnapshotter(ctx, c, st.Snapshot, pos.gtid); err != nil {
			return fail(err)
		}
	case st != nil:
		c.log.Info("resuming the binlog stream", "gtid", st.GTID, "txn", st.Txn, "seq", st.Seq)
	case c.set.snapshot:
		if c.snap, err = newSnapshotter(ctx, c, nil, nil); err != nil {
			return fail(err)
		}
		pos.gtid = c.snap.point
	default:
		var cur string
		if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&cur); err != nil {
			return fail(fmt.Errorf("read gtid_binlog_pos: %w", err))
		}
		if pos.gtid, err = parseGTIDSet(cur); err != nil {
			return fail(fmt.Errorf("gtid_binlog_pos %q: %w", cur, err))
		}
		c.first = true
		c.log.Info("streaming from the current binlog position (snapshot = \"never\")", "gtid", cur)
	}
	c.read, c.acked = pos.clone(), pos.clone()
	return nil
}

// checkServer refuses a server whose binary log cannot serve CDC, saying
// which setting is wrong.
func (c *cdcSource) checkServer(ctx context.Context) error {
	var version, format, image string
	var logBin int
	err := c.db.QueryRowContext(ctx, "SELECT @@version, @@log_bin, @@binlog_format, @@binlog_row_image").Scan(&version, &logBin, &format, &image)
	if err != nil {
		return fmt.Errorf("read the server's binlog settings: %w", err)
	}
	switch {
	case !strings.Contains(version, "MariaDB"):
		return fmt.Errorf("server %s is not MariaDB: the cdc mode reads MariaDB's GTIDs (domain-server-seq) and was tested on MariaDB 10.11 only", version)
	case logBin != 1:
		return errors.New("the server writes no binary log: start it with log_bin (and binlog_format=ROW, binlog_row_image=FULL)")
	case !strings.EqualFold(format, "ROW"):
		return fmt.Errorf("binlog_format is %s: the cdc mode reads row events; set binlog_format=ROW", format)
	case !strings.EqualFold(image, "FULL"):
		return fmt.Errorf("binlog_row_image is %s: the cdc mode needs whole row images; set binlog_row_image=FULL", image)
	}
	return nil
}

// Poll returns the next snapshot rows, or the next changes of the
// stream: up to batch_size, waiting a moment for more after the first.
func (c *cdcSource) Poll(ctx context.Context) (*connector.Batch, error) {
	if c.snap != nil {
		b, done, err := c.snap.next(ctx)
		if err != nil {
			return nil, orUnavailable(fmt.Errorf("mysql source: snapshot: %w", err))
		}
		if done {
			c.snap.close()
			c.snap = nil
			c.log.Info("initial snapshot done; streaming", "from", c.read.gtid.String())
		}
		c.track(b, nil)
		return b, nil
	}
	if c.first {
		c.first = false
		return c.stateBatch(nil)
	}
	if c.stream == nil {
		st, err := startStreamer(ctx, c, c.read)
		if err != nil {
			return nil, fmt.Errorf("mysql source: %w", err)
		}
		c.stream, c.carry = st, nil
	}
	b, err := c.pollStream(ctx)
	if err != nil && ctx.Err() == nil {
		// The connection is gone (or an event could not be read): start
		// again after the last batch polled; the runtime retries.
		c.stream.close()
		c.stream, c.carry = nil, nil
		return nil, fmt.Errorf("mysql source: %w", err)
	}
	return b, err
}

// cdcLinger is how long a poll waits for more changes after the first.
const cdcLinger = 5 * time.Millisecond

func (c *cdcSource) pollStream(ctx context.Context) (*connector.Batch, error) {
	taken, msgs, err := gather.Batch(ctx, c.stream.items, c.stream.errc, c.carry,
		func(it item) bool { return it.msg != nil }, c.set.batchSize, cdcLinger)
	c.carry = nil
	if err != nil {
		if ctx.Err() != nil {
			c.carry = taken // not lost: the next Poll returns them
		}
		return nil, err
	}
	msgsOut := make([]connector.Message, 0, msgs)
	pos := c.read.clone()
	for _, it := range taken {
		if it.msg != nil {
			msgsOut = append(msgsOut, *it.msg)
			pos.txn, pos.seq = it.txn, it.seq
		} else {
			pos.commit(it.txn)
		}
	}
	c.read = pos
	return c.stateBatch(msgsOut)
}

// stateBatch is a batch of msgs whose State is the read position.
func (c *cdcSource) stateBatch(msgs []connector.Message) (*connector.Batch, error) {
	st, err := c.read.encode()
	if err != nil {
		return nil, err
	}
	b := &connector.Batch{Schema: connector.SchemaJSON, Messages: msgs, State: st}
	p := c.read.clone()
	c.track(b, &p)
	return b, nil
}

func (c *cdcSource) track(b *connector.Batch, p *binlogPos) {
	c.mu.Lock()
	c.pending[b] = p
	c.mu.Unlock()
}

// Ack records the batch's position as acknowledged (in Iggy, its State
// saved). Nothing on the server moves: MariaDB keeps no position for a
// binlog reader, the saved State is the position.
func (c *cdcSource) Ack(_ context.Context, b *connector.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pending[b]
	if !ok {
		return errors.New("mysql source: ack of a batch this source did not return")
	}
	delete(c.pending, b)
	if p != nil {
		c.acked = *p
	}
	return nil
}

// Nack keeps the batch pending: the runtime sends the same batch again.
func (c *cdcSource) Nack(context.Context, *connector.Batch, error) {}

// ackedState is the state of the last acknowledged batch (for tests and
// logs).
func (c *cdcSource) ackedState() cdcState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acked.state()
}

// Close stops the stream and the snapshot and closes the pool.
func (c *cdcSource) Close(context.Context) error {
	if c.stream != nil {
		c.stream.close()
		c.stream = nil
	}
	if c.snap != nil {
		c.snap.close()
		c.snap = nil
	}
	if c.db != nil {
		err := c.db.Close()
		c.db = nil
		return err
	}
	return nil
}

var (
	_ connector.Source = (*cdcSource)(nil)
	_ connector.Acker  = (*cdcSource)(nil)
)
