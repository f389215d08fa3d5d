package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/gather"
	"github.com/jackc/pglogrepl"
)

// cdcState is the CDC source's saved state.
//
// Streaming, every transaction that ended at or before LSN is delivered,
// and so are the first Seq changes of the transaction whose final LSN is
// Txn. During the initial snapshot, Snapshot says how far it got; LSN is
// then where streaming will start.
type cdcState struct {
	Mode     string     `json:"mode"`
	Slot     string     `json:"slot"`
	LSN      string     `json:"lsn"`
	Txn      string     `json:"txn,omitempty"`
	Seq      uint64     `json:"seq,omitempty"`
	Snapshot *snapState `json:"snapshot,omitempty"`
}

// position is where the stream has been read or acknowledged to.
type position struct {
	lsn pglogrepl.LSN // end of the last complete transaction
	txn pglogrepl.LSN // final LSN of a partly delivered transaction, or 0
	seq uint64        // changes of txn delivered
}

func (p position) state(slot string) cdcState {
	st := cdcState{Mode: "cdc", Slot: slot, LSN: p.lsn.String()}
	if p.txn != 0 {
		st.Txn, st.Seq = p.txn.String(), p.seq
	}
	return st
}

// pendingAck is what Ack of a batch confirms.
type pendingAck struct {
	lsn    pglogrepl.LSN // complete transactions up to here
	stream bool          // false for snapshot batches
}

// cdc is the logical replication mode.
type cdc struct {
	s   *Source
	set *sourceSettings

	snap   *snapshotter // during the initial snapshot
	stream *streamer    // once streaming
	start  position     // where streaming starts
	read   position     // the position after the last batch polled
	carry  []item       // taken from the stream but not yet returned (ctx ended)

	mu      sync.Mutex
	pending map[*connector.Batch]pendingAck
}

func newCDC(s *Source) *cdc {
	return &cdc{s: s, set: s.set, pending: map[*connector.Batch]pendingAck{}}
}

// decodeCDCState reads a saved state (nil for none) and checks it
// belongs to slot.
func decodeCDCState(state []byte, slot string) (*cdcState, position, error) {
	var pos position
	if len(state) == 0 {
		return nil, pos, nil
	}
	st := &cdcState{}
	if err := json.Unmarshal(state, st); err != nil || st.Mode != "cdc" {
		return nil, pos, fmt.Errorf("saved state is not a CDC state (%d bytes); delete the connector's state to start over", len(state))
	}
	if st.Slot != slot {
		return nil, pos, fmt.Errorf("saved state belongs to replication slot %q, not %q; delete the connector's state to start over", st.Slot, slot)
	}
	var err error
	if pos.lsn, err = pglogrepl.ParseLSN(st.LSN); err != nil {
		return nil, pos, fmt.Errorf("saved state: lsn %q: %w", st.LSN, err)
	}
	if st.Txn != "" {
		if pos.txn, err = pglogrepl.ParseLSN(st.Txn); err != nil {
			return nil, pos, fmt.Errorf("saved state: txn %q: %w", st.Txn, err)
		}
		pos.seq = st.Seq
	}
	if sn := st.Snapshot; sn != nil && (sn.Table < 0 || sn.Table > len(sn.Tables)) {
		return nil, pos, fmt.Errorf("saved state: snapshot table %d of %d", sn.Table, len(sn.Tables))
	}
	return st, pos, nil
}

func (c *cdc) open(ctx context.Context, state []byte) error {
	st, pos, err := decodeCDCState(state, c.set.slot)
	if err != nil {
		return err
	}
	if err := c.setup(ctx); err != nil {
		return err
	}
	slot, err := c.slotInfo(ctx)
	if err != nil {
		return err
	}
	switch {
	case st != nil:
		err = c.resume(ctx, st, pos, slot)
	case slot == nil:
		err = c.createSlot(ctx)
	default:
		c.s.log.Info("replication slot exists; no saved state", "slot", c.set.slot, "confirmed_flush_lsn", slot.confirmed)
		c.start = position{lsn: slot.confirmed}
		if c.set.snapshot {
			c.snap, err = newSnapshotter(ctx, c, "", slot.confirmed, nil)
		}
	}
	if err != nil || c.snap != nil {
		return err
	}
	return c.startStream(ctx)
}

// startStream starts reading the slot at c.start.
func (c *cdc) startStream(ctx context.Context) error {
	st, err := startStreamer(ctx, c, c.start)
	if err != nil {
		return err
	}
	c.stream, c.read = st, c.start
	return nil
}

// resume continues from a saved state.
func (c *cdc) resume(ctx context.Context, st *cdcState, pos position, slot *slotInfo) error {
	if slot == nil {
		return fmt.Errorf("replication slot %q is gone but the saved state expects it, so changes after %s cannot be recovered; delete the connector's state to start over with a new slot and snapshot", c.set.slot, pos.lsn)
	}
	c.start = pos
	if st.Snapshot != nil {
		c.s.log.Info("resuming the initial snapshot", "table", st.Snapshot.Table, "rows", st.Snapshot.Rows)
		var err error
		c.snap, err = newSnapshotter(ctx, c, "", pos.lsn, st.Snapshot)
		return err
	}
	c.s.log.Info("resuming replication", "slot", c.set.slot, "lsn", c.start.lsn)
	return nil
}

func (c *cdc) poll(ctx context.Context) (*connector.Batch, error) {
	if c.snap != nil {
		b, done, err := c.snap.next(ctx)
		if err != nil {
			return nil, err
		}
		if done {
			c.snap.close(ctx)
			c.snap = nil
			c.s.log.Info("initial snapshot done; streaming", "from", c.start.lsn)
		}
		if b != nil {
			c.mu.Lock()
			c.pending[b] = pendingAck{}
			c.mu.Unlock()
			return b, nil
		}
	}
	if c.stream == nil {
		if err := c.startStream(ctx); err != nil {
			return nil, err
		}
	}
	return c.pollStream(ctx)
}

// cdcLinger is how long a poll waits for more changes after the first.
const cdcLinger = 5 * time.Millisecond

func (c *cdc) pollStream(ctx context.Context) (*connector.Batch, error) {
	taken, msgs, err := gather.Batch(ctx, c.stream.items, c.stream.errc, c.carry,
		func(it item) bool { return it.msg != nil }, c.set.batchSize, cdcLinger)
	c.carry = nil
	if err != nil {
		if ctx.Err() != nil {
			c.carry = taken // not lost: the next Poll returns them
		}
		return nil, err
	}
	b := &connector.Batch{Schema: connector.SchemaJSON, Messages: make([]connector.Message, 0, msgs)}
	pos := c.read
	for _, it := range taken {
		if it.msg != nil {
			b.Messages = append(b.Messages, *it.msg)
			pos.txn, pos.seq = it.txn, it.seq
		} else {
			pos = position{lsn: it.end}
		}
	}
	c.read = pos
	st, err := json.Marshal(pos.state(c.set.slot))
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	b.State = st
	c.mu.Lock()
	c.pending[b] = pendingAck{lsn: pos.lsn, stream: true}
	c.mu.Unlock()
	if c.set.verbose {
		c.s.log.Info("changes polled", "changes", len(b.Messages), "lsn", pos.lsn)
	}
	return b, nil
}

// ack lets the replication slot's confirmed position advance to the
// batch's last complete transaction; nothing else ever moves it.
func (c *cdc) ack(_ context.Context, b *connector.Batch) error {
	c.mu.Lock()
	p, ok := c.pending[b]
	delete(c.pending, b)
	c.mu.Unlock()
	if !ok {
		return errors.New("ack of a batch this source did not return")
	}
	if p.stream {
		c.stream.acknowledge(p.lsn)
	}
	return nil
}

func (c *cdc) nack(*connector.Batch) {}

func (c *cdc) close(ctx context.Context) error {
	var errs []error
	if c.snap != nil {
		c.snap.close(ctx)
	}
	if c.stream != nil {
		errs = append(errs, c.stream.close(ctx))
	}
	return errors.Join(errs...)
}

// messageID is a change's Iggy message id: the u128 (final LSN << 64 |
// seq), little-endian as Iggy stores ids. A replayed change gets the same
// id, so consumers (and the postgres sink) can drop repeats.
func messageID(txn pglogrepl.LSN, seq uint64) [16]byte {
	var id [16]byte
	binary.LittleEndian.PutUint64(id[:8], seq)
	binary.LittleEndian.PutUint64(id[8:], uint64(txn))
	return id
}
