package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// Sink is the file sink.
type Sink struct {
	tmpl        template
	format      string
	rotateSize  int64
	rotateEvery time.Duration
	maxOpen     int
	paths       connector.Paths // where the runtime lets connectors write
	log         *slog.Logger
	now         func() time.Time // tests replace it

	mu    sync.Mutex // one Consume at a time (a sink may read several topics)
	files map[string]*outFile
	// cutTo holds, for files a failed batch could not be cut back in
	// (closed without flushing), the size to cut them to when reopened:
	// their tail is written but not committed.
	cutTo   map[string]int64
	tick    uint64 // Consume count, for least-recently-used closing
	scratch bytes.Buffer
	closed  bool
}

// NewSink builds a file sink from its configuration.
func NewSink(cfg connector.Config) (connector.Sink, error) {
	return newSink(cfg)
}

func newSink(cfg connector.Config) (*Sink, error) {
	set, err := SinkSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	tmpl, err := parseTemplate(set.String("path"), cfg.Key)
	if err != nil {
		return nil, set.Errorf("path", "%v", err)
	}
	if err := cfg.Paths.Check(tmpl.fixedDir()); err != nil {
		return nil, set.Errorf("path", "%v", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sink{tmpl: tmpl, format: set.String("format"), rotateSize: set.Size("rotate_size"),
		rotateEvery: set.Duration("rotate_interval"), maxOpen: set.Int("max_open_files"), now: time.Now,
		files: map[string]*outFile{}, cutTo: map[string]int64{}, log: log, paths: cfg.Paths}, nil
}

// Open does nothing: files are opened (and repaired) when first written.
func (s *Sink) Open(context.Context) error { return nil }

// Consume appends the batch to its files, then flushes and fsyncs each
// file it wrote, so a nil return means the records are on disk. On a
// write error the files are cut back to where they were, so the retry
// does not duplicate records. Files are rotated only between batches,
// before the batch writes its first record to them: a rotated file holds
// committed batches only, which a failed batch never has to undo.
// Payloads the format cannot hold are returned as permanent per-message
// errors (dead-letter them).
func (s *Sink) Consume(_ context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("file sink: closed")
	}
	s.tick++
	failed := connector.MessageErrors{}
	touched := map[*outFile]int64{} // file → its size before this batch
	var order []*outFile
	path := ""
	if !s.tmpl.timeBased {
		path = s.tmpl.render(b, time.Time{})
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		rec, err := s.record(b.Schema, m.Payload)
		if err != nil {
			failed[i] = connector.Permanent(err)
			continue
		}
		if s.tmpl.timeBased {
			ts := m.Timestamp
			if ts.IsZero() || ts.Unix() == 0 {
				ts = s.now()
			}
			path = s.tmpl.render(b, ts)
		}
		of, err := s.file(path)
		if err != nil {
			return s.rollback(touched, err)
		}
		if _, ok := touched[of]; !ok {
			if s.dueForRotation(of, len(rec)) {
				if err := s.rotate(of); err != nil {
					s.drop(of, -1) // reopened (and repaired) on the next write
					return s.rollback(touched, err)
				}
			}
			touched[of] = of.size
			order = append(order, of)
		}
		if err := of.write(rec); err != nil {
			return s.rollback(touched, err)
		}
	}
	for _, of := range order {
		if err := of.commit(); err != nil {
			return s.rollback(touched, err)
		}
	}
	if len(failed) > 0 {
		return connector.Permanent(failed)
	}
	return nil
}

// record is one message as the format writes it.
func (s *Sink) record(schema connector.Schema, p []byte) ([]byte, error) {
	switch s.format {
	case FormatRaw:
		return p, nil
	case FormatLines:
		if bytes.IndexByte(p, '\n') >= 0 {
			return nil, errors.New("payload contains a newline; format = \"lines\" writes one payload per line (use ndjson or raw)")
		}
		return s.withNewline(p), nil
	}
	if schema != connector.SchemaJSON && schema != "" && !json.Valid(p) {
		return nil, errors.New("payload is not JSON; format = \"ndjson\" writes JSON documents (use lines or raw)")
	}
	if bytes.IndexByte(p, '\n') >= 0 || bytes.IndexByte(p, '\r') >= 0 {
		s.scratch.Reset()
		if err := json.Compact(&s.scratch, p); err != nil {
			return nil, fmt.Errorf("payload is not valid JSON: %w", err)
		}
		s.scratch.WriteByte('\n')
		return s.scratch.Bytes(), nil
	}
	return s.withNewline(p), nil
}

func (s *Sink) withNewline(p []byte) []byte {
	s.scratch.Reset()
	s.scratch.Write(p)
	s.scratch.WriteByte('\n')
	return s.scratch.Bytes()
}

func (s *Sink) dueForRotation(of *outFile, next int) bool {
	if of.size == 0 {
		return false
	}
	if s.rotateSize > 0 && of.size+int64(next) > s.rotateSize {
		return true
	}
	return s.rotateEvery > 0 && s.now().Sub(of.opened) >= s.rotateEvery
}

// rollback cuts every file this batch touched back to its size before
// the batch and returns err (the runtime retries the batch). A file that
// cannot be cut back is closed without flushing and cut back when it is
// reopened. Unless err is permanent, it is marked connector.Unavailable:
// a file that cannot be opened, written, synced or rotated (a full disk,
// a read-only or lost file system) is the destination's failure, not the
// messages', and none of them is dead-lettered for it.
func (s *Sink) rollback(touched map[*outFile]int64, err error) error {
	for of, size := range touched {
		if rerr := of.truncate(size); rerr != nil {
			s.log.Error("file sink: cannot undo a failed batch; the file is reopened and cut back on the next write",
				"path", of.path, "size", size, "error", rerr)
			s.drop(of, size)
		}
	}
	err = fmt.Errorf("file sink: %w", err)
	if connector.IsPermanent(err) {
		return err
	}
	return connector.Unavailable(err)
}

// drop closes a file without flushing what it buffered and forgets it;
// committed >= 0 is the size to cut it back to when it is reopened.
func (s *Sink) drop(of *outFile, committed int64) {
	of.abandon()
	if s.files[of.path] == of {
		delete(s.files, of.path)
	}
	if committed >= 0 {
		s.cutTo[of.path] = committed
	}
}

// Close closes the files (their data is already fsynced). It is
// idempotent.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, of := range s.files {
		errs = append(errs, of.close())
	}
	s.files = nil
	return errors.Join(errs...)
}

var _ connector.Sink = (*Sink)(nil)
