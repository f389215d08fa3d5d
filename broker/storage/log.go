package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// DefaultSegmentSize is the segment size used when Options.SegmentSize is 0.
const DefaultSegmentSize = 1 << 30

// Options configure one partition log.
type Options struct {
	// SegmentSize rolls to a new segment once the active one holds this many
	// bytes of records (the file header is not counted); 0 = 1 GiB.
	SegmentSize uint64
	// Fsync fsyncs the segment file after every Append before it returns.
	// The index is synced when a segment is sealed, on Sync and on Close; it
	// is rebuilt from the log if it lags after a crash.
	Fsync bool
	// TruncateCorrupt makes OpenFile repair corruption inside a sealed
	// (older) segment by cutting the log at the first bad record and
	// deleting every later segment, instead of refusing to open with a
	// *CorruptError. Offsets after the cut are given out again. Default
	// false: a damaged sealed segment is an operator's decision.
	TruncateCorrupt bool
	// Logger receives a warning for every repair recovery makes (a torn
	// tail cut off, an index rebuilt). nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Log is one partition's log of batch records (the wire format of
// iggy/wire: 256-byte batch header + message frames), safe for concurrent
// use by one appender and many readers.
type Log interface {
	// Append stores one record the caller has already validated and stamped
	// (wire.BatchChecker.Validate + Stamp): its base_offset must equal
	// NextOffset() (else an error, nothing written). When Append returns nil
	// the record is in the log (and on disk if Options.Fsync).
	Append(record []byte) error
	// NextOffset is the offset the next message will get (0 for a new log);
	// it never goes backwards, also not across DropOldest.
	NextOffset() uint64
	// FirstOffset is the lowest offset still stored (== NextOffset() when empty).
	FirstOffset() uint64
	// Read appends to dst up to max messages starting at offset, as batch
	// records; the first and last record are sliced with
	// wire.AppendSlicedRecord when the range starts or ends inside one.
	// offset >= NextOffset() gives no messages; offset < FirstOffset()
	// starts at FirstOffset(). Returns the grown dst and the message count.
	Read(dst []byte, offset uint64, max uint32) ([]byte, uint32, error)
	// Span is the most bytes Read(dst, offset, max) would append now: the
	// lengths of the records it touches, so a reader can size dst once.
	Span(offset uint64, max uint32) int
	// OffsetAtTime returns the first offset of the first record whose
	// base_timestamp >= ts (µs), or false if there is none.
	OffsetAtTime(ts uint64) (uint64, bool)
	// Segments describes the segments, oldest first.
	Segments() []SegmentInfo
	// DropOldest removes up to n oldest segments and returns how many it
	// removed. If that reaches the active segment, the active one is removed
	// too and a new empty one starts at NextOffset() (offsets never reuse).
	DropOldest(n int) (int, error)
	// Purge removes every message and resets NextOffset to 0.
	Purge() error
	// Compact rewrites the sealed segments that hold superseded keyed
	// messages, keeping the latest message per key (see CompactOptions and
	// the package doc's "Compaction"). Offsets are kept: the removed ones
	// become gaps that Read skips.
	Compact(ctx context.Context, o CompactOptions) (CompactStats, error)
	// Sync flushes everything appended so far to stable storage.
	Sync() error
	// Close releases files; idempotent. Other methods after Close return ErrClosed.
	Close() error
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	BaseOffset, NextOffset        uint64 // [BaseOffset, NextOffset)
	SizeBytes                     uint64 // bytes of records, file header excluded
	Messages                      uint64 // stored; below NextOffset-BaseOffset once compacted
	FirstTimestamp, LastTimestamp uint64 // record base_timestamps, µs; 0 if empty
	Active                        bool
	Compacted                     bool // rewritten by Compact (format version 2)
}

var (
	// ErrClosed is returned by every method of a closed Log that returns an
	// error. Reopen the log to use it again.
	ErrClosed = errors.New("storage: log is closed")
	// ErrOffsetMismatch is returned by Append when the record's base_offset
	// is not NextOffset(); nothing was written. Stamp the record with
	// NextOffset() and append again.
	ErrOffsetMismatch = errors.New("storage: record base_offset is not the log's next offset")
	// ErrCorrupt is wrapped by every *CorruptError: bytes on disk that
	// recovery will not silently discard. See the package doc.
	ErrCorrupt = errors.New("storage: corrupt partition log")
	// ErrLocked is returned by OpenFile when another Log (in this or another
	// process) has the directory open.
	ErrLocked = errors.New("storage: partition directory is in use")
)

// CorruptError names a damaged file and the position of the first bad byte
// range. errors.Is(err, ErrCorrupt) matches it.
type CorruptError struct {
	Path string // the file
	Pos  int64  // byte position in the file where the damage starts
	Err  error  // what is wrong
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("storage: corrupt partition log: %s at byte %d: %v", e.Path, e.Pos, e.Err)
}

// Unwrap returns both ErrCorrupt and the cause.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorrupt, e.Err} }
