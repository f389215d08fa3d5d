package file

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/internal/fsx"
)

// outFile is one file the sink appends to.
type outFile struct {
	path   string
	f      *os.File
	w      *bufio.Writer
	size   int64     // bytes written (buffered included)
	opened time.Time // when opened or created, for rotate_interval
	use    uint64    // the Consume that last wrote it
	// side holds the committed size for the raw format (see the package
	// doc); nil for the line formats.
	side *os.File
}

// sidecarPath is where the raw format keeps a file's committed size.
func sidecarPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".ferry-size")
}

// sidecarLen is the length of a sidecar record: 20 digits and "\n".
const sidecarLen = 21

// parseSidecar reads a sidecar record.
func parseSidecar(b []byte) (int64, error) {
	if len(b) != sidecarLen || b[sidecarLen-1] != '\n' {
		return 0, fmt.Errorf("size record is %d bytes, want %d ending in a newline", len(b), sidecarLen)
	}
	for _, c := range b[:sidecarLen-1] {
		if c < '0' || c > '9' {
			return 0, errors.New("size record is not decimal digits")
		}
	}
	n, err := strconv.ParseInt(string(b[:sidecarLen-1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size record: %w", err)
	}
	return n, nil
}

func formatSidecar(n int64) []byte { return fmt.Appendf(nil, "%020d\n", n) }

// file returns the open file for path, opening (and repairing) it first
// if needed, and closes the least recently used file beyond max_open_files.
func (s *Sink) file(path string) (*outFile, error) {
	if of, ok := s.files[path]; ok {
		of.use = s.tick
		return of, nil
	}
	if len(s.files) >= s.maxOpen {
		var lru *outFile
		for _, of := range s.files {
			if of.use != s.tick && (lru == nil || of.use < lru.use) {
				lru = of
			}
		}
		if lru != nil {
			_ = lru.close()
			delete(s.files, lru.path)
		}
	}
	of, err := s.openFile(path)
	if err != nil {
		return nil, err
	}
	of.use = s.tick
	s.files[path] = of
	return of, nil
}

// openFile opens path for appending. A file left by a crash is cut back
// to its last complete record: for the line formats, past its last "\n";
// for raw, to the size its sidecar recorded.
func (s *Sink) openFile(path string) (*outFile, error) {
	if err := s.paths.Check(path); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create directory %s: %w", dir, err)
	}
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	of := &outFile{path: path, f: f, w: bufio.NewWriterSize(f, 256<<10), opened: s.now()}
	if err := s.repair(of); err != nil {
		_ = of.close()
		return nil, err
	}
	if created {
		if err := fsx.SyncDir(dir); err != nil {
			_ = of.close()
			return nil, err
		}
	}
	return of, nil
}

func (s *Sink) repair(of *outFile) error {
	fi, err := of.f.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", of.path, err)
	}
	size := fi.Size()
	keep := size
	if s.format == FormatRaw {
		side, err := os.OpenFile(sidecarPath(of.path), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("open size record of %s: %w", of.path, err)
		}
		of.side = side
		buf := make([]byte, sidecarLen+1)
		n, _ := side.ReadAt(buf, 0)
		switch committed, perr := parseSidecar(buf[:n]); {
		case n == 0:
			// New or never committed: everything in the file counts.
		case perr != nil:
			s.log.Warn("file sink: size record unreadable; keeping the whole file", "path", of.path, "error", perr)
		case committed < size:
			keep = committed
		case committed > size:
			s.log.Warn("file sink: file is shorter than its size record says", "path", of.path, "size", size, "recorded", committed)
		}
	} else if size > 0 {
		if keep, err = lastNewline(of.f, size); err != nil {
			return fmt.Errorf("read %s: %w", of.path, err)
		}
	}
	if want, ok := s.cutTo[of.path]; ok && want < keep {
		// A failed batch's records, written but not committed.
		s.log.Warn("file sink: removed the records of a failed batch (it is delivered again)", "path", of.path, "bytes", keep-want)
		keep = want
	} else if keep < size {
		s.log.Warn("file sink: removed an incomplete record left by a crash (its batch is delivered again)",
			"path", of.path, "bytes", size-keep)
	}
	if keep < size {
		if err := of.f.Truncate(keep); err != nil {
			return fmt.Errorf("truncate %s: %w", of.path, err)
		}
		if err := of.f.Sync(); err != nil {
			return fmt.Errorf("fsync %s: %w", of.path, err)
		}
	}
	of.size = keep
	delete(s.cutTo, of.path)
	return nil
}

func (of *outFile) write(rec []byte) error {
	if _, err := of.w.Write(rec); err != nil {
		return fmt.Errorf("write %s: %w", of.path, err)
	}
	of.size += int64(len(rec))
	return nil
}

// commit flushes and fsyncs the file, then records its size for raw.
func (of *outFile) commit() error {
	if err := of.w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", of.path, err)
	}
	if err := of.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", of.path, err)
	}
	if of.side != nil {
		if _, err := of.side.WriteAt(formatSidecar(of.size), 0); err != nil {
			return fmt.Errorf("write size record of %s: %w", of.path, err)
		}
		if err := of.side.Sync(); err != nil {
			return fmt.Errorf("fsync size record of %s: %w", of.path, err)
		}
	}
	return nil
}

// truncate drops what was written after size (buffered or not).
func (of *outFile) truncate(size int64) error {
	of.w.Reset(of.f)
	if err := of.f.Truncate(size); err != nil {
		return err
	}
	of.size = size
	return of.f.Sync()
}

// abandon closes the file without flushing: what is buffered belongs to
// a batch that was not committed.
func (of *outFile) abandon() {
	if of.f != nil {
		of.w.Reset(of.f)
		_ = of.f.Close()
		of.f = nil
	}
	if of.side != nil {
		_ = of.side.Close()
		of.side = nil
	}
}

func (of *outFile) close() error {
	var errs []error
	if of.f != nil {
		errs = append(errs, of.w.Flush(), of.f.Close())
		of.f = nil
	}
	if of.side != nil {
		errs = append(errs, of.side.Close())
		of.side = nil
	}
	return errors.Join(errs...)
}

// rotate makes the file complete: it is fsynced, renamed to
// <name>.<UTC time>.<ext>, and a new empty file takes its place.
func (s *Sink) rotate(of *outFile) error {
	if err := of.commit(); err != nil {
		return err
	}
	target := rotatedName(of.path, s.now())
	if err := of.close(); err != nil {
		return fmt.Errorf("close %s: %w", of.path, err)
	}
	if s.format == FormatRaw {
		if err := os.Remove(sidecarPath(of.path)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove size record of %s: %w", of.path, err)
		}
	}
	if err := os.Rename(of.path, target); err != nil {
		return fmt.Errorf("rotate %s: %w", of.path, err)
	}
	if err := fsx.SyncDir(filepath.Dir(of.path)); err != nil {
		return err
	}
	s.log.Info("file sink: rotated", "path", of.path, "to", target)
	fresh, err := s.openFile(of.path)
	if err != nil {
		return err
	}
	*of = outFile{path: fresh.path, f: fresh.f, w: fresh.w, opened: fresh.opened, side: fresh.side, use: of.use}
	return nil
}

// rotatedName is path with the UTC time inserted before its extension,
// and a counter ("_001", ...) when that name is taken.
func rotatedName(path string, now time.Time) string {
	ext := filepath.Ext(path)
	base := strings.TrimSuffix(path, ext)
	stamp := now.UTC().Format("20060102T150405Z")
	name := base + "." + stamp + ext
	for i := 1; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, os.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s.%s_%03d%s", base, stamp, i, ext) // sorts after the name without a counter
	}
}
