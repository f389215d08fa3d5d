package broker

// Message deduplication (upstream's [system.message_deduplication]): with
// Config.Dedup.MaxEntries above 0, each partition remembers the ids of the
// last MaxEntries messages appended to it (for at most Expiry, when set),
// and send_messages leaves out a message whose id it remembers, or that
// appears twice in one batch: a producer that sends a batch again after a
// crash, with the ids it gave it the first time, appends it once. The
// reply is the same either way (a batch left out whole appends nothing).
// Ids of all zeros are never deduplicated. As upstream's, the memory is
// not persisted: a broker restart forgets it.

import (
	"fmt"
	"time"

	"github.com/ferryhq/ferry/iggy/wire"
)

// Dedup configures message deduplication.
type Dedup struct {
	// MaxEntries is how many recent message ids each partition remembers;
	// 0 turns deduplication off.
	MaxEntries int
	// Expiry forgets an id this long after its message was appended; 0
	// keeps it until MaxEntries newer ones push it out.
	Expiry time.Duration
}

// dedupIDs are a partition's recent message ids, oldest first in ring.
// Guarded by the partition's mu, as are the scratch buffers filter reuses
// from one send to the next (ids is handed back to the caller and used
// before the next filter).
type dedupIDs struct {
	cfg  Dedup
	seen map[[16]byte]int64 // id → when appended (Unix nanoseconds)
	ring [][16]byte
	next int // where the next id goes in ring

	ids     [][16]byte            // filter's result, reused
	inBatch map[[16]byte]struct{} // filter's scratch, cleared each time
}

func newDedupIDs(cfg Dedup) *dedupIDs {
	if cfg.MaxEntries <= 0 {
		return nil
	}
	return &dedupIDs{cfg: cfg, seen: map[[16]byte]int64{}} // grown with use: most partitions never hold MaxEntries
}

// has reports whether id was appended (and not forgotten).
func (d *dedupIDs) has(id [16]byte, now time.Time) bool {
	at, ok := d.seen[id]
	return ok && (d.cfg.Expiry <= 0 || now.UnixNano()-at < int64(d.cfg.Expiry))
}

// add remembers id, forgetting the oldest id beyond MaxEntries.
func (d *dedupIDs) add(id [16]byte, now time.Time) {
	at := now.UnixNano()
	if _, ok := d.seen[id]; ok {
		d.seen[id] = at // seen again after it expired
		return
	}
	if len(d.ring) < d.cfg.MaxEntries {
		d.ring = append(d.ring, id)
	} else {
		delete(d.seen, d.ring[d.next])
		d.ring[d.next] = id
		d.next = (d.next + 1) % len(d.ring)
	}
	d.seen[id] = at
}

// filter returns batch without the messages d remembers or that repeat
// an id of the batch, and the ids of the messages it keeps (valid until
// the next filter). batch is a send's batch that passed its checks; kept
// is nil when every message is left out, and batch itself is returned
// when none is.
//
// The usual batch repeats nothing: its frames are walked for their ids
// only, and messages are decoded and the batch rebuilt only when one is
// left out.
func (d *dedupIDs) filter(batch []byte, now time.Time) (kept []byte, ids [][16]byte, err error) {
	h, err := wire.DecodeBatchHeader(batch)
	if err != nil {
		return nil, nil, err
	}
	if h.Length < wire.BatchHeaderSize || h.Length > uint64(len(batch)) {
		return nil, nil, fmt.Errorf("%w: batch_length %d, %d bytes available", wire.ErrMalformed, h.Length, len(batch))
	}
	if d.inBatch == nil {
		d.inBatch = make(map[[16]byte]struct{}, h.Count)
	}
	clear(d.inBatch)
	d.ids = d.ids[:0]
	rest := batch[wire.BatchHeaderSize:h.Length]
	repeats := false
	for i := uint32(0); i < h.Count; i++ {
		fh, _, r, err := wire.NextFrame(rest)
		if err != nil {
			return nil, nil, fmt.Errorf("message %d: %w", i, err)
		}
		rest = r
		if fh.ID == ([16]byte{}) {
			continue
		}
		if _, dup := d.inBatch[fh.ID]; dup || d.has(fh.ID, now) {
			repeats = true
			break
		}
		d.inBatch[fh.ID] = struct{}{}
		d.ids = append(d.ids, fh.ID)
	}
	if !repeats {
		return batch, d.ids, nil
	}
	return d.filterRepeats(batch, now)
}

// filterRepeats is filter for a batch that holds a repeat: it decodes the
// messages and rebuilds the batch without the repeats.
func (d *dedupIDs) filterRepeats(batch []byte, now time.Time) (kept []byte, ids [][16]byte, err error) {
	msgs, err := wire.AppendRecordMessages(nil, batch)
	if err != nil {
		return nil, nil, err
	}
	clear(d.inBatch)
	d.ids = d.ids[:0]
	out := msgs[:0]
	for _, m := range msgs {
		if m.ID != ([16]byte{}) {
			if _, dup := d.inBatch[m.ID]; dup || d.has(m.ID, now) {
				continue
			}
			d.inBatch[m.ID] = struct{}{}
			d.ids = append(d.ids, m.ID)
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, nil, nil
	}
	kept, err = wire.AppendBatch(nil, out)
	return kept, d.ids, err
}
