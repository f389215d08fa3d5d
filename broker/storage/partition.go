package storage

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"

	"github.com/ferryhq/ferry/iggy/wire"
)

// blob is one file of a segment: an *os.File, or a memBlob in memory.
type blob interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Close() error
}

// backend creates and removes segments: files in a directory, or memory.
type backend interface {
	// create makes a new empty segment whose file headers are durable.
	create(base uint64) (*segment, error)
	// remove closes a segment and deletes its files, durably.
	remove(s *segment) error
	// close releases the backend (the directory lock).
	close() error
}

// partitionLog implements Log over a backend; the memory and file logs
// differ only in their backend and in how OpenFile recovers the segments.
//
// Locks: appendMu serializes the methods that change the log (Append,
// DropOldest, Purge, Sync, Close) and guards each segment's index-file
// state. mu guards segs, each segment's entries and the closed flag; the
// appender holds it for writing only to publish a record it has written,
// and readers hold it for reading while they pread, so a segment's files
// cannot be closed under them. Order: appendMu, then mu.
type partitionLog struct {
	opts     Options
	be       backend
	appendMu sync.Mutex
	checker  wire.BatchChecker // under appendMu
	ibuf     [indexEntrySize]byte
	failed   error // under appendMu: a write could not be undone

	mu     sync.RWMutex
	segs   []*segment
	closed bool
	next   atomic.Uint64 // written under mu, read anywhere
	purges uint64        // under mu: Purge calls, so Compact sees offsets reused

	// compactMu serializes Compact; compact is its state.
	compactMu sync.Mutex
	compact   compactState
}

var _ Log = (*partitionLog)(nil)

func newPartitionLog(opts Options, be backend, segs []*segment) *partitionLog {
	l := &partitionLog{opts: opts, be: be, segs: segs}
	if n := len(segs); n > 0 {
		l.next.Store(segs[n-1].next)
	}
	return l
}

func (l *partitionLog) NextOffset() uint64 { return l.next.Load() }

func (l *partitionLog) FirstOffset() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs {
		if len(s.entries) > 0 {
			return s.base + uint64(s.entries[0].rel) // after a compacted gap
		}
	}
	return l.next.Load()
}

func (l *partitionLog) Append(record []byte) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return l.failed
	}
	if uint64(len(record)) > math.MaxUint32 {
		return fmt.Errorf("storage: append: record of %d bytes is over 4 GiB", len(record))
	}
	h, err := l.checker.Validate(record)
	if err != nil {
		return fmt.Errorf("storage: append: invalid record: %w", err)
	}
	next := l.next.Load()
	if h.BaseOffset != next {
		return fmt.Errorf("%w: base_offset %d, next offset %d", ErrOffsetMismatch, h.BaseOffset, next)
	}
	if uint64(h.Count) > math.MaxUint64-next {
		return fmt.Errorf("storage: append: %d messages at offset %d overflow the offset range", h.Count, next)
	}
	s, err := l.activeFor(h.Count)
	if err != nil {
		return err
	}
	e := entry{rel: uint32(next - s.base), count: h.Count, length: uint32(len(record)), pos: s.endPos(), ts: h.BaseTimestamp}
	if err := l.writeRecord(s, record, e.pos); err != nil {
		return err
	}
	l.writeIndexEntry(s, e)
	l.mu.Lock()
	s.add(e)
	l.next.Store(s.next)
	l.mu.Unlock()
	return nil
}

// writeRecord writes record at pos and syncs it if asked. On failure it
// cuts the file back to pos; if that fails too the log refuses appends.
func (l *partitionLog) writeRecord(s *segment, record []byte, pos int64) error {
	_, err := s.log.WriteAt(record, pos)
	if err == nil && l.opts.Fsync {
		err = s.log.Sync()
	}
	if err == nil {
		return nil
	}
	err = fmt.Errorf("storage: append to %s: %w", s.path, err)
	if terr := s.log.Truncate(pos); terr != nil {
		l.failed = fmt.Errorf("storage: log unusable until reopened: %w", errors.Join(err, terr))
	}
	return err
}

// writeIndexEntry appends e to the segment's index file. A failure only
// marks the index stale: the log is the truth, and the index is rewritten
// when the segment is synced or sealed (or rebuilt when it is reopened).
func (l *partitionLog) writeIndexEntry(s *segment, e entry) {
	if s.idxStale {
		return
	}
	putIndexEntry(l.ibuf[:], e)
	if _, err := s.idx.WriteAt(l.ibuf[:], s.idxLen); err != nil {
		s.idxStale = true
		l.opts.Logger.Warn("storage: index write failed; it will be rewritten", "file", s.path, "err", err)
		return
	}
	s.idxLen += indexEntrySize
}

// activeFor returns the segment a record of count messages goes to,
// sealing the active segment and starting a new one when it is full.
func (l *partitionLog) activeFor(count uint32) (*segment, error) {
	if len(l.segs) > 0 {
		s := l.segs[len(l.segs)-1]
		msgs := s.next - s.base
		// A compacted segment is never appended to (it is active only
		// when every later segment was lost): the next record rolls.
		if !s.compacted && (msgs == 0 || (s.size < l.opts.SegmentSize && msgs+uint64(count) <= math.MaxUint32)) {
			return s, nil
		}
		if err := l.seal(s); err != nil {
			return nil, err
		}
	}
	ns, err := l.be.create(l.next.Load())
	if err != nil {
		return nil, fmt.Errorf("storage: new segment: %w", err)
	}
	l.mu.Lock()
	l.segs = append(l.segs, ns)
	l.mu.Unlock()
	return ns, nil
}

// seal makes a segment's log and index durable; called on Sync and when
// the segment stops being the active one, so sealed segments are whole on
// disk even without Options.Fsync.
func (l *partitionLog) seal(s *segment) error {
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("storage: sync %s: %w", s.path, err)
	}
	if s.idxStale {
		return rewriteIndex(s)
	}
	if err := s.idx.Sync(); err != nil {
		return fmt.Errorf("storage: sync index of %s: %w", s.path, err)
	}
	return nil
}

func (l *partitionLog) DropOldest(n int) (int, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return 0, ErrClosed
	}
	k := min(n, len(l.segs))
	if k <= 0 {
		return 0, nil
	}
	if last := l.segs[len(l.segs)-1]; k == len(l.segs) {
		if last.next == last.base {
			k-- // an empty active segment holds nothing to drop
		} else {
			// Start the new segment before removing the old ones: a crash
			// in between leaves a contiguous log, never a reset offset.
			if err := l.seal(last); err != nil {
				return 0, err
			}
			ns, err := l.be.create(l.next.Load())
			if err != nil {
				return 0, fmt.Errorf("storage: new segment: %w", err)
			}
			l.mu.Lock()
			l.segs = append(l.segs, ns)
			l.mu.Unlock()
		}
	}
	for i := range k {
		if err := l.removeOldest(); err != nil {
			return i, err
		}
	}
	return k, nil
}

// removeOldest detaches the oldest segment, so no reader can reach it, and
// deletes it.
func (l *partitionLog) removeOldest() error {
	l.mu.Lock()
	s := l.segs[0]
	l.segs = append([]*segment(nil), l.segs[1:]...)
	l.mu.Unlock()
	if err := l.be.remove(s); err != nil {
		return fmt.Errorf("storage: remove segment %s: %w", s.path, err)
	}
	return nil
}

func (l *partitionLog) Purge() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	// Oldest first: a crash part way leaves a suffix of the log, which
	// is still contiguous.
	for len(l.segs) > 0 {
		if err := l.removeOldest(); err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.next.Store(0)
	l.purges++
	l.mu.Unlock()
	l.failed = nil
	// If this fails, the next Append creates the segment.
	_, err := l.activeFor(0)
	return err
}

func (l *partitionLog) Sync() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return ErrClosed
	}
	return l.syncActive()
}

func (l *partitionLog) syncActive() error {
	if len(l.segs) == 0 {
		return nil
	}
	return l.seal(l.segs[len(l.segs)-1])
}

func (l *partitionLog) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if l.closed {
		return nil
	}
	errs := []error{l.syncActive()}
	l.mu.Lock()
	l.closed = true
	segs := l.segs
	l.segs = nil
	l.mu.Unlock()
	for _, s := range segs {
		errs = append(errs, s.closeFiles())
	}
	errs = append(errs, l.be.close())
	return errors.Join(errs...)
}
