package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/internal/fsx"
)

// recoverDir opens the segments in be.dir, oldest first, as the package
// doc's "Recovery" section describes.
func recoverDir(be *fileBackend, opts Options) (segs []*segment, err error) {
	defer func() {
		if err != nil {
			for _, s := range segs {
				_ = s.closeFiles()
			}
			segs = nil
		}
	}()
	bases, err := listSegments(be.dir)
	if err != nil {
		return nil, err
	}
	if len(bases) == 0 {
		s, err := be.create(0)
		if err != nil {
			return nil, fmt.Errorf("storage: create first segment: %w", err)
		}
		return []*segment{s}, nil
	}
	for i, base := range bases {
		s, bad, err := openSegment(be, base, i == len(bases)-1, opts)
		if err != nil {
			return segs, err
		}
		dropFrom := i + 1
		if bad == nil && len(segs) > 0 && segs[len(segs)-1].next != base {
			bad = &CorruptError{Path: s.path, Err: fmt.Errorf("segment starts at offset %d, the one before ends at %d", base, segs[len(segs)-1].next)}
			_ = s.closeFiles()
			s, dropFrom = nil, i
		}
		if s != nil {
			segs = append(segs, s)
		}
		if bad == nil {
			continue
		}
		if !opts.TruncateCorrupt || len(segs) == 0 {
			return segs, bad
		}
		return segs, cutAt(be, segs[len(segs)-1], bases[dropFrom:], bad, opts)
	}
	return segs, nil
}

// cutAt applies Options.TruncateCorrupt: it cuts s after its last good
// record and deletes the segments of later bases, leaving s active.
func cutAt(be *fileBackend, s *segment, later []uint64, bad *CorruptError, opts Options) error {
	opts.Logger.Warn("storage: cutting the log at corruption (TruncateCorrupt)",
		"file", s.path, "keep_until_offset", s.next, "deleted_segments", len(later), "err", bad)
	if err := repair(s); err != nil {
		return err
	}
	for _, base := range later {
		stem := be.stem(base)
		for _, name := range []string{stem + indexExt, stem + logExt} {
			if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("storage: cut log: %w", err)
			}
		}
	}
	return fsx.SyncDir(be.dir)
}

// listSegments returns the base offsets of the .log files in dir, sorted,
// and deletes index files whose log is gone.
func listSegments(dir string) ([]uint64, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: list partition directory: %w", err)
	}
	logs := map[uint64]bool{}
	var indexes []uint64
	for _, de := range des {
		name := de.Name()
		stem, ext, ok := strings.Cut(name, ".")
		if !ok || len(stem) != 20 || strings.Trim(stem, "0123456789") != "" {
			continue // not ours
		}
		if ext == compactExt[1:] || ext == compactIndexExt[1:] {
			// A compaction that never switched: the segment is intact.
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("storage: remove unfinished compaction: %w", err)
			}
			continue
		}
		if ext != "log" && ext != "index" {
			continue // not ours
		}
		base, err := strconv.ParseUint(stem, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("storage: segment file %s: base offset out of range", filepath.Join(dir, name))
		}
		if ext == "log" {
			logs[base] = true
		} else {
			indexes = append(indexes, base)
		}
	}
	for _, base := range indexes {
		if !logs[base] {
			if err := os.Remove(filepath.Join(dir, segmentName(base)+indexExt)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("storage: remove orphan index: %w", err)
			}
		}
	}
	bases := make([]uint64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// openSegment opens one segment. A sealed segment is trusted through its
// index when the index is whole and agrees with the log's size and with
// its first and last record headers; otherwise, and always for the active
// segment, the log is scanned and the index rewritten from it. The active
// segment's torn tail is cut off here. Damage that may not be cut silently
// comes back as bad, with s holding the records before it.
func openSegment(be *fileBackend, base uint64, active bool, opts Options) (s *segment, bad *CorruptError, err error) {
	path := be.stem(base) + logExt
	lf, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("storage: open segment: %w", err)
	}
	idxf, err := os.OpenFile(be.stem(base)+indexExt, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		_ = lf.Close()
		return nil, nil, fmt.Errorf("storage: open index: %w", err)
	}
	s = newSegment(base, lf, idxf, path)
	defer func() {
		if err != nil {
			_ = s.closeFiles()
			s = nil
		}
	}()
	size, err := fileSize(lf)
	if err != nil {
		return s, nil, err
	}
	var hdr [fileHeaderSize]byte
	n, _ := lf.ReadAt(hdr[:], 0)
	fh, torn, herr := checkFileHeader(hdr[:n], logMagic, base)
	s.compacted = fh.version == compactedVersion
	switch {
	case errors.Is(herr, errUnknownVersion):
		return s, nil, fmt.Errorf("%w: %s: %v", ErrFormat, path, herr)
	case herr != nil:
		return s, &CorruptError{Path: path, Err: herr}, nil
	case torn && !active:
		return s, &CorruptError{Path: path, Err: errors.New("file header missing")}, nil
	case torn:
		opts.Logger.Warn("storage: rewriting torn segment header", "file", path, "size", size)
		return s, nil, repair(s)
	}
	idx, err := readWhole(idxf)
	if err != nil {
		return s, nil, err
	}
	if !active {
		entries, ierr := parseIndexFor(idx, base, size, fh)
		if ierr == nil {
			ierr = checkEnds(s, entries)
		}
		if ierr == nil {
			for _, e := range entries {
				s.add(e)
			}
			s.setEnd(fh)
			s.markUnchecked()
			s.idxLen = int64(len(idx))
			return s, nil, nil
		}
		opts.Logger.Warn("storage: rebuilding index of sealed segment", "file", path, "reason", ierr)
	}
	entries, end, cause, err := scanLog(lf, base, size, fh)
	if err != nil {
		return s, nil, fmt.Errorf("storage: scan %s: %w", path, err)
	}
	for _, e := range entries {
		s.add(e)
	}
	s.setEnd(fh)
	if cause != nil {
		if !active {
			return s, &CorruptError{Path: path, Pos: end, Err: cause}, nil
		}
		opts.Logger.Warn("storage: cutting torn tail of active segment", "file", path,
			"pos", end, "dropped_bytes", size-end, "reason", cause)
		return s, nil, repair(s)
	}
	if want := appendIndexOf(nil, s); !bytes.Equal(idx, want) {
		opts.Logger.Warn("storage: rewriting index that disagrees with the log", "file", path)
		return s, nil, rewriteIndex(s)
	}
	s.idxLen = int64(len(idx))
	return s, nil, nil
}

// checkEnds checks the first and last record headers against the index.
func checkEnds(s *segment, entries []entry) error {
	if len(entries) == 0 {
		return nil
	}
	var hdr [wire.BatchHeaderSize]byte
	for _, e := range []entry{entries[0], entries[len(entries)-1]} {
		if _, err := s.log.ReadAt(hdr[:], e.pos); err != nil {
			return fmt.Errorf("read record header at %d: %w", e.pos, err)
		}
		if err := checkRecordHeader(s, e, hdr[:]); err != nil {
			return err
		}
	}
	return nil
}

// repair makes s's files hold exactly its entries: the log header is
// rewritten, the log cut after the last entry, the index rewritten, durably.
func repair(s *segment) error {
	var hdr [fileHeaderSize]byte
	if s.compacted {
		putFileHeaderV(hdr[:], logMagic, s.base, compactedVersion, uint32(s.next-s.base))
	} else {
		putFileHeader(hdr[:], logMagic, s.base)
	}
	if _, err := s.log.WriteAt(hdr[:], 0); err != nil {
		return fmt.Errorf("storage: repair %s: %w", s.path, err)
	}
	if err := s.log.Truncate(s.endPos()); err != nil {
		return fmt.Errorf("storage: repair %s: %w", s.path, err)
	}
	if err := s.log.Sync(); err != nil {
		return fmt.Errorf("storage: repair %s: %w", s.path, err)
	}
	return rewriteIndex(s)
}

// scanLog reads the records of a segment log of size bytes whose first
// record should have base offset base, and validates each one completely
// (lengths, frames, frame and batch checksums, contiguous offsets). It
// returns the good records and where they end; cause says why the scan
// stopped before size. err is an I/O error. In a compacted segment (fh
// version 2) a record may start past the end of the one before, and all
// must end within fh.end.
func scanLog(r io.ReaderAt, base uint64, size int64, fh fileHeader) (entries []entry, end int64, cause, err error) {
	gaps := fh.version == compactedVersion
	br := bufio.NewReaderSize(io.NewSectionReader(r, fileHeaderSize, max(size-fileHeaderSize, 0)), 1<<20)
	var c wire.BatchChecker
	buf := make([]byte, wire.BatchHeaderSize)
	pos, next := int64(fileHeaderSize), base
	for pos < size {
		left := size - pos
		if left < minRecordSize {
			return entries, pos, fmt.Errorf("%d trailing bytes, fewer than a record", left), nil
		}
		if _, err := io.ReadFull(br, buf[:wire.BatchHeaderSize]); err != nil {
			return entries, pos, nil, err
		}
		h, _ := wire.DecodeBatchHeader(buf)
		if h.Length < minRecordSize || h.Length > uint64(left) || h.Length > math.MaxUint32 {
			return entries, pos, fmt.Errorf("batch_length %d with %d bytes left", h.Length, left), nil
		}
		if uint64(cap(buf)) < h.Length {
			buf = append(make([]byte, 0, h.Length), buf[:wire.BatchHeaderSize]...)
		}
		buf = buf[:h.Length]
		if _, err := io.ReadFull(br, buf[wire.BatchHeaderSize:]); err != nil {
			return entries, pos, nil, err
		}
		if _, verr := c.Validate(buf); verr != nil {
			return entries, pos, verr, nil
		}
		if gaps && h.BaseOffset > next {
			next = h.BaseOffset
		}
		switch rel := next - base; {
		case gaps && (next-base > uint64(fh.end) || uint64(h.Count) > uint64(fh.end)-(next-base)):
			return entries, pos, fmt.Errorf("record at offset %d of %d messages passes the segment end %d", next, h.Count, base+uint64(fh.end)), nil
		case h.BaseOffset != next:
			return entries, pos, fmt.Errorf("record base_offset %d, want %d", h.BaseOffset, next), nil
		case rel+uint64(h.Count) > math.MaxUint32 || uint64(h.Count) > math.MaxUint64-next:
			return entries, pos, fmt.Errorf("record of %d messages at offset %d overflows the segment", h.Count, next), nil
		}
		entries = append(entries, entry{rel: uint32(next - base), count: h.Count, length: uint32(h.Length), pos: pos, ts: h.BaseTimestamp})
		pos += int64(h.Length)
		next += uint64(h.Count)
	}
	return entries, pos, nil, nil
}

func fileSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("storage: stat: %w", err)
	}
	return st.Size(), nil
}

func readWhole(f *os.File) ([]byte, error) {
	size, err := fileSize(f)
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if n, err := f.ReadAt(b, 0); n < len(b) {
		return nil, fmt.Errorf("storage: read %s: %w", f.Name(), err)
	}
	return b, nil
}
