package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/ferryhq/ferry/internal/fsx"
)

const (
	fileSuffix = ".state" // <key>.state holds the key's state
	lockName   = ".lock"  // held (fsx.LockDir) while a FileStore has the directory open
	// oldTmpPrefix starts the temp files of Saves by builds before fsx
	// (.tmp-<key>.<random>); fsx.IsTemp names today's.
	oldTmpPrefix = ".tmp-"
)

// FileStore keeps each key's state in its own file, <dir>/<key>.state,
// framed by a checksummed header (see format.go). Saves are atomic and
// durable: the new file is written to a temp file in the same directory,
// fsynced, renamed over the old one, and the directory is fsynced, so a
// crash or power loss leaves the old or the new state.
//
// Versions are decimal counters: the first Save of a key returns "1", each
// later one adds 1. Deleting a key restarts its counter, so a writer holding
// a version from before a Delete and re-creation may not notice the change.
//
// A FileStore is safe for concurrent use; Saves and Deletes of one key are
// serialised by a per-key lock, and Load never blocks. On systems with
// flock(2) the directory is locked against a second FileStore (in this or
// another process) for as long as the store is open.
type FileStore struct {
	dir   string
	d     *fsx.Dir // all file access goes through it: no escaping dir
	root  *os.Root // d.Root()
	lock  *fsx.DirLock
	locks keyLocks

	mu     sync.RWMutex // operations hold it shared, Close exclusively
	closed bool
}

var _ Store = (*FileStore)(nil)

// OpenFile opens the file store in dir, creating the directory with mode
// 0700 if it does not exist (an existing directory keeps its mode). It takes
// the directory lock and removes temp files left by a Save that crashed.
func OpenFile(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("state: open file store: empty directory path")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: create directory: %w", err)
	}
	d, err := fsx.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("state: open directory: %w", err)
	}
	s := &FileStore{dir: dir, d: d, root: d.Root(), locks: keyLocks{m: map[string]*keyLock{}}}
	if err := s.open(); err != nil {
		return nil, errors.Join(err, s.closeFiles())
	}
	return s, nil
}

func (s *FileStore) open() error {
	var err error
	if s.lock, err = fsx.LockDir(s.dir, lockName, 0o600); err != nil {
		return fmt.Errorf("state: lock directory %s (is another Ferry process using it?): %w", s.dir, err)
	}
	entries, err := fs.ReadDir(s.root.FS(), ".")
	if err != nil {
		return fmt.Errorf("state: list directory %s: %w", s.dir, err)
	}
	removed := false
	for _, e := range entries {
		if isTemp(e.Name()) && e.Type().IsRegular() {
			if err := s.root.Remove(e.Name()); err != nil {
				return fmt.Errorf("state: remove leftover temp file %s: %w", s.path(e.Name()), err)
			}
			removed = true
		}
	}
	if removed {
		if err := s.d.Sync(); err != nil {
			return fmt.Errorf("state: %w", err)
		}
	}
	return nil
}

// isTemp reports whether name is the temp file of a Save that crashed.
func isTemp(name string) bool { return fsx.IsTemp(name) || strings.HasPrefix(name, oldTmpPrefix) }

// Dir returns the directory the store was opened on.
func (s *FileStore) Dir() string { return s.dir }

func (s *FileStore) path(name string) string { return filepath.Join(s.dir, name) }

func fileName(key string) string { return key + fileSuffix }

// Load returns the state for key, ErrNotFound if there is none, or an error
// matching ErrCorrupt (a *CorruptError naming the file) if the file cannot
// be decoded.
func (s *FileStore) Load(ctx context.Context, key string) (State, error) {
	if err := s.begin(ctx, key); err != nil {
		return State{}, fmt.Errorf("state: load: %w", err)
	}
	defer s.mu.RUnlock()
	v, data, err := s.read(key)
	if err != nil {
		return State{}, fmt.Errorf("state %q: load: %w", key, err)
	}
	return State{Data: data, Version: fileVersion(v)}, nil
}

// Save writes data for key if its stored version equals expected (zero:
// must not exist) and returns the new version. If the current file is
// corrupt, Save fails with ErrCorrupt rather than overwrite it: the operator
// decides (Delete, or restore the file).
func (s *FileStore) Save(ctx context.Context, key string, data []byte, expected Version) (Version, error) {
	if len(data) > MaxStateSize {
		return "", fmt.Errorf("state %q: save: %w: %d bytes, the limit is %d", key, ErrTooLarge, len(data), MaxStateSize)
	}
	if err := s.begin(ctx, key); err != nil {
		return "", fmt.Errorf("state: save: %w", err)
	}
	defer s.mu.RUnlock()
	unlock, err := s.locks.lock(ctx, key)
	if err != nil {
		return "", fmt.Errorf("state %q: save: wait for key lock: %w", key, err)
	}
	defer unlock()

	cur, _, err := s.read(key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("state %q: save: read current state: %w", key, err)
	}
	if actual := fileVersion(cur); actual != expected {
		return "", &ConflictError{Key: key, Expected: expected, Actual: actual}
	}
	next := cur + 1
	if err := s.d.WriteFile(fileName(key), encodeFile(next, data), 0o600); err != nil {
		return "", fmt.Errorf("state %q: save: %w", key, err)
	}
	return fileVersion(next), nil
}

// Delete removes the state file for key, or returns ErrNotFound.
func (s *FileStore) Delete(ctx context.Context, key string) error {
	if err := s.begin(ctx, key); err != nil {
		return fmt.Errorf("state: delete: %w", err)
	}
	defer s.mu.RUnlock()
	unlock, err := s.locks.lock(ctx, key)
	if err != nil {
		return fmt.Errorf("state %q: delete: wait for key lock: %w", key, err)
	}
	defer unlock()
	if err := s.root.Remove(fileName(key)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("state %q: delete: %w", key, ErrNotFound)
		}
		return fmt.Errorf("state %q: delete %s: %w", key, s.path(fileName(key)), err)
	}
	if err := s.d.Sync(); err != nil {
		return fmt.Errorf("state %q: delete: %w", key, err)
	}
	return nil
}

// Close releases the directory lock and file handles, after waiting for
// operations in progress. It is idempotent.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.closeFiles(); err != nil {
		return fmt.Errorf("state: close file store %s: %w", s.dir, err)
	}
	return nil
}

func (s *FileStore) closeFiles() error {
	return errors.Join(s.lock.Close(), s.d.Close())
}

// begin validates key and ctx and takes the shared lock; on success the
// caller must RUnlock s.mu.
func (s *FileStore) begin(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("state %q: %w", key, err)
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return fmt.Errorf("state %q: %w", key, ErrClosed)
	}
	return nil
}

// read returns the decoded state file of key; version 0 with ErrNotFound
// when there is none.
func (s *FileStore) read(key string) (uint64, []byte, error) {
	name := fileName(key)
	f, err := s.root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil, ErrNotFound
	}
	if err != nil {
		return 0, nil, fmt.Errorf("open %s: %w", s.path(name), err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, fileHeaderSize+MaxStateSize+1))
	if err != nil {
		return 0, nil, fmt.Errorf("read %s: %w", s.path(name), err)
	}
	v, data, err := decodeFile(b)
	if err != nil {
		return 0, nil, &CorruptError{Path: s.path(name), Err: err}
	}
	return v, data, nil
}

// fileVersion renders a counter as a Version; 0 is the zero Version.
func fileVersion(v uint64) Version {
	if v == 0 {
		return ""
	}
	return Version(strconv.FormatUint(v, 10))
}

// CorruptError reports a state file that cannot be decoded. It matches
// ErrCorrupt.
type CorruptError struct {
	Path string // the file
	Err  error  // what is wrong with it
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("state file %s is corrupt: %v", e.Path, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// keyLocks hands out one lock per key; waiting honours a context. Entries
// are removed when no goroutine holds or waits for them.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{} // capacity 1: full = held
	refs int           // holders and waiters, guarded by keyLocks.mu
}

func (l *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	kl := l.m[key]
	if kl == nil {
		kl = &keyLock{ch: make(chan struct{}, 1)}
		l.m[key] = kl
	}
	kl.refs++
	l.mu.Unlock()

	select {
	case kl.ch <- struct{}{}:
		return func() { <-kl.ch; l.release(key, kl) }, nil
	case <-ctx.Done():
		l.release(key, kl)
		return nil, ctx.Err()
	}
}

func (l *keyLocks) release(key string, kl *keyLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if kl.refs--; kl.refs == 0 {
		delete(l.m, key)
	}
}
