package state

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkFileSave measures one durable Save (temp file, write, fsync,
// rename, directory fsync): the state cost the runtime pays per
// acknowledged source batch.
func BenchmarkFileSave(b *testing.B) {
	for _, size := range []int{64, 4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			s, err := OpenFile(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			data := make([]byte, size)
			var v Version
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if v, err = s.Save(ctx, "bench", data, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFileLoad measures reading and verifying a state file.
func BenchmarkFileLoad(b *testing.B) {
	s, err := OpenFile(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Save(ctx, "bench", make([]byte, 4<<10), ""); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Load(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
