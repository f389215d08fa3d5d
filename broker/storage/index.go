package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/zeebo/xxh3"
)

// indexEntrySize is the size of one index entry on disk (see the package doc).
const indexEntrySize = 32

// minRecordSize is the smallest well-formed record: a header and one frame.
const minRecordSize = wire.BatchHeaderSize + wire.MessageHeaderSize

func putIndexEntry(b []byte, e entry) {
	binary.LittleEndian.PutUint32(b[0:], e.rel)
	binary.LittleEndian.PutUint32(b[4:], e.count)
	binary.LittleEndian.PutUint64(b[8:], uint64(e.pos))
	binary.LittleEndian.PutUint64(b[16:], e.ts)
	binary.LittleEndian.PutUint32(b[24:], e.length)
	binary.LittleEndian.PutUint32(b[28:], uint32(xxh3.Hash(b[:28])))
}

// decodeIndexEntry reads one entry and verifies its checksum.
func decodeIndexEntry(b []byte) (entry, error) {
	if sum := uint32(xxh3.Hash(b[:28])); sum != binary.LittleEndian.Uint32(b[28:]) {
		return entry{}, errors.New("entry checksum mismatch")
	}
	pos := binary.LittleEndian.Uint64(b[8:])
	if pos > math.MaxInt64 {
		return entry{}, fmt.Errorf("position %d out of range", pos)
	}
	return entry{
		rel:    binary.LittleEndian.Uint32(b[0:]),
		count:  binary.LittleEndian.Uint32(b[4:]),
		pos:    int64(pos),
		ts:     binary.LittleEndian.Uint64(b[16:]),
		length: binary.LittleEndian.Uint32(b[24:]),
	}, nil
}

// appendIndex appends the index file of a segment: header and entries.
func appendIndex(dst []byte, base uint64, entries []entry) []byte {
	return appendIndexV(dst, base, entries, fileHeader{version: formatVersion})
}

// appendIndexOf appends the index file of s, in s's format version.
func appendIndexOf(dst []byte, s *segment) []byte {
	fh := fileHeader{version: formatVersion}
	if s.compacted {
		fh = fileHeader{version: compactedVersion, end: uint32(s.next - s.base)}
	}
	return appendIndexV(dst, s.base, s.entries, fh)
}

func appendIndexV(dst []byte, base uint64, entries []entry, fh fileHeader) []byte {
	at := len(dst)
	dst = append(dst, make([]byte, fileHeaderSize+indexEntrySize*len(entries))...)
	putFileHeaderV(dst[at:], indexMagic, base, fh.version, fh.end)
	for i, e := range entries {
		putIndexEntry(dst[at+fileHeaderSize+i*indexEntrySize:], e)
	}
	return dst
}

// parseIndex decodes an index file and checks that it describes, gap-free,
// a log of logSize bytes whose records start at offset base. Any error means
// the index cannot be trusted and must be rebuilt from the log.
//
// A compacted (version 2) index may leave gaps between its entries, all
// within the end its header gives; want is the log's header, whose version
// and end the index must repeat.
func parseIndex(b []byte, base uint64, logSize int64) ([]entry, error) {
	return parseIndexFor(b, base, logSize, fileHeader{version: formatVersion})
}

func parseIndexFor(b []byte, base uint64, logSize int64, want fileHeader) ([]entry, error) {
	fh, torn, err := checkFileHeader(b, indexMagic, base)
	if err != nil {
		return nil, err
	}
	if torn {
		return nil, errors.New("index header missing")
	}
	if fh.version == formatVersion && !allZero(b[12:16]) {
		return nil, errors.New("index header reserved bytes set")
	}
	if fh != want {
		return nil, fmt.Errorf("index header says version %d, end %d; the log's says %d, %d", fh.version, fh.end, want.version, want.end)
	}
	gaps := fh.version == compactedVersion
	body := b[fileHeaderSize:]
	if len(body)%indexEntrySize != 0 {
		return nil, fmt.Errorf("index body of %d bytes is not whole entries", len(body))
	}
	entries := make([]entry, 0, len(body)/indexEntrySize)
	var rel uint64
	pos := int64(fileHeaderSize)
	for i := 0; i < len(body); i += indexEntrySize {
		e, err := decodeIndexEntry(body[i:])
		if err != nil {
			return nil, fmt.Errorf("index entry %d: %w", len(entries), err)
		}
		if gaps && uint64(e.rel) > rel {
			rel = uint64(e.rel)
		}
		if err := checkEntry(e, rel, pos, logSize); err != nil {
			return nil, fmt.Errorf("index entry %d: %w", len(entries), err)
		}
		entries = append(entries, e)
		rel += uint64(e.count)
		pos = e.end()
	}
	if pos != logSize {
		return nil, fmt.Errorf("index covers %d bytes, the log has %d", pos, logSize)
	}
	if gaps && rel > uint64(fh.end) {
		return nil, fmt.Errorf("entries reach relative offset %d, past the segment end %d", rel, fh.end)
	}
	return entries, nil
}

// checkEntry checks that e is the next record of a gap-free segment: it
// starts at relative offset rel and file position pos and fits in logSize.
func checkEntry(e entry, rel uint64, pos, logSize int64) error {
	switch {
	case uint64(e.rel) != rel:
		return fmt.Errorf("relative offset %d, want %d", e.rel, rel)
	case e.pos != pos:
		return fmt.Errorf("position %d, want %d", e.pos, pos)
	case e.count == 0:
		return errors.New("record of no messages")
	case uint64(e.length) < wire.BatchHeaderSize+wire.MessageHeaderSize*uint64(e.count):
		return fmt.Errorf("%d messages cannot fit in %d bytes", e.count, e.length)
	case e.end() > logSize:
		return fmt.Errorf("record ends at %d, past the log's %d bytes", e.end(), logSize)
	case rel+uint64(e.count) > math.MaxUint32:
		return fmt.Errorf("relative offsets pass 2^32")
	}
	return nil
}

// rewriteIndex replaces the segment's index file with its entries, durably.
func rewriteIndex(s *segment) error {
	b := appendIndexOf(nil, s)
	if _, err := s.idx.WriteAt(b, 0); err != nil {
		return fmt.Errorf("storage: rewrite index of %s: %w", s.path, err)
	}
	if err := s.idx.Truncate(int64(len(b))); err != nil {
		return fmt.Errorf("storage: rewrite index of %s: %w", s.path, err)
	}
	if err := s.idx.Sync(); err != nil {
		return fmt.Errorf("storage: sync index of %s: %w", s.path, err)
	}
	s.idxLen, s.idxStale = int64(len(b)), false
	return nil
}
