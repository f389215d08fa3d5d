package storage

import (
	"fmt"
	"testing"

	"github.com/ferryhq/ferry/iggy/wire"
)

// Benchmarks use records of 1000 messages, as a batching producer sends
// them, with 100-byte and 1 KiB payloads. MB/s counts record bytes.

const benchMsgs = 1000

// benchRecord returns a validated record and the checker that validated
// it, so Stamp can give it a new base offset each time it is appended.
func benchRecord(b *testing.B, size int) ([]byte, *wire.BatchChecker) {
	msgs := make([]wire.Message, benchMsgs)
	for i := range msgs {
		msgs[i].OriginTimestamp = 1_700_000_000_000_000 + uint64(i)
		msgs[i].Payload = payloadFor(uint64(i), size)
	}
	rec, err := wire.AppendBatch(nil, msgs)
	if err != nil {
		b.Fatal(err)
	}
	c := new(wire.BatchChecker)
	if _, err := c.Validate(rec); err != nil {
		b.Fatal(err)
	}
	return rec, c
}

func benchLog(b *testing.B, kind string, opts Options) Log {
	if kind == "memory" {
		return NewMemory(opts)
	}
	l, err := OpenFile(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func BenchmarkAppend(b *testing.B) {
	cases := []struct {
		kind  string
		fsync bool
	}{{"file", false}, {"file", true}, {"memory", false}}
	for _, size := range []int{100, 1024} {
		for _, c := range cases {
			b.Run(fmt.Sprintf("payload=%d/%s/fsync=%t", size, c.kind, c.fsync), func(b *testing.B) {
				rec, ck := benchRecord(b, size)
				// 256 MiB segments: rolling is part of the cost, and the
				// memory log frees what it drops.
				l := benchLog(b, c.kind, Options{SegmentSize: 256 << 20, Fsync: c.fsync})
				defer l.Close()
				b.SetBytes(int64(len(rec)))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					ck.Stamp(rec, 1, l.NextOffset(), 1)
					if err := l.Append(rec); err != nil {
						b.Fatal(err)
					}
					if i++; c.kind == "memory" && i%512 == 0 {
						if _, err := l.DropOldest(1); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkRead reads records from a log of 64 records (in the page cache
// for the file log): whole records, and ranges that start and end inside
// records (two slices per read).
func BenchmarkRead(b *testing.B) {
	const records = 64
	for _, size := range []int{100, 1024} {
		for _, kind := range kinds {
			for _, sliced := range []bool{false, true} {
				b.Run(fmt.Sprintf("payload=%d/%s/sliced=%t", size, kind, sliced), func(b *testing.B) {
					rec, ck := benchRecord(b, size)
					l := benchLog(b, kind, Options{})
					defer l.Close()
					for range records {
						ck.Stamp(rec, 1, l.NextOffset(), 1)
						if err := l.Append(rec); err != nil {
							b.Fatal(err)
						}
					}
					var dst []byte
					skip := uint64(0)
					if sliced {
						skip = benchMsgs / 2
					}
					b.SetBytes(int64(len(rec)))
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						off := uint64(i%(records-1))*benchMsgs + skip
						var n uint32
						var err error
						dst, n, err = l.Read(dst[:0], off, benchMsgs)
						if err != nil || n != benchMsgs {
							b.Fatal(n, err)
						}
						i++
					}
				})
			}
		}
	}
}
