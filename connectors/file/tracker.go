package file

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/jsonx"
	"github.com/zeebo/xxh3"
)

// tracked is one file the source reads.
type tracked struct {
	id ident
	st fileState
	f  *os.File // open while reading
	lr *lineReader
	// seen: the last scan found it; a file no glob matches any more is
	// read to its end and then dropped.
	seen    bool
	eof     bool // read to the end for now
	dropped bool
	// whole_file: size and mtime at the last scan, and whether they were
	// the same at the scan before (the file has settled).
	scanSize, scanMTime int64
	settled             bool
}

func (t *tracked) close() {
	if t.f != nil {
		_ = t.f.Close()
		t.f, t.lr = nil, nil
	}
}

// scan finds the files the globs match now, starts tracking new ones
// (from their saved offset, if any) and checks known ones for truncation
// or replacement.
func (s *Source) scan() {
	s.lastScan = s.now()
	first := !s.scanned
	s.scanned = true
	type match struct {
		path string
		fi   os.FileInfo
	}
	found := map[ident]match{}
	for _, g := range s.cfg.paths {
		paths, _ := filepath.Glob(g) // patterns were checked in New
		for _, p := range paths {
			fi, err := os.Stat(p)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if err := s.paths.Check(p); err != nil {
				if !s.refused[p] {
					s.refused[p] = true
					s.log.Warn("file source: not reading a file the runtime protects", "path", p, "error", err)
				}
				continue
			}
			id := identOf(p, fi)
			if _, dup := found[id]; !dup {
				found[id] = match{p, fi}
			}
		}
	}
	for _, t := range s.files {
		t.seen = false
	}
	for id, m := range found {
		t, known := s.files[id]
		if !known {
			t = s.track(id, m.path, m.fi, first)
			s.files[id] = t
		}
		t.seen, t.st.Path = true, m.path
		mtime := m.fi.ModTime().UnixNano()
		if known && s.cfg.format != FormatWholeFile && (m.fi.Size() != t.scanSize || mtime != t.scanMTime) {
			s.checkReplaced(t, m.fi.Size())
		}
		t.settled = known && m.fi.Size() == t.scanSize && mtime == t.scanMTime
		t.scanSize, t.scanMTime = m.fi.Size(), mtime
	}
	if first && len(found) == 0 {
		s.log.Warn("no file matches paths yet", "paths", s.cfg.paths)
	}
	s.saved = nil // saved files not found now are forgotten
	s.order = s.order[:0]
	for _, t := range s.files {
		s.order = append(s.order, t)
	}
	sort.Slice(s.order, func(i, j int) bool { return s.order[i].st.Path < s.order[j].st.Path })
}

// track starts tracking a file the scan found for the first time.
func (s *Source) track(id ident, path string, fi os.FileInfo, firstScan bool) *tracked {
	t := &tracked{id: id, st: fileState{Path: path, Dev: id.Dev, Ino: id.Ino}}
	if saved, ok := s.saved[id]; ok {
		if s.cfg.format == FormatWholeFile || fingerprintMatches(path, id, saved) {
			t.st = saved
			t.st.Path = path
			if s.cfg.format != FormatWholeFile && fi.Size() < saved.Offset {
				s.log.Warn("file is shorter than where reading stopped: it was truncated; reading it from the start",
					"path", path, "size", fi.Size(), "offset", saved.Offset)
				t.st.Offset, t.st.FP, t.st.FPLen = 0, 0, 0
			}
			return t
		}
		s.log.Info("file has the inode of a file read before but other content; reading it from the start", "path", path)
	}
	if s.fresh && firstScan && s.cfg.startAtEnd {
		if s.cfg.format == FormatWholeFile {
			t.st.Size, t.st.MTime = fi.Size(), fi.ModTime().UnixNano()
		} else if off, err := lastLineEnd(path, fi.Size()); err == nil {
			t.st.Offset = off
		} else {
			s.log.Warn("cannot find the end of the last line; reading the file from the start", "path", path, "error", err)
		}
	}
	return t
}

// checkReplaced resets a file that was truncated or rewritten in place
// (its first bytes changed) while the source ran; size is its size now.
func (s *Source) checkReplaced(t *tracked, size int64) {
	pos := t.st.Offset
	if t.lr != nil {
		pos = t.lr.position()
	}
	reason := ""
	switch {
	case size < pos:
		reason = "truncated"
	case t.st.FPLen > 0 && s.fingerprintDiffers(t):
		reason = "rewritten (its first bytes changed)"
	}
	if reason == "" {
		return
	}
	s.log.Warn("file was "+reason+"; reading it again from the start", "path", t.st.Path, "offset", t.st.Offset)
	t.close()
	t.st.Offset, t.st.FP, t.st.FPLen, t.eof = 0, 0, 0, false
}

// fingerprintDiffers reports whether t's first bytes are known to differ
// from its fingerprint; it reads through the open descriptor when there
// is one (the path may hold another file by now).
func (s *Source) fingerprintDiffers(t *tracked) bool {
	var r io.ReaderAt = t.f
	if t.f == nil {
		f, err := openIdent(t.st.Path, t.id)
		if err != nil {
			return false // cannot tell; the next check will
		}
		defer f.Close()
		r = f
	}
	fp, err := fingerprint(r, t.st.FPLen)
	if errors.Is(err, io.EOF) {
		return true // shorter than the fingerprint: other content
	}
	return err == nil && fp != t.st.FP
}

// fingerprintMatches reports whether the file id at path starts with the
// bytes st's fingerprint was made of.
func fingerprintMatches(path string, id ident, st fileState) bool {
	if st.FPLen == 0 {
		return true
	}
	f, err := openIdent(path, id)
	if err != nil {
		return false
	}
	defer f.Close()
	fp, err := fingerprint(f, st.FPLen)
	return err == nil && fp == st.FP
}

// fingerprint hashes the first n bytes of r.
func fingerprint(r io.ReaderAt, n int64) (uint64, error) {
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, 0); err != nil {
		return 0, err
	}
	return xxh3.Hash(buf), nil
}

// errReplaced: the path holds another file than the one tracked.
var errReplaced = errors.New("the path now holds another file")

// openIdent opens path and checks it is the file id.
func openIdent(path string, id ident) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && identOf(path, fi) != id {
		err = fmt.Errorf("%s: %w", path, errReplaced)
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// lastLineEnd is the offset just after the last "\n" among the first size
// bytes of the file (0 when there is none).
func lastLineEnd(path string, size int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return lastNewline(f, size)
}

// lastNewline is the offset just after the last "\n" in r[0:size].
func lastNewline(r io.ReaderAt, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		chunk := buf[:end-start]
		if _, err := r.ReadAt(chunk, start); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// open opens a tracked file at its offset, checking it is still the same
// file; false when it is gone or replaced (the next scan sorts it out).
func (s *Source) open(t *tracked) bool {
	f, err := openIdent(t.st.Path, t.id)
	if err != nil {
		if !os.IsNotExist(err) && !errors.Is(err, errReplaced) {
			s.log.Warn("cannot open file", "path", t.st.Path, "error", err)
		}
		return false
	}
	if _, err := f.Seek(t.st.Offset, io.SeekStart); err != nil {
		_ = f.Close()
		s.log.Warn("cannot seek in file", "path", t.st.Path, "error", err)
		return false
	}
	t.f, t.lr = f, newLineReader(f, t.st.Offset, s.cfg.maxMessage)
	return true
}

// readLines adds t's next complete lines to b.
func (s *Source) readLines(t *tracked, b *batch) {
	if t.eof && t.f != nil {
		// It was at its end: read only if its size changed, and check it
		// was not truncated or rewritten before reading what is new.
		fi, err := t.f.Stat()
		if err == nil && fi.Size() == t.lr.position() && t.seen {
			return
		}
		if err == nil {
			s.checkReplaced(t, fi.Size())
		}
	}
	if t.f == nil && !s.open(t) {
		t.eof = true
		if !t.seen {
			t.dropped = true
		}
		return
	}
	for !b.full() {
		l, ok, err := t.lr.next()
		if err != nil {
			s.log.Warn("cannot read file; will try again", "path", t.st.Path, "error", err)
			t.close()
			return
		}
		if !ok {
			// The end for now. A file read once (not followed), or no
			// longer matched, is complete: its unterminated last line counts.
			complete := !s.cfg.follow || !t.seen
			if complete {
				if l, ok := t.lr.partial(); ok && !s.emit(t, l, b) {
					t.close() // stopped before the line: it is read again after a restart
					return
				}
			}
			t.eof = true
			if complete {
				t.close()
				t.dropped = !t.seen
			}
			return
		}
		t.eof = false
		if !s.emit(t, l, b) {
			t.close() // stopped before the line: it is read again after a restart
			return
		}
	}
}

// emit adds one line as a message, or passes it over, and moves the
// file's offset past it. An invalid line goes to invalid; false means
// on_invalid = "stop" stopped before it.
func (s *Source) emit(t *tracked, l line, b *batch) bool {
	switch {
	case l.tooLong:
		return s.invalid(t, l.start, l.end, b, fmt.Sprintf("line is longer than max_message_bytes (%d)", s.cfg.maxMessage), nil)
	case s.cfg.format == FormatNDJSON:
		data := bytes.TrimSpace(l.data)
		if len(data) == 0 {
			b.changed = true // blank lines are allowed between records
			break
		}
		if !jsonx.Valid(data) { // the fast scanner: a third of encoding/json's CPU
			return s.invalid(t, l.start, l.end, b, "line is not valid JSON", data)
		}
		b.add(data, s.cfg.pathHeader, t.st.Path, t.id, l.start)
	default:
		if len(l.data) == 0 {
			b.changed = true // Iggy refuses empty payloads
			break
		}
		b.add(l.data, s.cfg.pathHeader, t.st.Path, t.id, l.start)
	}
	t.st.Offset = l.end
	return true
}

// invalid handles what cannot be sent as it is, bytes [start, end) of t
// (a line, or a whole file), as on_invalid says: skip it (counted, with a
// warning naming the file and offset), send data as it is with the
// ferry.invalid header ("raw"; data is nil when there is nothing it can
// send, and it is skipped), or stop before it. It returns false when it
// stopped; then t's offset stays before the line.
func (s *Source) invalid(t *tracked, start, end int64, b *batch, reason string, data []byte) bool {
	switch {
	case s.cfg.onInvalid == OnInvalidStop:
		s.stopped = fmt.Errorf("file source: %s at offset %d: %s; on_invalid = \"stop\" stops before it: fix or remove it, "+
			"or set on_invalid = \"skip\" or \"raw\"", t.st.Path, start, reason)
		s.log.Error("invalid input; the source stops here", "path", t.st.Path, "offset", start, "reason", reason)
		return false
	case s.cfg.onInvalid == OnInvalidRaw && data != nil:
		s.log.Warn(reason+"; sent as it is, with header "+InvalidHeader, "path", t.st.Path, "offset", start)
		b.add(data, s.cfg.pathHeader, t.st.Path, t.id, start, connector.StringHeader(InvalidHeader, "json"))
		b.unchecked = true
	default:
		s.skipped++
		s.log.Warn(reason+"; skipped", "path", t.st.Path, "offset", start, "bytes", end-start,
			"on_invalid", s.cfg.onInvalid, "skipped_total", s.skipped)
		b.changed = true
	}
	t.st.Offset = end
	return true
}

// readWhole adds t as one message when it has settled and this version of
// it was not sent yet.
func (s *Source) readWhole(t *tracked, b *batch) {
	if t.st.MTime != 0 && t.st.Size == t.scanSize && t.st.MTime == t.scanMTime {
		t.eof = true
		if !t.seen {
			t.dropped = true
		}
		return
	}
	if s.cfg.follow && !t.settled {
		return // still changing, or seen once only
	}
	data, size, mtime, err := s.readFile(t)
	if err != nil {
		if s.cfg.follow && t.seen {
			s.log.Warn("cannot read file; will try again", "path", t.st.Path, "error", err)
		} else {
			s.log.Warn("cannot read file; skipped", "path", t.st.Path, "error", err)
			t.eof, t.dropped = true, !t.seen
		}
		return
	}
	if data == nil {
		reason := fmt.Sprintf("file of %d bytes is larger than max_message_bytes (%d)", size, s.cfg.maxMessage)
		if !s.invalid(t, 0, size, b, reason, nil) {
			return
		}
	}
	t.st.Offset, t.st.Size, t.st.MTime, t.eof = size, size, mtime, true
	switch {
	case data == nil:
	case len(data) == 0:
		b.changed = true // Iggy refuses empty payloads
	default:
		b.add(data, s.cfg.pathHeader, t.st.Path, t.id, 0)
	}
}

// readFile reads a whole file if it is still the tracked one; nil data
// means it is over max_message_bytes.
func (s *Source) readFile(t *tracked) (data []byte, size, mtime int64, err error) {
	f, err := openIdent(t.st.Path, t.id)
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, 0, err
	}
	size, mtime = fi.Size(), fi.ModTime().UnixNano()
	if size > int64(s.cfg.maxMessage) {
		return nil, size, mtime, nil
	}
	data, err = io.ReadAll(io.LimitReader(f, int64(s.cfg.maxMessage)+1))
	if err != nil {
		return nil, 0, 0, err
	}
	if len(data) > s.cfg.maxMessage {
		return nil, int64(len(data)), mtime, nil
	}
	if data == nil {
		data = []byte{}
	}
	return data, int64(len(data)), mtime, nil
}

// pruneDropped forgets files that are gone and read to their end.
func (s *Source) pruneDropped() bool {
	pruned := false
	for id, t := range s.files {
		if t.dropped {
			t.close()
			delete(s.files, id)
			pruned = true
		}
	}
	if pruned {
		s.order = slicesDeleteDropped(s.order)
	}
	return pruned
}

func slicesDeleteDropped(ts []*tracked) []*tracked {
	out := ts[:0]
	for _, t := range ts {
		if !t.dropped {
			out = append(out, t)
		}
	}
	return out
}

// snapshot encodes the offsets of every tracked file, extending the
// fingerprints of files whose first bytes were just read.
func (s *Source) snapshot() ([]byte, error) {
	files := make([]fileState, 0, len(s.files))
	for _, t := range s.files {
		if want := min(t.st.Offset, fingerprintLen); s.cfg.format != FormatWholeFile && t.st.FPLen < want {
			s.extendFingerprint(t, want)
		}
		files = append(files, t.st)
	}
	return encodeState(files)
}

func (s *Source) extendFingerprint(t *tracked, n int64) {
	var r io.ReaderAt = t.f
	if t.f == nil {
		f, err := openIdent(t.st.Path, t.id)
		if err != nil {
			return
		}
		defer f.Close()
		r = f
	}
	if fp, err := fingerprint(r, n); err == nil {
		t.st.FP, t.st.FPLen = fp, n
	}
}
