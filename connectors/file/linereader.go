package file

import (
	"bytes"
	"errors"
	"io"
)

// lineReader splits a byte stream into "\n"-terminated lines. A line is
// returned only once its "\n" has been read, so a partial last line waits,
// buffered, until the file grows. A line longer than max bytes (without
// its "\n") is not kept in memory: it is skipped and reported as such.
type lineReader struct {
	r        io.Reader
	buf      []byte
	start    int   // first unconsumed byte of buf
	end      int   // end of the data in buf
	off      int64 // stream offset of buf[start]
	max      int
	skipping bool  // discarding an over-long line up to its "\n"
	skipFrom int64 // where that line started
}

// line is one line of the stream.
type line struct {
	// data is the line without its "\n" and a "\r" before it; nil when
	// tooLong. It aliases the reader's buffer until the next call.
	data []byte
	// start and end are the offsets of the line's first byte and of the
	// byte after its "\n".
	start, end int64
	tooLong    bool
}

const initialBuffer = 64 << 10

func newLineReader(r io.Reader, offset int64, max int) *lineReader {
	return &lineReader{r: r, off: offset, max: max, buf: make([]byte, min(initialBuffer, max+1))}
}

// reset points the reader at r, positioned at offset, dropping what it
// buffered.
func (lr *lineReader) reset(r io.Reader, offset int64) {
	lr.r, lr.off, lr.start, lr.end, lr.skipping = r, offset, 0, 0, false
}

// position is the stream offset just after the last byte read from r.
func (lr *lineReader) position() int64 { return lr.off + int64(lr.end-lr.start) }

// next returns the next complete line. ok is false when no complete line
// is buffered and r has no more bytes for now (io.EOF or a read of 0
// bytes); call again after the stream grew. Other read errors are
// returned.
func (lr *lineReader) next() (l line, ok bool, err error) {
	for {
		if i := bytes.IndexByte(lr.buf[lr.start:lr.end], '\n'); i >= 0 {
			start := lr.off
			raw := lr.buf[lr.start : lr.start+i]
			lr.start += i + 1
			lr.off += int64(i + 1)
			if lr.skipping {
				lr.skipping = false
				return line{start: lr.skipFrom, end: lr.off, tooLong: true}, true, nil
			}
			if len(raw) > lr.max {
				return line{start: start, end: lr.off, tooLong: true}, true, nil
			}
			if n := len(raw); n > 0 && raw[n-1] == '\r' {
				raw = raw[:n-1]
			}
			return line{data: raw, start: start, end: lr.off}, true, nil
		}
		pending := lr.end - lr.start
		switch {
		case lr.skipping:
			lr.off += int64(pending)
			lr.start, lr.end = 0, 0
		case pending > lr.max:
			lr.skipping, lr.skipFrom = true, lr.off
			lr.off += int64(pending)
			lr.start, lr.end = 0, 0
		case lr.start > 0:
			copy(lr.buf, lr.buf[lr.start:lr.end])
			lr.start, lr.end = 0, pending
		}
		if lr.end == len(lr.buf) {
			grown := make([]byte, min(2*len(lr.buf), lr.max+1))
			copy(grown, lr.buf[:lr.end])
			lr.buf = grown
		}
		n, err := lr.r.Read(lr.buf[lr.end:])
		lr.end += n
		if n == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				return line{}, false, nil
			}
			return line{}, false, err
		}
	}
}

// partial returns the buffered bytes of an unterminated last line (with
// its offsets), and consumes them; nil when there are none or the line is
// over-long (then it is reported as tooLong). Use it only when the stream
// is known to be complete.
func (lr *lineReader) partial() (line, bool) {
	if lr.skipping {
		lr.skipping = false
		lr.off += int64(lr.end - lr.start)
		lr.start, lr.end = 0, 0
		return line{start: lr.skipFrom, end: lr.off, tooLong: true}, true
	}
	if lr.end == lr.start {
		return line{}, false
	}
	raw := lr.buf[lr.start:lr.end]
	l := line{start: lr.off, end: lr.off + int64(len(raw))}
	lr.off, lr.start, lr.end = l.end, 0, 0
	if len(raw) > lr.max {
		l.tooLong = true
		return l, true
	}
	if n := len(raw); raw[n-1] == '\r' {
		raw = raw[:n-1]
	}
	l.data = raw
	return l, true
}
