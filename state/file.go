package state

import (
	"bytes"
	"context"
	"encoding/binary"
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
	fileSuffix = ".state" // <key>.state held a key's state before the journal (legacy, migrated at open)
	lockName   = ".lock"  // held (fsx.LockDir) while a FileStore has the directory open
	// oldTmpPrefix starts the temp files of Saves by builds before fsx
	// (.tmp-<key>.<random>); fsx.IsTemp names today's.
	oldTmpPrefix = ".tmp-"
)

// FileStore keeps the state of all keys in one append-only journal,
// <dir>/state.journal (see journal_format.go), and in memory. A Save
// appends a checksummed record and returns once a data sync (fdatasync)
// that started after the append has finished; concurrent Saves share one
// sync (group commit). Load answers from memory, which OpenFile rebuilds by
// replaying the journal. A crash mid-append leaves a torn last record that
// was never acknowledged; OpenFile cuts it off. When the journal is much
// larger than the live state it is rewritten atomically (temp file, fsync,
// rename, directory fsync) in the background.
//
// Directories written by earlier builds hold one file per key,
// <dir>/<key>.state (see format.go); OpenFile moves them into the journal
// (append, sync, then remove the files). A legacy file that cannot be
// decoded is left in place and reported by Load and Save as ErrCorrupt
// until Delete removes it.
//
// Versions are decimal counters: the first Save of a key returns "1", each
// later one adds 1. Deleting a key restarts its counter, so a writer holding
// a version from before a Delete and re-creation may not notice the change.
//
// A FileStore is safe for concurrent use; Saves and Deletes of one key are
// serialised by a per-key lock, and Load never waits for them. On systems
// with flock(2) the directory is locked against a second FileStore (in
// this or another process) for as long as the store is open.
type FileStore struct {
	dir   string
	d     *fsx.Dir // all file access goes through it: no escaping dir
	root  *os.Root // d.Root()
	lock  *fsx.DirLock
	locks keyLocks
	j     *journal

	memMu   sync.RWMutex
	mem     map[string]entry // durable state of each key
	corrupt map[string]error // keys whose legacy file cannot be decoded

	mu     sync.RWMutex // operations hold it shared, Close exclusively
	closed bool
}

// entry is a key's durable state: its version and its journal record.
type entry struct {
	version uint64
	rec     []byte // put record; recordData gives the state
}

var _ Store = (*FileStore)(nil)

// OpenFile opens the file store in dir, creating the directory with mode
// 0700 if it does not exist (an existing directory keeps its mode). It takes
// the directory lock, removes temp files left by a write that crashed,
// replays the journal (cutting off a torn last record), and migrates
// legacy <key>.state files into it. A journal that is corrupt before its
// last record is a *CorruptError naming the file and byte offset.
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
	s := &FileStore{dir: dir, d: d, root: d.Root(), locks: keyLocks{m: map[string]*keyLock{}},
		mem: map[string]entry{}, corrupt: map[string]error{}}
	if err := s.open(); err != nil {
		return nil, errors.Join(err, s.closeFiles())
	}
	s.j.kickCompactor() // compact a journal that grew large before
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
	var legacy []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case !e.Type().IsRegular():
		case isTemp(name):
			if err := s.root.Remove(name); err != nil {
				return fmt.Errorf("state: remove leftover temp file %s: %w", s.path(name), err)
			}
			removed = true
		case strings.HasSuffix(name, fileSuffix) && ValidateKey(strings.TrimSuffix(name, fileSuffix)) == nil:
			legacy = append(legacy, strings.TrimSuffix(name, fileSuffix))
		}
	}
	if removed {
		if err := s.d.Sync(); err != nil {
			return fmt.Errorf("state: %w", err)
		}
	}
	if err := s.openJournal(); err != nil {
		return err
	}
	return s.migrate(legacy)
}

// openJournal replays the journal, or creates an empty one.
func (s *FileStore) openJournal() error {
	path := s.path(journalName)
	f, err := s.root.OpenFile(journalName, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if f, err = s.d.ReplaceFile(journalName, journalHeader(), 0o600); err != nil {
			if f != nil {
				_ = f.Close()
			}
			return fmt.Errorf("state: create journal: %w", err)
		}
		s.j = newJournal(s.d, f, journalHeaderSize, map[string][]byte{})
		return nil
	}
	if err != nil {
		return fmt.Errorf("state: open journal %s: %w", path, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("state: read journal %s: %w", path, err)
	}
	live, end, err := decodeJournal(b)
	if err != nil {
		_ = f.Close()
		return &CorruptError{Path: path, Err: err}
	}
	if end < len(b) {
		// A torn last record: its Save never returned.
		if err := f.Truncate(int64(end)); err != nil {
			_ = f.Close()
			return fmt.Errorf("state: cut torn record off journal %s at byte offset %d: %w", path, end, err)
		}
	}
	for key, rec := range live {
		rec = bytes.Clone(rec) // let the replay buffer go
		live[key] = rec
		s.mem[key] = entry{version: binary.LittleEndian.Uint64(rec[10:18]), rec: rec}
	}
	s.j = newJournal(s.d, f, int64(end), live)
	// Records a killed process appended are in the page cache but maybe not
	// on disk; make what Load will return durable.
	if err := datasync(f); err != nil {
		return fmt.Errorf("state: sync journal %s: %w", path, err)
	}
	return nil
}

// migrate moves legacy <key>.state files into the journal: the journal's
// record wins over a key's file; other decodable files are appended, the
// journal is synced, and then the files are removed. Undecodable files stay
// (Load and Save report them; Delete removes them).
func (s *FileStore) migrate(keys []string) error {
	var remove []string
	appended := false
	for _, key := range keys {
		if _, ok := s.mem[key]; ok {
			remove = append(remove, key) // stale: the journal is newer
			continue
		}
		v, data, err := s.readLegacy(key)
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				s.corrupt[key] = err
				continue
			}
			return fmt.Errorf("state %q: migrate: %w", key, err)
		}
		rec := encodeRecord(recordPut, key, v, data)
		if _, err := s.j.append(key, rec); err != nil {
			return fmt.Errorf("state %q: migrate: %w", key, err)
		}
		s.mem[key] = entry{version: v, rec: rec}
		remove = append(remove, key)
		appended = true
	}
	if appended {
		if err := s.j.syncAll(); err != nil {
			return fmt.Errorf("state: migrate: %w", err)
		}
	}
	for _, key := range remove {
		if err := s.root.Remove(fileName(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("state %q: migrate: remove %s: %w", key, s.path(fileName(key)), err)
		}
	}
	if len(remove) > 0 {
		if err := s.d.Sync(); err != nil {
			return fmt.Errorf("state: migrate: %w", err)
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
// matching ErrCorrupt (a *CorruptError naming the file) if the key's
// legacy state file cannot be decoded. It answers from memory.
func (s *FileStore) Load(ctx context.Context, key string) (State, error) {
	if err := s.begin(ctx, key); err != nil {
		return State{}, fmt.Errorf("state: load: %w", err)
	}
	defer s.mu.RUnlock()
	e, err := s.current(key)
	if err != nil {
		return State{}, fmt.Errorf("state %q: load: %w", key, err)
	}
	return State{Data: append([]byte{}, recordData(e.rec)...), Version: fileVersion(e.version)}, nil
}

// Save writes data for key if its stored version equals expected (zero:
// must not exist) and returns the new version once the journal record is
// durable. If the key's legacy file is corrupt, Save fails with ErrCorrupt
// rather than overwrite it: the operator decides (Delete, or restore the
// file).
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

	cur, err := s.current(key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("state %q: save: read current state: %w", key, err)
	}
	if actual := fileVersion(cur.version); actual != expected {
		return "", &ConflictError{Key: key, Expected: expected, Actual: actual}
	}
	next := cur.version + 1
	rec := encodeRecord(recordPut, key, next, data)
	if err := s.commit(key, rec); err != nil {
		return "", fmt.Errorf("state %q: save: %w", key, err)
	}
	s.memMu.Lock()
	s.mem[key] = entry{version: next, rec: rec}
	s.memMu.Unlock()
	return fileVersion(next), nil
}

// commit appends rec and waits until it is durable.
func (s *FileStore) commit(key string, rec []byte) error {
	seq, err := s.j.append(key, rec)
	if err != nil {
		return err
	}
	return s.j.waitSync(seq)
}

// Delete removes the state of key (a journal record, or its legacy file),
// or returns ErrNotFound. The deletion is durable when Delete returns.
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

	s.memMu.RLock()
	_, inJournal := s.mem[key]
	_, inFile := s.corrupt[key]
	s.memMu.RUnlock()
	switch {
	case inJournal:
		if err := s.commit(key, encodeRecord(recordDelete, key, 0, nil)); err != nil {
			return fmt.Errorf("state %q: delete: %w", key, err)
		}
		s.memMu.Lock()
		delete(s.mem, key)
		s.memMu.Unlock()
	case inFile:
		if err := s.root.Remove(fileName(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("state %q: delete %s: %w", key, s.path(fileName(key)), err)
		}
		if err := s.d.Sync(); err != nil {
			return fmt.Errorf("state %q: delete: %w", key, err)
		}
		s.memMu.Lock()
		delete(s.corrupt, key)
		s.memMu.Unlock()
	default:
		return fmt.Errorf("state %q: delete: %w", key, ErrNotFound)
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
	var errs []error
	if s.j != nil {
		errs = append(errs, s.j.close())
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
	}
	return errors.Join(append(errs, s.d.Close())...)
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

// current returns key's durable state; ErrNotFound when there is none, a
// *CorruptError when its legacy file cannot be decoded.
func (s *FileStore) current(key string) (entry, error) {
	s.memMu.RLock()
	defer s.memMu.RUnlock()
	if e, ok := s.mem[key]; ok {
		return e, nil
	}
	if err, ok := s.corrupt[key]; ok {
		return entry{}, err
	}
	return entry{}, ErrNotFound
}

// readLegacy returns the decoded legacy state file of key.
func (s *FileStore) readLegacy(key string) (uint64, []byte, error) {
	name := fileName(key)
	f, err := s.root.Open(name)
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

// CorruptError reports a state file (the journal or a legacy file) that
// cannot be decoded; for the journal, Err names the byte offset. It matches
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
