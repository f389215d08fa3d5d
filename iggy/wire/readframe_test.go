package wire

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// bigFrame is a reply frame of n body bytes.
func bigFrame(n int) []byte {
	h := RequestHeader{Size: uint32(HeaderSize + n), Client: U128{1, 0}, Operation: OpNonReplicated, Command: CmdPing}
	b := make([]byte, HeaderSize)
	h.Put(b)
	return append(b, bytes.Repeat([]byte{7}, n)...)
}

// ReadFrameSized reads a frame larger than readChunk with one allocation
// (ReadFrame grows by doubling and copies), and both read the same bytes.
func TestReadFrameSized(t *testing.T) {
	frame := bigFrame(3*readChunk + 5)
	got, err := ReadFrameSized(bytes.NewReader(frame), nil, 0)
	require.NoError(t, err)
	require.Equal(t, frame, got)
	require.Equal(t, len(frame), cap(got), "exactly the frame's size")
	grown, err := ReadFrame(bytes.NewReader(frame), nil, 0)
	require.NoError(t, err)
	require.Equal(t, got, grown)

	r := bytes.NewReader(frame)
	scratch := make([]byte, 0, HeaderSize)
	allocs := testing.AllocsPerRun(5, func() {
		r.Reset(frame)
		if _, err := ReadFrameFresh(r, scratch, 0); err != nil {
			t.Fatal(err)
		}
	})
	require.Equal(t, 1.0, allocs, "one buffer of the frame's size")
	fresh, err := ReadFrameFresh(bytes.NewReader(frame), scratch, 0)
	require.NoError(t, err)
	require.Equal(t, frame, fresh)
	require.Equal(t, len(frame), cap(fresh))

	// A buffer large enough is reused.
	buf := make([]byte, 0, len(frame))
	got, err = ReadFrameSized(bytes.NewReader(frame), buf, 0)
	require.NoError(t, err)
	require.Equal(t, &buf[:1][0], &got[0])

	// The limit still holds.
	_, err = ReadFrameSized(bytes.NewReader(frame), nil, readChunk)
	require.ErrorIs(t, err, ErrFrameTooLarge)
}

// BenchmarkReadFrame reads a 1.5 MiB reply (a poll of ~1,500 messages of
// 1 KB) into a fresh buffer, as a client does for a poll whose messages
// keep it: growing with the bytes (ReadFrame) or sized at once
// (ReadFrameFresh).
//
//	go test -run '^$' -bench ReadFrame ./iggy/wire/
func BenchmarkReadFrame(b *testing.B) {
	frame := bigFrame(3 * readChunk / 2)
	scratch := make([]byte, 0, HeaderSize)
	for _, c := range []struct {
		name string
		read func(*bytes.Reader) error
	}{
		{"grow", func(r *bytes.Reader) error { _, err := ReadFrame(r, nil, 0); return err }},
		{"fresh", func(r *bytes.Reader) error { _, err := ReadFrameFresh(r, scratch, 0); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := bytes.NewReader(frame)
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				r.Reset(frame)
				if err := c.read(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
