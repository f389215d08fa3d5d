package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
)

// File header of both segment files (see the package doc).
const (
	fileHeaderSize = 24
	formatVersion  = 1
	logMagic       = "FERRYLOG"
	indexMagic     = "FERRYIDX"
)

var (
	errUnknownVersion = errors.New("file format version is newer than this build understands")
	errNotOurs        = errors.New("not a ferry partition log file (bad magic)")
)

// putFileHeader writes a file header for a segment with base offset base.
func putFileHeader(b []byte, magic string, base uint64) {
	copy(b[0:8], magic)
	binary.LittleEndian.PutUint32(b[8:], formatVersion)
	binary.LittleEndian.PutUint32(b[12:], 0)
	binary.LittleEndian.PutUint64(b[16:], base)
}

// checkFileHeader checks a complete file header. It reports torn = true for
// a header that is missing, short or all zero: a file whose creation was cut
// short, which holds nothing and can be rewritten.
func checkFileHeader(b []byte, magic string, base uint64) (torn bool, err error) {
	if len(b) < fileHeaderSize || allZero(b[:fileHeaderSize]) {
		return true, nil
	}
	if string(b[0:8]) != magic {
		return false, errNotOurs
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != formatVersion {
		return false, fmt.Errorf("%w: version %d, this build reads %d", errUnknownVersion, v, formatVersion)
	}
	if got := binary.LittleEndian.Uint64(b[16:]); got != base {
		return false, fmt.Errorf("header says base offset %d, file name says %d", got, base)
	}
	return false, nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// entry is the in-memory index entry of one record.
type entry struct {
	rel    uint32 // base_offset - segment base
	count  uint32 // messages in the record
	length uint32 // record bytes
	pos    int64  // file position of the record
	ts     uint64 // base_timestamp
}

func (e entry) end() int64 { return e.pos + int64(e.length) }

// segment is one segment: its files and the in-memory index. next, size,
// entries, maxTs and sorted change under partitionLog.mu held for writing
// (and appendMu), and readers hold mu for reading; idxLen and idxStale
// belong to appendMu; the unchecked bits are atomic.
type segment struct {
	base    uint64
	next    uint64 // base + messages
	size    uint64 // record bytes (file size - header)
	entries []entry
	maxTs   uint64 // the largest base_timestamp
	sorted  bool   // entries' timestamps never decrease
	log     blob
	idx     blob
	// idxLen is the length of the index file written so far; idxStale says
	// an index write failed and the file must be rewritten from entries.
	idxLen   int64
	idxStale bool
	path     string // the log file, for errors
	// unchecked has bit i set while record i has not been validated in
	// this process: only records of a sealed segment trusted through its
	// index. Read validates such a record before serving it. nil: none.
	unchecked []atomic.Uint64
}

func newSegment(base uint64, log, idx blob, path string) *segment {
	return &segment{base: base, next: base, sorted: true, log: log, idx: idx, idxLen: fileHeaderSize, path: path}
}

// add records a record appended at the end of the segment.
func (s *segment) add(e entry) {
	if n := len(s.entries); n > 0 && e.ts < s.entries[n-1].ts {
		s.sorted = false
	}
	s.maxTs = max(s.maxTs, e.ts)
	s.entries = append(s.entries, e)
	s.next = s.base + uint64(e.rel) + uint64(e.count)
	s.size += uint64(e.length)
}

// endPos is the file position after the last record.
func (s *segment) endPos() int64 { return fileHeaderSize + int64(s.size) }

func (s *segment) info(active bool) SegmentInfo {
	si := SegmentInfo{
		BaseOffset: s.base, NextOffset: s.next, SizeBytes: s.size,
		Messages: s.next - s.base, Active: active,
	}
	if n := len(s.entries); n > 0 {
		si.FirstTimestamp, si.LastTimestamp = s.entries[0].ts, s.entries[n-1].ts
	}
	return si
}

// find returns the index of the entry holding offset, which must be in
// [base, next).
func (s *segment) find(offset uint64) int {
	rel := uint32(offset - s.base)
	return sort.Search(len(s.entries), func(i int) bool { return s.entries[i].rel > rel }) - 1
}

// atTime returns the first entry with ts >= t, or -1.
func (s *segment) atTime(t uint64) int {
	if len(s.entries) == 0 || s.maxTs < t {
		return -1
	}
	if s.sorted {
		return sort.Search(len(s.entries), func(i int) bool { return s.entries[i].ts >= t })
	}
	for i, e := range s.entries {
		if e.ts >= t {
			return i
		}
	}
	return -1
}

// closeFiles closes the segment's files, returning the first error.
func (s *segment) closeFiles() error {
	return errors.Join(s.idx.Close(), s.log.Close())
}

// segmentName is the file name stem of the segment with base offset base.
func segmentName(base uint64) string { return fmt.Sprintf("%020d", base) }

// markUnchecked flags every record as not yet validated.
func (s *segment) markUnchecked() {
	s.unchecked = make([]atomic.Uint64, (len(s.entries)+63)/64)
	for i := range s.entries {
		s.unchecked[i/64].Or(1 << (i % 64))
	}
}

// needsCheck reports whether record i must be validated before it is served.
func (s *segment) needsCheck(i int) bool {
	return i/64 < len(s.unchecked) && s.unchecked[i/64].Load()&(1<<(i%64)) != 0
}

// checked records that record i validated.
func (s *segment) checked(i int) { s.unchecked[i/64].And(^uint64(1 << (i % 64))) }
