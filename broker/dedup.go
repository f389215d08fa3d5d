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
// Guarded by the partition's mu.
type dedupIDs struct {
	cfg  Dedup
	seen map[[16]byte]time.Time // id → when appended
	ring [][16]byte
	next int // where the next id goes in ring
}

func newDedupIDs(cfg Dedup) *dedupIDs {
	if cfg.MaxEntries <= 0 {
		return nil
	}
	return &dedupIDs{cfg: cfg, seen: map[[16]byte]time.Time{}} // grown with use: most partitions never hold MaxEntries
}

// has reports whether id was appended (and not forgotten).
func (d *dedupIDs) has(id [16]byte, now time.Time) bool {
	at, ok := d.seen[id]
	return ok && (d.cfg.Expiry <= 0 || now.Sub(at) < d.cfg.Expiry)
}

// add remembers id, forgetting the oldest id beyond MaxEntries.
func (d *dedupIDs) add(id [16]byte, now time.Time) {
	if _, ok := d.seen[id]; ok {
		d.seen[id] = now // seen again after it expired
		return
	}
	if len(d.ring) < d.cfg.MaxEntries {
		d.ring = append(d.ring, id)
	} else {
		delete(d.seen, d.ring[d.next])
		d.ring[d.next] = id
		d.next = (d.next + 1) % len(d.ring)
	}
	d.seen[id] = now
}

// filter returns batch without the messages d remembers or that repeat
// an id of the batch, and the ids of the messages it keeps. batch is a
// send's batch that passed its checks; kept is nil when every message is
// left out, and batch itself is returned when none is.
func (d *dedupIDs) filter(batch []byte, now time.Time) (kept []byte, ids [][16]byte, err error) {
	msgs, err := wire.AppendRecordMessages(nil, batch)
	if err != nil {
		return nil, nil, err
	}
	inBatch := make(map[[16]byte]bool, len(msgs))
	out := msgs[:0]
	for _, m := range msgs {
		if m.ID != ([16]byte{}) {
			if d.has(m.ID, now) || inBatch[m.ID] {
				continue
			}
			inBatch[m.ID] = true
		}
		out = append(out, m)
	}
	for _, m := range out {
		if m.ID != ([16]byte{}) {
			ids = append(ids, m.ID)
		}
	}
	switch len(out) {
	case 0:
		return nil, nil, nil
	case len(msgs):
		return batch, ids, nil
	}
	kept, err = wire.AppendBatch(nil, out)
	return kept, ids, err
}
