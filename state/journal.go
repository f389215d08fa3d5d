package state

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/ferryhq/ferry/internal/fsx"
)

const (
	journalName = "state.journal" // the FileStore's journal in its directory

	// A journal is compacted when it is larger than compactMinSize and
	// more than compactFactor times the bytes of its live records.
	compactMinSize = 1 << 20
	compactFactor  = 4
)

// journal is the append-only file of a FileStore with group commit:
// records are appended under mu, and waitSync makes them durable with
// one data sync for every record appended before that sync started,
// however many goroutines wait. Compaction rewrites the live records to a
// new journal that replaces the old one atomically.
type journal struct {
	d    *fsx.Dir
	path string

	mu      sync.Mutex
	cond    sync.Cond // on mu: signalled when a sync or compaction ends
	f       *os.File
	size    int64             // bytes in f: header and records
	live    map[string][]byte // each live key's last put record, appended (durable or not)
	liveLen int64             // sum of the live records' lengths
	seq     uint64            // records appended
	synced  uint64            // records known durable
	busy    bool              // a sync (run without mu) or a compaction is running
	// wantCompact: a compaction waits for the running sync; no new one starts.
	wantCompact bool
	err         error // sticky: after a failed write or sync nothing more is appended

	compactMin int64  // compactMinSize; tests lower it
	syncs      int    // data syncs done, for tests
	compacts   int    // compactions done, for tests
	beforeSync func() // tests: called by a sync leader before it reads what to sync

	kick chan struct{} // capacity 1: asks the compactor goroutine to look
	stop chan struct{}
	done chan struct{}
}

func newJournal(d *fsx.Dir, f *os.File, size int64, live map[string][]byte) *journal {
	j := &journal{
		d: d, path: d.Path() + string(os.PathSeparator) + journalName, f: f, size: size, live: live,
		compactMin: compactMinSize, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	j.cond.L = &j.mu
	for _, rec := range live {
		j.liveLen += int64(len(rec))
	}
	go j.compactor()
	return j
}

// kickCompactor asks the compactor to check the journal's size.
func (j *journal) kickCompactor() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// append writes rec, a record for key, at the end of the journal and
// returns its sequence number for waitSync. A put record becomes key's
// live record, a delete removes it.
func (j *journal) append(key string, rec []byte) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return 0, j.err
	}
	if _, err := j.f.WriteAt(rec, j.size); err != nil {
		// Cut off whatever part was written, so the next record does not
		// follow garbage; if that fails too, stop appending.
		if terr := j.f.Truncate(j.size); terr != nil {
			j.err = fmt.Errorf("append to %s failed and the journal could not be cut back (reopen the store): %w", j.path, errors.Join(err, terr))
		}
		return 0, fmt.Errorf("append to %s: %w", j.path, err)
	}
	j.size += int64(len(rec))
	if old, ok := j.live[key]; ok {
		j.liveLen -= int64(len(old))
	}
	if rec[4] == recordPut {
		j.live[key] = rec
		j.liveLen += int64(len(rec))
	} else {
		delete(j.live, key)
	}
	j.seq++
	return j.seq, nil
}

// waitSync returns once record seq is durable: after a data sync that
// started after the record was written. One goroutine syncs (the leader)
// while the others wait for its result or lead the next sync.
func (j *journal) waitSync(seq uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.synced < seq {
		if j.err != nil {
			return j.err
		}
		if j.busy || j.wantCompact {
			j.cond.Wait() // a compaction syncs everything too
			continue
		}
		j.busy = true
		if j.beforeSync != nil {
			j.mu.Unlock()
			j.beforeSync()
			j.mu.Lock()
		}
		target, f := j.seq, j.f // every record up to target is written
		j.mu.Unlock()
		err := datasync(f)
		j.mu.Lock()
		j.busy = false
		j.syncs++
		if err != nil {
			j.err = fmt.Errorf("sync %s (reopen the store; records since the last sync may or may not be durable): %w", j.path, err)
		} else {
			j.synced = max(j.synced, target)
		}
		j.cond.Broadcast()
	}
	if j.size > j.compactMin && j.size > compactFactor*j.liveLen {
		j.kickCompactor()
	}
	return nil
}

// syncAll makes every appended record durable.
func (j *journal) syncAll() error {
	j.mu.Lock()
	seq := j.seq
	j.mu.Unlock()
	return j.waitSync(seq)
}

// compactor runs until stop is closed, compacting when kicked.
func (j *journal) compactor() {
	defer close(j.done)
	for {
		select {
		case <-j.stop:
			return
		case <-j.kick:
			// An error is sticky in j.err when it matters (the new
			// journal may be in place); otherwise the old journal stays
			// and the next kick tries again.
			_ = j.compact(false)
		}
	}
}

// compact rewrites the live records to a new journal and renames it over
// the old one (temp file, fsync, rename, directory fsync), unless the
// journal is small (force makes it compact anyway). Appends wait while it
// runs. Records appended but not yet synced are in the new journal, which
// is synced, so their waiters are released.
func (j *journal) compact(force bool) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.wantCompact = true // no new sync starts: a steady stream of Saves must not starve us
	for j.busy {
		j.cond.Wait()
	}
	j.wantCompact = false
	if j.err != nil {
		j.cond.Broadcast()
		return j.err
	}
	if !force && (j.size <= j.compactMin || j.size <= compactFactor*j.liveLen) {
		j.cond.Broadcast()
		return nil
	}
	j.busy = true
	defer func() { j.busy = false; j.cond.Broadcast() }()
	buf := make([]byte, 0, journalHeaderSize+j.liveLen)
	buf = append(buf, journalHeader()...)
	for _, rec := range j.live {
		buf = append(buf, rec...)
	}
	f, err := j.d.ReplaceFile(journalName, buf, 0o600)
	if f == nil {
		return fmt.Errorf("compact %s: %w", j.path, err) // the old journal is still in place
	}
	_ = j.f.Close() // renamed over; nothing more goes there
	j.f, j.size, j.synced = f, int64(len(buf)), j.seq
	j.compacts++
	if err != nil {
		// Renamed, but the rename may not survive a crash: stop here.
		j.err = fmt.Errorf("compact %s (reopen the store): %w", j.path, err)
		return j.err
	}
	return nil
}

// close stops the compactor and closes the file.
func (j *journal) close() error {
	close(j.stop)
	<-j.done
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = ErrClosed
	}
	if err := j.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", j.path, err)
	}
	return nil
}
