package storage

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"

	"github.com/ferryhq/ferry/iggy/wire"
)

// scratch holds records that Read slices; large buffers are not kept.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledScratch = 4 << 20

// Read returns records from the stored bytes, read with ReadAt (pread)
// under the read lock. On an error the returned dst holds the whole records
// read before it, and the count says how many messages they hold.
func (l *partitionLog) Read(dst []byte, offset uint64, limit uint32) ([]byte, uint32, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return dst, 0, ErrClosed
	}
	if limit == 0 || offset >= l.next.Load() {
		return dst, 0, nil
	}
	si := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].next > offset })
	// Grown once for everything below, so a read of many records does not
	// copy the ones before as dst doubles.
	dst = slices.Grow(dst, l.span(si, offset, limit))
	var n uint32
	for ; si < len(l.segs) && n < limit; si++ {
		s := l.segs[si]
		offset = max(offset, s.base)
		if offset >= s.next {
			continue // empty
		}
		for ei := max(s.find(offset), 0); ei < len(s.entries) && n < limit; ei++ {
			e := s.entries[ei]
			recBase := s.base + uint64(e.rel)
			if recBase+uint64(e.count) <= offset {
				continue // offset is in a compacted gap after this record
			}
			from := uint32(0)
			if offset > recBase {
				from = uint32(offset - recBase)
			}
			take := min(e.count-from, limit-n)
			var err error
			if dst, err = readRecord(dst, s, ei, from, take); err != nil {
				return dst, n, err
			}
			n += take
			offset = recBase + uint64(e.count)
		}
	}
	return dst, n, nil
}

func (l *partitionLog) Span(offset uint64, limit uint32) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed || limit == 0 || offset >= l.next.Load() {
		return 0
	}
	return l.span(sort.Search(len(l.segs), func(i int) bool { return l.segs[i].next > offset }), offset, limit)
}

// span is the most bytes Read appends for limit messages from offset,
// starting at segment si: the lengths of the records it touches (a record
// sliced at either end counts whole).
func (l *partitionLog) span(si int, offset uint64, limit uint32) int {
	var n uint32
	total := 0
	for ; si < len(l.segs) && n < limit; si++ {
		s := l.segs[si]
		offset = max(offset, s.base)
		for ei := max(s.find(offset), 0); ei < len(s.entries) && n < limit; ei++ {
			e := s.entries[ei]
			recBase := s.base + uint64(e.rel)
			if recBase+uint64(e.count) <= offset {
				continue
			}
			from := uint32(0)
			if offset > recBase {
				from = uint32(offset - recBase)
			}
			n += min(e.count-from, limit-n)
			total += int(e.length)
			offset = recBase + uint64(e.count)
		}
	}
	return total
}

// readRecord appends the messages [from, from+take) of record i of s.
func readRecord(dst []byte, s *segment, i int, from, take uint32) ([]byte, error) {
	e := s.entries[i]
	at, size := len(dst), int(e.length)
	if from == 0 && take == e.count {
		dst = slices.Grow(dst, size)[:at+size]
		if err := readAt(s, i, dst[at:]); err != nil {
			return dst[:at], err
		}
		return dst, nil
	}
	bp := scratch.Get().(*[]byte)
	buf := slices.Grow((*bp)[:0], size)[:size]
	defer func() {
		if cap(buf) <= maxPooledScratch {
			*bp = buf[:0]
			scratch.Put(bp)
		}
	}()
	if err := readAt(s, i, buf); err != nil {
		return dst, err
	}
	out, err := wire.AppendSlicedRecord(dst, buf, from, take)
	if err != nil {
		return dst, &CorruptError{Path: s.path, Pos: e.pos, Err: err}
	}
	return out, nil
}

var checkers = sync.Pool{New: func() any { return new(wire.BatchChecker) }}

// readAt reads the record of e into b and checks that its header agrees
// with the index, so a damaged file or index is an error, never garbage.
// A record not validated yet in this process (see segment.unchecked) is
// validated completely first.
func readAt(s *segment, i int, b []byte) error {
	e := s.entries[i]
	n, err := s.log.ReadAt(b, e.pos)
	if n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			return &CorruptError{Path: s.path, Pos: e.pos + int64(n), Err: fmt.Errorf("record of %d bytes cut short after %d", len(b), n)}
		}
		return fmt.Errorf("storage: read %s at %d: %w", s.path, e.pos, err)
	}
	if err := checkRecordHeader(s, e, b); err != nil {
		return err
	}
	if s.needsCheck(i) {
		c := checkers.Get().(*wire.BatchChecker)
		_, err := c.Validate(b)
		checkers.Put(c)
		if err != nil {
			return &CorruptError{Path: s.path, Pos: e.pos, Err: err}
		}
		s.checked(i)
	}
	return nil
}

// checkRecordHeader checks that the record header in b is the one e indexes.
func checkRecordHeader(s *segment, e entry, b []byte) error {
	h, err := wire.DecodeBatchHeader(b)
	if err == nil && (h.BaseOffset != s.base+uint64(e.rel) || h.Length != uint64(e.length) || h.Count != e.count) {
		err = fmt.Errorf("record header says base_offset %d, %d bytes, %d messages; index says %d, %d, %d",
			h.BaseOffset, h.Length, h.Count, s.base+uint64(e.rel), e.length, e.count)
	}
	if err != nil {
		return &CorruptError{Path: s.path, Pos: e.pos, Err: err}
	}
	return nil
}

func (l *partitionLog) OffsetAtTime(ts uint64) (uint64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, s := range l.segs {
		if i := s.atTime(ts); i >= 0 {
			return s.base + uint64(s.entries[i].rel), true
		}
	}
	return 0, false
}

// Segments returns no segments after Close.
func (l *partitionLog) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.info(i == len(l.segs)-1)
	}
	return out
}
