package storage

import (
	"fmt"
	"os"

	"github.com/ferryhq/ferry/internal/fsx"
)

// Names of a compaction's files before the switch: NAME.log.compact and
// NAME.index.compact beside NAME.log and NAME.index. Recovery deletes them.
const (
	compactExt      = ".log.compact"
	compactIndexExt = ".index.compact"
)

// stager is a backend that can compact: both of this package's. stage
// writes a compacted segment's files beside the live ones, durably, for a
// later commit.
type stager interface {
	stage(base uint64, logb, idxb []byte) (stagedSegment, error)
}

// stagedSegment is a compacted segment written beside the live one.
type stagedSegment interface {
	// commit switches the staged files in for the live ones, durably, and
	// returns them open.
	commit() (log, idx blob, err error)
	// abort deletes the staged files.
	abort()
}

// stage writes and fsyncs NAME.log.compact and NAME.index.compact. The
// live files are not touched.
func (b *fileBackend) stage(base uint64, logb, idxb []byte) (st stagedSegment, err error) {
	fs := &fileStage{b: b, stem: b.stem(base)}
	defer func() {
		if err != nil {
			fs.abort()
		}
	}()
	for _, w := range []struct {
		ext  string
		data []byte
	}{{compactExt, logb}, {compactIndexExt, idxb}} {
		f, err := os.OpenFile(fs.stem+w.ext, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		fs.files = append(fs.files, f)
		if _, err := f.WriteAt(w.data, 0); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.Name(), err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("sync %s: %w", f.Name(), err)
		}
	}
	return fs, nil
}

type fileStage struct {
	b     *fileBackend
	stem  string
	files []*os.File
}

// commit renames the log first: a crash before the index follows leaves
// the new log with the old index, whose header (format version 1, or
// another end) disagrees with it, so recovery rebuilds the index from the
// new log. Either rename is atomic, so each file is wholly old or new.
func (s *fileStage) commit() (blob, blob, error) {
	if err := os.Rename(s.stem+compactExt, s.stem+logExt); err != nil {
		return nil, nil, err
	}
	crashPoint("log-renamed")
	if err := os.Rename(s.stem+compactIndexExt, s.stem+indexExt); err != nil {
		return nil, nil, err
	}
	if err := fsx.SyncDir(s.b.dir); err != nil {
		return nil, nil, err
	}
	crashPoint("committed")
	return s.files[0], s.files[1], nil
}

// crashHook, set only by the kill tests, is called at each point of a
// compaction where a crash must leave the old or the new segment.
var crashHook func(point string)

func crashPoint(point string) {
	if crashHook != nil {
		crashHook(point)
	}
}

func (s *fileStage) abort() {
	for _, f := range s.files {
		_ = f.Close()
	}
	for _, ext := range []string{compactExt, compactIndexExt} {
		_ = os.Remove(s.stem + ext) // if this fails, recovery removes it
	}
}

// stage keeps the new segment's log in memory; memory has no index file.
func (memBackend) stage(_ uint64, logb, _ []byte) (stagedSegment, error) {
	lb := &memBlob{}
	if _, err := lb.WriteAt(logb, 0); err != nil {
		return nil, err
	}
	return memStage{lb}, nil
}

type memStage struct{ log *memBlob }

func (m memStage) commit() (blob, blob, error) { return m.log, nopBlob{}, nil }
func (m memStage) abort()                      {}
