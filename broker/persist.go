package broker

// Durable files other than the partition logs (which belong to package
// broker/storage):
//
//   - metadata.json (see metadata.go) is rewritten whole on every metadata
//     change by fsx.WriteFile: a temporary file is written and fsynced,
//     renamed over the old one, and the directory is fsynced, before the
//     reply leaves. A crash leaves the old or the new file, never a mix.
//   - offsets, one per partition directory, is the journal of that
//     partition's consumer offsets (format below). Every store, delete or
//     auto-commit is one write(2) of one 18-byte record before the reply,
//     so an acknowledged offset survives a killed process as soon as the
//     reply is sent; it is fsynced before the reply under FsyncAlways or
//     enforce_fsync, else by the FsyncInterval loop and on Close. The
//     journal is compacted (rewritten atomically with one record per live
//     offset) when it holds many more records than live offsets.
//
// Offsets journal format, version 1:
//
//	header  "FERRYOF1" (8 bytes)
//	record  [op u8 (1 set, 2 delete)][consumer kind u8][consumer id u32]
//	        [offset u64][crc32c of the previous 14 bytes, u32]   18 bytes
//
// Recovery replays records up to the first short or damaged one and cuts
// the file there (a torn last write). Format changes: bump the magic's
// digit, keep a reader for the old one, and rewrite on the first compaction.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"

	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/internal/fsx"
)

const (
	journalMagic   = "FERRYOF1"
	journalRecSize = 18
	opSet          = 1
	opDelete       = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// writeFileAtomic replaces path with data durably (fsx.WriteFile), mode
// 0600.
func writeFileAtomic(path string, data []byte) error { return fsx.WriteFile(path, data, 0o600) }

// lockDataDir takes the lock of DataDir/LOCK so that two brokers never
// share a data directory (fsx.LockDir: the kernel drops it when the
// process dies, and a lock a forked child holds for a moment is waited
// out). Closing the result releases it.
func lockDataDir(dir string) (io.Closer, error) {
	l, err := fsx.LockDir(dir, "LOCK", 0o644)
	if errors.Is(err, fsx.ErrLocked) {
		return nil, fmt.Errorf("broker: data directory %s is in use by another broker", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: lock data directory %s: %w", dir, err)
	}
	return l, nil
}

// offsetStore is one partition's consumer offsets, guarded by
// partition.offMu; j is nil in memory.
type offsetStore struct {
	m map[offsetKey]uint64
	j *journal
}

func (p *partition) getOffset(k offsetKey) (uint64, bool) {
	p.offMu.Lock()
	defer p.offMu.Unlock()
	v, ok := p.offsets.m[k]
	return v, ok
}

// storeOffset stores off for k; with monotonic it never moves backwards.
func (p *partition) storeOffset(k offsetKey, off uint64, monotonic bool) error {
	p.offMu.Lock()
	defer p.offMu.Unlock()
	if old, ok := p.offsets.m[k]; ok && (old == off || (monotonic && old > off)) {
		return nil
	}
	if err := p.offsets.j.write(opSet, k, off, p.offsets.m); err != nil {
		return err
	}
	p.offsets.m[k] = off
	return nil
}

// deleteOffset removes k and reports whether it was stored.
func (p *partition) deleteOffset(k offsetKey) (bool, error) {
	p.offMu.Lock()
	defer p.offMu.Unlock()
	if _, ok := p.offsets.m[k]; !ok {
		return false, nil
	}
	if err := p.offsets.j.write(opDelete, k, 0, p.offsets.m); err != nil {
		return true, err
	}
	delete(p.offsets.m, k)
	return true, nil
}

// clearOffsets forgets the offsets drop selects and compacts the journal.
func (p *partition) clearOffsets(drop func(offsetKey) bool) error {
	p.offMu.Lock()
	defer p.offMu.Unlock()
	for k := range p.offsets.m {
		if drop(k) {
			delete(p.offsets.m, k)
		}
	}
	return p.offsets.j.compact(p.offsets.m)
}

// journal is an append-only offsets file.
type journal struct {
	path    string
	f       *os.File
	fsync   bool
	records int
	closed  bool
	log     *slog.Logger
	retryAt int // after a failed compaction, no new try below this many records
}

// openJournal opens or creates the journal at path and replays it.
func openJournal(path string, fsync bool, log *slog.Logger) (*journal, map[offsetKey]uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("read offsets %s: %w", path, err)
	}
	m, valid, records, err := decodeJournal(data)
	if err != nil {
		return nil, nil, fmt.Errorf("offsets %s: %w", path, err)
	}
	j := &journal{path: path, fsync: fsync, records: records, log: log}
	if valid < len(data) || len(data) == 0 {
		// New file, torn tail or torn creation: rewrite what is valid.
		if err := j.compact(m); err != nil {
			return nil, nil, err
		}
		return j, m, nil
	}
	if j.f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, nil, fmt.Errorf("open offsets %s: %w", path, err)
	}
	return j, m, nil
}

// decodeJournal replays a journal: it returns the live offsets, the length
// of the valid prefix and the number of records in it. Only a foreign or
// newer file is an error; a short or damaged tail ends the replay.
func decodeJournal(data []byte) (map[offsetKey]uint64, int, int, error) {
	m := map[offsetKey]uint64{}
	if len(data) < len(journalMagic) {
		if string(data) != journalMagic[:len(data)] && !zeroBytes(data) {
			return nil, 0, 0, fmt.Errorf("file of %d bytes is not an offsets journal", len(data))
		}
		return m, 0, 0, nil
	}
	if string(data[:len(journalMagic)]) != journalMagic {
		return nil, 0, 0, fmt.Errorf("bad magic %q, want %q", data[:len(journalMagic)], journalMagic)
	}
	pos, records := len(journalMagic), 0
	for len(data)-pos >= journalRecSize {
		rec := data[pos : pos+journalRecSize]
		if crc32.Checksum(rec[:14], castagnoli) != binary.LittleEndian.Uint32(rec[14:]) {
			break
		}
		k := offsetKey{wire.ConsumerKind(rec[1]), binary.LittleEndian.Uint32(rec[2:])}
		if k.Kind != wire.ConsumerSingle && k.Kind != wire.ConsumerGroup {
			break
		}
		switch rec[0] {
		case opSet:
			m[k] = binary.LittleEndian.Uint64(rec[6:])
		case opDelete:
			delete(m, k)
		default:
			return m, pos, records, nil
		}
		pos += journalRecSize
		records++
	}
	return m, pos, records, nil
}

func appendJournalRecord(b []byte, op byte, k offsetKey, off uint64) []byte {
	at := len(b)
	b = append(b, op, byte(k.Kind))
	b = binary.LittleEndian.AppendUint32(b, k.ID)
	b = binary.LittleEndian.AppendUint64(b, off)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[at:], castagnoli))
}

// write appends one record; live is the map before the caller applies it
// (used to size compaction). A nil journal (memory) does nothing. Only a
// closed journal (its partition closed or deleted) is os.ErrClosed; other
// errors are I/O failures. Once the record is written, write succeeds: a
// failed compaction after it is logged and the journal keeps appending to
// the file it has.
func (j *journal) write(op byte, k offsetKey, off uint64, live map[offsetKey]uint64) error {
	if j == nil {
		return nil
	}
	if j.closed {
		return fmt.Errorf("offsets %s: %w", j.path, os.ErrClosed)
	}
	if j.f == nil {
		return fmt.Errorf("offsets %s: no open file", j.path)
	}
	var buf [journalRecSize]byte
	if _, err := j.f.Write(appendJournalRecord(buf[:0], op, k, off)); err != nil {
		return fmt.Errorf("write offsets %s: %w", j.path, err)
	}
	if j.fsync {
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("fsync offsets %s: %w", j.path, err)
		}
	}
	j.records++
	if j.records > 1024 && j.records > 4*(len(live)+1) && j.records >= j.retryAt {
		next := make(map[offsetKey]uint64, len(live)+1)
		for lk, lv := range live {
			next[lk] = lv
		}
		if op == opSet {
			next[k] = off
		} else {
			delete(next, k)
		}
		if err := j.compact(next); err != nil {
			// The record is in the file: the change is durable. Compaction
			// is tried again 1024 records later.
			j.retryAt = j.records + 1024
			j.log.Warn("compacting the offsets journal failed; still appending to it", "path", j.path, "err", err)
		}
	}
	return nil
}

// compact rewrites the journal atomically with one record per offset. The
// new file is written and renamed into place before the handle is
// swapped; on failure the journal keeps its old file and handle.
func (j *journal) compact(m map[offsetKey]uint64) error {
	if j == nil {
		return nil
	}
	if j.closed {
		return fmt.Errorf("offsets %s: %w", j.path, os.ErrClosed)
	}
	buf := []byte(journalMagic)
	for k, v := range m {
		buf = appendJournalRecord(buf, opSet, k, v)
	}
	f, err := fsx.ReplaceFile(j.path, buf, 0o600)
	if f == nil {
		return err
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.records = f, len(m)
	return err
}

func (j *journal) sync() error {
	if j == nil || j.f == nil {
		return nil
	}
	return j.f.Sync()
}

func (j *journal) close() error {
	if j == nil || j.f == nil {
		return nil
	}
	j.closed = true
	err := j.f.Sync()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	j.f = nil
	return err
}

func zeroBytes(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
