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
	// compactedVersion is the version field of a segment rewritten by
	// Compact: version 1 with the compacted flag (bit 16) set, meaning gaps
	// between records and the segment's end in the header (see the package
	// doc). A build before compaction reads it as an unknown version and
	// refuses it with ErrFormat, never as a damaged version 1.
	compactedVersion = formatVersion | 1<<16
	logMagic         = "FERRYLOG"
	indexMagic       = "FERRYIDX"
)

var (
	errUnknownVersion = errors.New("file format version is newer than this build understands")
	errNotOurs        = errors.New("not a ferry partition log file (bad magic)")
)

// putFileHeader writes a version 1 file header for a segment with base
// offset base.
func putFileHeader(b []byte, magic string, base uint64) {
	putFileHeaderV(b, magic, base, formatVersion, 0)
}

// putFileHeaderV writes a file header of a version; end is the relative
// end offset of a compacted (version 2) segment, 0 in version 1.
func putFileHeaderV(b []byte, magic string, base uint64, version, end uint32) {
	copy(b[0:8], magic)
	binary.LittleEndian.PutUint32(b[8:], version)
	binary.LittleEndian.PutUint32(b[12:], end)
	binary.LittleEndian.PutUint64(b[16:], base)
}

// fileHeader is what a file header says beyond magic and base offset.
type fileHeader struct {
	version uint32 // formatVersion or compactedVersion
	end     uint32 // compactedVersion: next offset - base offset
}

// checkFileHeader checks a complete file header. It reports torn = true for
// a header that is missing, short or all zero: a file whose creation was cut
// short, which holds nothing and can be rewritten.
func checkFileHeader(b []byte, magic string, base uint64) (fh fileHeader, torn bool, err error) {
	if len(b) < fileHeaderSize || allZero(b[:fileHeaderSize]) {
		return fh, true, nil
	}
	if string(b[0:8]) != magic {
		return fh, false, errNotOurs
	}
	fh.version = binary.LittleEndian.Uint32(b[8:])
	if fh.version != formatVersion && fh.version != compactedVersion {
		return fh, false, fmt.Errorf("%w: version %d, this build reads %d and %d", errUnknownVersion, fh.version, formatVersion, compactedVersion)
	}
	if got := binary.LittleEndian.Uint64(b[16:]); got != base {
		return fh, false, fmt.Errorf("header says base offset %d, file name says %d", got, base)
	}
	if fh.version == compactedVersion {
		fh.end = binary.LittleEndian.Uint32(b[12:])
	}
	return fh, false, nil
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
	base uint64
	next uint64 // base + messages (+ the gaps of a compacted segment)
	msgs uint64 // messages stored
	size uint64 // record bytes (file size - header)
	// compacted: written by Compact (format version 2), records may leave
	// gaps between them and next comes from the file header.
	compacted bool
	entries   []entry
	maxTs     uint64 // the largest base_timestamp
	sorted    bool   // entries' timestamps never decrease
	log       blob
	idx       blob
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
	s.next = max(s.next, s.base+uint64(e.rel)+uint64(e.count))
	s.msgs += uint64(e.count)
	s.size += uint64(e.length)
}

// setEnd gives a compacted segment the end offset its header names (its
// last messages may have been compacted away).
func (s *segment) setEnd(fh fileHeader) {
	if fh.version == compactedVersion {
		s.compacted = true
		s.next = max(s.next, s.base+uint64(fh.end))
	}
}

// endPos is the file position after the last record.
func (s *segment) endPos() int64 { return fileHeaderSize + int64(s.size) }

func (s *segment) info(active bool) SegmentInfo {
	si := SegmentInfo{
		BaseOffset: s.base, NextOffset: s.next, SizeBytes: s.size,
		Messages: s.msgs, Active: active, Compacted: s.compacted,
	}
	if n := len(s.entries); n > 0 {
		si.FirstTimestamp, si.LastTimestamp = s.entries[0].ts, s.entries[n-1].ts
	}
	return si
}

// find returns the index of the entry holding offset, which must be in
// [base, next), or in a compacted segment the entry before the gap that
// holds it (-1 if the gap is before the first entry).
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
