package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ferryhq/ferry/internal/fsx"
)

const (
	logExt   = ".log"
	indexExt = ".index"
	lockName = "LOCK"
)

// ErrFormat is returned by OpenFile for a segment file written in a format
// version this build does not read (a newer Ferry wrote it). Nothing is
// changed on disk; run a build that reads it.
var ErrFormat = errors.New("storage: unsupported segment file format")

// OpenFile opens the partition log in dir, creating dir and an empty log if
// missing, and recovers it after a crash as the package doc describes. The
// directory is locked until Close; a second open fails with ErrLocked.
func OpenFile(dir string, opts Options) (Log, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: create partition directory: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("storage: partition directory: %w", err)
	}
	if err := claimDir(abs); err != nil {
		return nil, err
	}
	lock, err := lockDir(abs)
	if err != nil {
		releaseDir(abs)
		return nil, err
	}
	be := &fileBackend{dir: abs, lock: lock}
	segs, err := recoverDir(be, opts)
	if err != nil {
		return nil, errors.Join(err, be.close())
	}
	return newPartitionLog(opts, be, segs), nil
}

// openDirs holds the directories of the file logs open in this process.
var (
	openMu   sync.Mutex
	openDirs = map[string]bool{}
)

// lockDir takes the directory's LOCK against other processes (openDirs
// guards this one): fsx.LockDir, which waits out a lock that a child
// forked by this process holds for a moment.
func lockDir(abs string) (*fsx.DirLock, error) {
	lock, err := fsx.LockDir(abs, lockName, 0o644)
	if errors.Is(err, fsx.ErrLocked) {
		return nil, fmt.Errorf("%w: %s is locked by another process", ErrLocked, filepath.Join(abs, lockName))
	}
	if err != nil {
		return nil, fmt.Errorf("storage: lock partition directory: %w", err)
	}
	return lock, nil
}

func claimDir(abs string) error {
	openMu.Lock()
	defer openMu.Unlock()
	if openDirs[abs] {
		return fmt.Errorf("%w: %s is open in this process", ErrLocked, abs)
	}
	openDirs[abs] = true
	return nil
}

func releaseDir(abs string) {
	openMu.Lock()
	delete(openDirs, abs)
	openMu.Unlock()
}

// fileBackend keeps each segment as two files in dir: NAME.log and
// NAME.index, NAME being the base offset in 20 digits.
type fileBackend struct {
	dir  string
	lock *fsx.DirLock
}

func (b *fileBackend) stem(base uint64) string { return filepath.Join(b.dir, segmentName(base)) }

func (b *fileBackend) create(base uint64) (s *segment, err error) {
	stem := b.stem(base)
	var files []*os.File
	defer func() {
		if err != nil {
			for _, f := range files {
				_ = f.Close()
			}
		}
	}()
	var hdr [fileHeaderSize]byte
	for _, ext := range []string{logExt, indexExt} {
		f, err := os.OpenFile(stem+ext, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		magic := logMagic
		if ext == indexExt {
			magic = indexMagic
		}
		putFileHeader(hdr[:], magic, base)
		if _, err := f.WriteAt(hdr[:], 0); err != nil {
			return nil, fmt.Errorf("write header of %s: %w", f.Name(), err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("sync %s: %w", f.Name(), err)
		}
	}
	if err := fsx.SyncDir(b.dir); err != nil {
		return nil, err
	}
	return newSegment(base, files[0], files[1], stem+logExt), nil
}

// remove deletes the index before the log: a log left without its index
// by a crash gets a rebuilt index, never the reverse.
func (b *fileBackend) remove(s *segment) error {
	err := s.closeFiles()
	stem := b.stem(s.base)
	for _, name := range []string{stem + indexExt, stem + logExt} {
		if rerr := os.Remove(name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return errors.Join(err, rerr)
		}
	}
	return errors.Join(err, fsx.SyncDir(b.dir))
}

func (b *fileBackend) close() error {
	if b.lock == nil {
		return nil
	}
	err := b.lock.Close()
	b.lock = nil
	releaseDir(b.dir)
	return err
}
