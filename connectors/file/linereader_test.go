package file

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// chunkReader returns data in pieces of the given sizes (cycled), then
// io.EOF; it models a file read while it grows.
type chunkReader struct {
	data   []byte
	sizes  []int
	i      int
	offset int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.offset >= len(c.data) {
		return 0, io.EOF
	}
	n := len(p)
	if len(c.sizes) > 0 {
		n = min(n, max(c.sizes[c.i%len(c.sizes)], 1))
		c.i++
	}
	n = copy(p, c.data[c.offset:min(c.offset+n, len(c.data))])
	c.offset += n
	return n, nil
}

type gotLine struct {
	data       string
	start, end int64
	tooLong    bool
}

func readAll(t *testing.T, lr *lineReader) []gotLine {
	t.Helper()
	var out []gotLine
	for {
		l, ok, err := lr.next()
		require.NoError(t, err)
		if !ok {
			return out
		}
		out = append(out, gotLine{string(l.data), l.start, l.end, l.tooLong})
	}
}

func TestLineReader(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		in      string
		max     int
		want    []gotLine
		partial string
	}{
		{"a\nbb\n", 10, []gotLine{{"a", 0, 2, false}, {"bb", 2, 5, false}}, ""},
		{"a\r\nb", 10, []gotLine{{"a", 0, 3, false}}, "b"},
		{"\n\n", 10, []gotLine{{"", 0, 1, false}, {"", 1, 2, false}}, ""},
		{"short\nthis is too long\nok\n", 5, []gotLine{{"short", 0, 6, false}, {"", 6, 23, true}, {"ok", 23, 26, false}}, ""},
		{"0123456789abcdef", 4, nil, ""}, // an over-long partial line is not kept
		{"", 3, nil, ""},
	} {
		lr := newLineReader(&chunkReader{data: []byte(tc.in), sizes: []int{3}}, 0, tc.max)
		require.Equal(t, tc.want, readAll(t, lr), "case %d: %q", i, tc.in)
		p, ok := lr.partial()
		if tc.partial == "" {
			require.True(t, !ok || p.tooLong, "case %d: no partial line", i)
		} else {
			require.True(t, ok, "case %d", i)
			require.Equal(t, tc.partial, string(p.data), "case %d", i)
		}
	}
}

func TestLineReaderWaitsForTheRestOfALine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	lr := newLineReader(&buf, 100, 64)
	buf.WriteString(`{"a":1}` + "\n" + `{"b":`)
	require.Equal(t, []gotLine{{`{"a":1}`, 100, 108, false}}, readAll(t, lr))
	require.Equal(t, int64(113), lr.position())
	buf.WriteString(`2}` + "\n")
	require.Equal(t, []gotLine{{`{"b":2}`, 108, 116, false}}, readAll(t, lr), "completed once its newline came")
}

// FuzzLineReader splits arbitrary bytes, read in arbitrary pieces, and
// checks the lines against a plain split: the same lines at the same
// offsets, over-long ones flagged, the unterminated tail held back.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nbb\r\nccc"), uint8(2), uint8(3))
	f.Add([]byte("\n\n\n"), uint8(0), uint8(1))
	f.Add([]byte(`{"k":"v"}`+"\n"+`{"k":`), uint8(7), uint8(4))
	f.Add(bytes.Repeat([]byte("x"), 300), uint8(1), uint8(255))
	f.Fuzz(func(t *testing.T, data []byte, maxLen, chunk uint8) {
		max := int(maxLen)%200 + 1
		lr := newLineReader(&chunkReader{data: data, sizes: []int{int(chunk)%17 + 1, int(chunk)%5 + 1}}, 7, max)
		got := readAll(t, lr)
		var want []gotLine
		off := int64(7)
		rest := data
		for {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			raw := rest[:i]
			l := gotLine{start: off, end: off + int64(i) + 1}
			if len(raw) > max {
				l.tooLong = true
			} else {
				l.data = string(bytes.TrimSuffix(raw, []byte("\r")))
			}
			want = append(want, l)
			off += int64(i) + 1
			rest = rest[i+1:]
		}
		require.Equal(t, want, got)
		p, ok := lr.partial()
		require.Equal(t, len(rest) > 0, ok)
		if ok {
			require.Equal(t, off, p.start)
			require.Equal(t, off+int64(len(rest)), p.end)
			require.Equal(t, len(rest) > max, p.tooLong)
			if !p.tooLong {
				require.Equal(t, string(bytes.TrimSuffix(rest, []byte("\r"))), string(p.data))
			}
		}
	})
}
