package webhook

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// window remembers the message ids of deliveries the source handed the
// runtime, for dedup_window and at most dedup_max_entries, oldest first
// out. It is the source's state: each batch carries the window as it is
// after that batch, so the runtime saves, with the batch, that its
// deliveries are in Iggy.
type window struct {
	ttl   time.Duration
	max   int
	seen  map[[16]byte]int64 // id → unix seconds when first handed over
	order []windowEntry      // by time; order[head:] are live
	head  int
}

type windowEntry struct {
	id [16]byte
	at int64
}

func newWindow(ttl time.Duration, max int) *window {
	return &window{ttl: ttl, max: max, seen: map[[16]byte]int64{}}
}

// has reports whether id is remembered.
func (w *window) has(id [16]byte) bool {
	_, ok := w.seen[id]
	return ok
}

// add remembers id from now, then forgets what is too old or too many.
func (w *window) add(id [16]byte, now time.Time) {
	if w.has(id) {
		return
	}
	at := now.Unix()
	w.seen[id] = at
	w.order = append(w.order, windowEntry{id, at})
	w.expire(now)
}

// expire forgets the entries older than ttl and the oldest beyond max.
func (w *window) expire(now time.Time) {
	oldest := now.Add(-w.ttl).Unix()
	for w.head < len(w.order) && (len(w.order)-w.head > w.max || w.order[w.head].at < oldest) {
		delete(w.seen, w.order[w.head].id)
		w.head++
	}
	if w.head > 1024 && w.head > len(w.order)/2 { // compact
		w.order = append(w.order[:0:0], w.order[w.head:]...)
		w.head = 0
	}
}

func (w *window) len() int { return len(w.order) - w.head }

// State format: "FWH1", a big-endian uint32 count, then per entry the 16
// id bytes and big-endian int64 unix seconds, oldest first. A new format
// gets a new magic; decode refuses what it does not know.
const (
	stateMagic = "FWH1"
	entrySize  = 16 + 8
)

// encode is the window in the state format.
func (w *window) encode() []byte {
	n := w.len()
	out := make([]byte, 0, len(stateMagic)+4+n*entrySize)
	out = append(out, stateMagic...)
	out = binary.BigEndian.AppendUint32(out, uint32(n))
	for _, e := range w.order[w.head:] {
		out = append(out, e.id[:]...)
		out = binary.BigEndian.AppendUint64(out, uint64(e.at))
	}
	return out
}

var errState = errors.New("the saved state is not a webhook source's dedup window")

// decode restores a window from state (nil: empty) and expires it
// against now.
func (w *window) decode(state []byte, now time.Time) error {
	if len(state) == 0 {
		return nil
	}
	if len(state) < len(stateMagic)+4 || string(state[:len(stateMagic)]) != stateMagic {
		return fmt.Errorf("%w: it does not start with %q (written by another connector or version?)", errState, stateMagic)
	}
	n := binary.BigEndian.Uint32(state[len(stateMagic):])
	body := state[len(stateMagic)+4:]
	if uint64(len(body)) != uint64(n)*entrySize {
		return fmt.Errorf("%w: it says %d entries but holds %d bytes of them (%d each)", errState, n, len(body), entrySize)
	}
	var prev int64
	for i := 0; i < int(n); i++ {
		var e windowEntry
		copy(e.id[:], body[i*entrySize:])
		e.at = int64(binary.BigEndian.Uint64(body[i*entrySize+16:]))
		if e.at < prev {
			return fmt.Errorf("%w: entry %d is older than the one before it", errState, i)
		}
		prev = e.at
		if _, dup := w.seen[e.id]; dup {
			continue
		}
		w.seen[e.id] = e.at
		w.order = append(w.order, e)
	}
	w.expire(now)
	return nil
}
