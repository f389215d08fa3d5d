package file

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/zeebo/xxh3"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/backoff"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:      connector.KindSource,
		Name:      "file",
		Summary:   "reads files matching globs: NDJSON, lines or whole files; follows growing files",
		Spec:      SourceSpec,
		NewSource: NewSource,
	})
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "file",
		Summary: "appends messages to files (NDJSON, lines or raw) with a path template and rotation; fsynced before commit",
		Spec:    SinkSpec,
		NewSink: NewSink,
	})
}

// InvalidHeader marks a message that on_invalid = "raw" sent although it
// is not valid JSON; its value is "json".
const InvalidHeader = "ferry.invalid"

// PositionHeader is on every message of the source, first: where it
// starts, "<path> at byte <offset>" (a path too long for a header value's
// 255 bytes loses its beginning to "..."). It is the runtime's
// HeaderSourcePosition: the runtime does not send it on to the stream,
// and keeps it on the dead letter of a message that cannot be sent.
const PositionHeader = "ferry.source.position"

// fingerprintLen is how many first bytes of a file identify it with its
// inode.
const fingerprintLen = 1024

type sourceSettings struct {
	paths         []string
	format        string
	schema        connector.Schema
	follow        bool
	pollInterval  time.Duration
	startAtEnd    bool
	batchSize     int
	maxBatchBytes int
	maxMessage    int
	pathHeader    string
	onInvalid     string
}

// Source is the file source.
type Source struct {
	cfg   sourceSettings
	log   *slog.Logger
	now   func() time.Time
	paths connector.Paths // where the runtime lets connectors read
	// refused are matched paths that paths refuses, warned about once.
	refused map[string]bool

	files    map[ident]*tracked
	order    []*tracked // by path
	next     int        // round-robin start in order
	saved    map[ident]fileState
	fresh    bool // no saved state: start_at applies to the first scan
	scanned  bool
	lastScan time.Time
	closed   bool
	// skipped counts what on_invalid = "skip" (or "raw", for what is too
	// long to send) skipped, for the warnings.
	skipped uint64
	// stopped is set by on_invalid = "stop": Poll returns it from then on.
	stopped error
	last    batchSizes // of the last batch: the next is allocated for as much
}

// NewSource builds a file source from its configuration.
func NewSource(cfg connector.Config) (connector.Source, error) {
	return newSource(cfg)
}

func newSource(cfg connector.Config) (*Source, error) {
	set, err := SourceSpec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	s := sourceSettings{paths: set.Strings("paths"), format: set.String("format"), follow: set.Bool("follow"),
		pollInterval: set.Duration("poll_interval"), startAtEnd: set.String("start_at") == "end",
		batchSize: set.Int("batch_size"), maxBatchBytes: int(set.Size("max_batch_bytes")),
		maxMessage: int(set.Size("max_message_bytes")), pathHeader: set.String("path_header"),
		onInvalid: set.String("on_invalid"), schema: connector.Schema(set.String("schema"))}
	for i, g := range s.paths {
		if err := cfg.Paths.CheckPattern(g); err != nil {
			return nil, cfg.Plugin.Errorf(fmt.Sprintf("paths[%d]", i), "%v", err)
		}
	}
	if s.schema == "" {
		s.schema = map[string]connector.Schema{FormatNDJSON: connector.SchemaJSON, FormatLines: connector.SchemaText,
			FormatWholeFile: connector.SchemaRaw}[s.format]
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{cfg: s, log: log, now: time.Now, files: map[ident]*tracked{}, paths: cfg.Paths, refused: map[string]bool{}}, nil
}

// Open restores the files' offsets from state.
func (s *Source) Open(_ context.Context, state []byte) error {
	saved, err := decodeState(state)
	if err != nil {
		return err
	}
	s.saved, s.fresh = saved, state == nil
	return nil
}

// Poll returns the next lines (or files) with the state after them. In
// follow mode it waits for files to grow or appear; otherwise it returns
// ErrEndOfInput once every file it found at the start is read.
//
// With on_invalid = "stop", the batch before an invalid line is returned,
// and every Poll after it returns the error naming the line; the state
// never moves past it.
func (s *Source) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		if s.stopped != nil {
			return nil, s.stopped
		}
		if !s.scanned || (s.cfg.follow && s.now().Sub(s.lastScan) >= s.cfg.pollInterval) {
			s.scan()
		}
		b := s.newBatch()
		s.fill(b)
		s.last = b.sizes()
		b.ValidJSON = s.cfg.format == FormatNDJSON && !b.unchecked
		if s.stopped != nil && len(b.Messages) == 0 && !b.changed {
			return nil, s.stopped
		}
		if len(b.Messages) > 0 || b.changed {
			st, err := s.snapshot()
			if err != nil {
				return nil, err
			}
			b.State = st
			return &b.Batch, nil
		}
		if !s.cfg.follow && s.allDone() {
			return nil, connector.ErrEndOfInput
		}
		if err := backoff.Sleep(ctx, s.cfg.pollInterval); err != nil {
			return nil, err
		}
	}
}

// batch is a Batch being filled.
type batch struct {
	connector.Batch
	// arena holds the payloads: each is a slice of the chunk it was copied
	// to. A payload that does not fit starts a new chunk instead of growing
	// the old one, so no payload pins a copy that was outgrown.
	arena    []byte
	bytes    int    // payload bytes of the batch
	meta     []byte // PositionHeader values are slices of it
	headers  []connector.Header
	posKey   connector.HeaderKey
	max      int
	maxBytes int
	changed  bool // offsets moved without messages (skipped lines, resets)
	// unchecked: a line that is not valid JSON went out as it is
	// (on_invalid = "raw"), so the batch is not ValidJSON.
	unchecked bool
}

// batchSizes is what a batch held: the next one is allocated for as much.
type batchSizes struct{ messages, bytes, meta, headers int }

// minChunk is the smallest arena chunk.
const minChunk = 64 << 10

// newBatch is an empty batch with room for what the last one held.
func (s *Source) newBatch() *batch {
	b := &batch{Batch: connector.Batch{Schema: s.cfg.schema}, max: s.cfg.batchSize, maxBytes: s.cfg.maxBatchBytes}
	l := s.last
	if l.messages > 0 {
		b.Messages = make([]connector.Message, 0, min(l.messages+l.messages/8+1, s.cfg.batchSize))
		b.headers = make([]connector.Header, 0, l.headers+l.headers/8+1)
		b.meta = make([]byte, 0, l.meta+l.meta/8+64)
	}
	b.arena = make([]byte, 0, max(minChunk, min(l.bytes+l.bytes/8, s.cfg.maxBatchBytes+s.cfg.maxMessage)))
	return b
}

func (b *batch) sizes() batchSizes {
	return batchSizes{messages: len(b.Messages), bytes: b.bytes, meta: len(b.meta), headers: len(b.headers)}
}

func (b *batch) full() bool { return len(b.Messages) >= b.max || b.bytes >= b.maxBytes }

// copyPayload copies p into the arena.
func (b *batch) copyPayload(p []byte) []byte {
	if cap(b.arena)-len(b.arena) < len(p) {
		b.arena = make([]byte, 0, max(minChunk, len(p), cap(b.arena)/2))
	}
	start := len(b.arena)
	b.arena = append(b.arena, p...)
	b.bytes += len(p)
	return b.arena[start:len(b.arena):len(b.arena)]
}

// add appends a message with a copy of payload, found at offset in the
// file id at path, with the PositionHeader and, when pathHeader is set, a
// header naming the file; extra headers follow. Its id is recordID's.
func (b *batch) add(payload []byte, pathHeader, path string, id ident, offset int64, extra ...connector.Header) {
	m := connector.Message{ID: recordID(id, offset, payload), Payload: b.copyPayload(payload)}
	if b.posKey.Data == nil {
		b.posKey = header.StringKey(PositionHeader)
	}
	h := len(b.headers)
	b.headers = append(b.headers, connector.Header{Key: b.posKey, Value: b.position(path, offset)})
	if pathHeader != "" {
		b.headers = append(b.headers, connector.StringHeader(pathHeader, path))
	}
	b.headers = append(b.headers, extra...)
	m.Headers = b.headers[h:len(b.headers):len(b.headers)]
	b.Messages = append(b.Messages, m)
}

// recordID is a message's id: the XXH3-128 of the file's identity (device
// and inode), the record's offset and its bytes. A record read again
// after a crash (the state saved before it) gets the same id, so Iggy-side
// or sink-side deduplication by id removes the repeat end to end; a file
// that reuses an inode has other bytes at the same offsets, except for a
// record identical to the old one at the same place, which deduplication
// then takes for a repeat.
func recordID(id ident, offset int64, payload []byte) [16]byte {
	var pre [24]byte
	binary.LittleEndian.PutUint64(pre[0:], id.Dev)
	binary.LittleEndian.PutUint64(pre[8:], id.Ino)
	binary.LittleEndian.PutUint64(pre[16:], uint64(offset))
	h := xxh3.New()
	_, _ = h.Write(pre[:])
	_, _ = h.Write(payload)
	return h.Sum128().Bytes()
}

// position is the PositionHeader value of offset in path.
func (b *batch) position(path string, offset int64) connector.HeaderValue {
	const sep, cut = " at byte ", "..."
	var num [20]byte
	n := strconv.AppendInt(num[:0], offset, 10)
	start := len(b.meta)
	if over := len(path) + len(sep) + len(n) - 255; over > 0 {
		i := min(over+len(cut), len(path))
		for i < len(path) && !utf8.RuneStart(path[i]) {
			i++
		}
		b.meta, path = append(b.meta, cut...), path[i:]
	}
	b.meta = append(append(append(b.meta, path...), sep...), n...)
	return connector.HeaderValue{Kind: header.KindString, Data: b.meta[start:len(b.meta):len(b.meta)]}
}

// fill reads from the files in turn, starting after the one that went
// first last time, until the batch is full or nothing is left for now.
func (s *Source) fill(b *batch) {
	n := len(s.order)
	for i := 0; i < n && !b.full() && s.stopped == nil; i++ {
		t := s.order[(s.next+i)%n]
		if t.dropped {
			continue
		}
		if s.cfg.format == FormatWholeFile {
			s.readWhole(t, b)
		} else {
			s.readLines(t, b)
		}
	}
	if n > 0 {
		s.next = (s.next + 1) % n
	}
	if s.pruneDropped() {
		b.changed = true
	}
}

func (s *Source) allDone() bool {
	for _, t := range s.order {
		if !t.dropped && !t.eof {
			return false
		}
	}
	return true
}

// Close closes the open files. It is idempotent.
func (s *Source) Close(context.Context) error {
	if s.closed {
		return nil
	}
	s.closed = true
	for _, t := range s.files {
		t.close()
	}
	return nil
}

var _ connector.Source = (*Source)(nil)
