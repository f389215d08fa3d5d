package storage

import (
	"fmt"
	"io"
	"sync"
)

// NewMemory returns a Log that keeps its segments in memory. It behaves as
// the file log does (segments, rolling, DropOldest, Purge) but keeps no
// index file and loses everything on Close.
func NewMemory(opts Options) Log {
	opts = opts.withDefaults()
	l := newPartitionLog(opts, memBackend{}, nil)
	_, _ = l.activeFor(0) // cannot fail in memory
	return l
}

type memBackend struct{}

func (memBackend) create(base uint64) (*segment, error) {
	lb := &memBlob{}
	var h [fileHeaderSize]byte
	putFileHeader(h[:], logMagic, base)
	if _, err := lb.WriteAt(h[:], 0); err != nil {
		return nil, err
	}
	return newSegment(base, lb, nopBlob{}, fmt.Sprintf("memory segment %s", segmentName(base))), nil
}

func (memBackend) remove(s *segment) error { return s.closeFiles() }

func (memBackend) close() error { return nil }

// memBlob is an in-memory file kept in fixed-size chunks, so it grows
// without copying. Its lock lets the appender write while readers, holding
// the log's read lock, read earlier bytes.
type memBlob struct {
	mu     sync.RWMutex
	chunks [][]byte // each memChunk bytes; the last may be partly used
	size   int64
}

const memChunk = 1 << 20

func (b *memBlob) ReadAt(p []byte, off int64) (int, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if off < 0 {
		return 0, fmt.Errorf("memory file: negative offset %d", off)
	}
	n := 0
	for n < len(p) && off < b.size {
		c := b.chunks[off/memChunk][off%memChunk:]
		m := copy(p[n:], c[:min(int64(len(c)), b.size-off)])
		n += m
		off += int64(m)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (b *memBlob) WriteAt(p []byte, off int64) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if off < 0 || off > b.size {
		return 0, fmt.Errorf("memory file: write at %d past the end %d", off, b.size)
	}
	n := 0
	for n < len(p) {
		i := int(off / memChunk)
		if i == len(b.chunks) {
			b.chunks = append(b.chunks, make([]byte, memChunk))
		}
		m := copy(b.chunks[i][off%memChunk:], p[n:])
		n += m
		off += int64(m)
	}
	b.size = max(b.size, off)
	return n, nil
}

func (b *memBlob) Truncate(size int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if size < 0 || size > b.size {
		return fmt.Errorf("memory file: truncate to %d, size %d", size, b.size)
	}
	keep := int((size + memChunk - 1) / memChunk)
	clear(b.chunks[keep:])
	b.chunks = b.chunks[:keep]
	b.size = size
	return nil
}

func (b *memBlob) Sync() error { return nil }

func (b *memBlob) Close() error {
	b.mu.Lock()
	b.chunks, b.size = nil, 0
	b.mu.Unlock()
	return nil
}

// nopBlob is the index file of a memory segment: the index lives in the
// segment's entries only.
type nopBlob struct{}

func (nopBlob) ReadAt(p []byte, off int64) (int, error)  { return 0, io.EOF }
func (nopBlob) WriteAt(p []byte, off int64) (int, error) { return len(p), nil }
func (nopBlob) Truncate(int64) error                     { return nil }
func (nopBlob) Sync() error                              { return nil }
func (nopBlob) Close() error                             { return nil }
