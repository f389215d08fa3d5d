package storage

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// keyedMsg is one message of a compaction workload: key "" is keyless.
type keyedMsg struct {
	key     string
	deleted bool
}

// workload makes n messages over keys keys: about 5% deletion markers and
// 1% keyless messages, from a seeded generator.
func workload(n, keys int, seed uint64) []keyedMsg {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]keyedMsg, n)
	for i := range out {
		switch x := r.IntN(100); {
		case x == 0:
			out[i] = keyedMsg{}
		default:
			out[i] = keyedMsg{key: fmt.Sprintf("k%05d", r.IntN(keys)), deleted: x < 6}
		}
	}
	return out
}

// compactPayload is the payload of the message at off: its offset.
func compactPayload(off uint64) []byte { return binary.LittleEndian.AppendUint64(nil, off) }

// appendWorkload appends ms from the log's next offset, batch messages per
// record, with base_timestamp tsFor(base).
func appendWorkload(tb testing.TB, l Log, ms []keyedMsg, batch int) {
	tb.Helper()
	var c wire.BatchChecker
	wm := make([]wire.Message, 0, batch)
	var b []byte
	for at := 0; at < len(ms); at += batch {
		base := l.NextOffset()
		wm = wm[:0]
		for i, m := range ms[at:min(at+batch, len(ms))] {
			w := wire.Message{OriginTimestamp: tsFor(base) + uint64(i), Payload: compactPayload(base + uint64(i))}
			w.ID[0] = byte(i + 1)
			if m.key != "" {
				hs := []wire.Entry{wire.Header("other", wire.StringValue("x")), wire.Header(iggy.KeyHeader, wire.StringValue(m.key))}
				if m.deleted {
					hs = append(hs, wire.Header(iggy.DeletedHeader, wire.BoolValue(true)))
				}
				w.Headers = wire.AppendTLV(nil, hs)
			}
			wm = append(wm, w)
		}
		var err error
		b, err = wire.AppendBatch(b[:0], wm)
		require.NoError(tb, err)
		_, err = c.Validate(b)
		require.NoError(tb, err)
		c.Stamp(b, testPartition, base, tsFor(base))
		require.NoError(tb, l.Append(b))
	}
}

// survivors is the reference: the offsets a complete compaction keeps
// (from offset first, the log's first offset), given which deletion
// markers expired (all when expired is true, none otherwise) and that the
// last active messages from activeFrom are never compacted.
func survivors(ms []keyedMsg, first uint64, activeFrom uint64, expired bool) []uint64 {
	last := map[string]uint64{}
	for i, m := range ms {
		if m.key != "" {
			last[m.key] = first + uint64(i)
		}
	}
	var out []uint64
	for i, m := range ms {
		off := first + uint64(i)
		switch {
		case off >= activeFrom, m.key == "":
			out = append(out, off)
		case last[m.key] == off && !(m.deleted && expired):
			out = append(out, off)
		}
	}
	return out
}

// readAllOffsets reads the whole log in polls of up to 1000 messages the
// way a consumer does (from the last offset + 1), checking every record
// validates and every payload is its offset.
func readAllOffsets(tb testing.TB, l Log) []uint64 {
	tb.Helper()
	var out []uint64
	var c wire.BatchChecker
	var msgs []wire.Message
	for next := uint64(0); next < l.NextOffset(); {
		b, n, err := l.Read(nil, next, 1000)
		require.NoError(tb, err)
		if n == 0 {
			break
		}
		msgs = msgs[:0]
		for len(b) > 0 {
			h, err := wire.DecodeBatchHeader(b)
			require.NoError(tb, err)
			_, err = c.Validate(b[:h.Length])
			require.NoError(tb, err, "record at %d", h.BaseOffset)
			require.Equal(tb, tsFor(h.BaseOffset-h.BaseOffset%uint64(testBatch)), h.BaseTimestamp, "record at %d keeps its append time", h.BaseOffset)
			msgs, err = wire.AppendRecordMessages(msgs, b[:h.Length])
			require.NoError(tb, err)
			b = b[h.Length:]
		}
		require.Len(tb, msgs, int(n))
		for _, m := range msgs {
			if string(m.Payload) != string(compactPayload(m.Offset)) {
				require.Equal(tb, compactPayload(m.Offset), m.Payload, "payload at %d", m.Offset)
			}
			if len(out) > 0 && m.Offset <= out[len(out)-1] {
				tb.Fatalf("offset %d after %d: offsets must ascend", m.Offset, out[len(out)-1])
			}
			out = append(out, m.Offset)
		}
		next = out[len(out)-1] + 1
	}
	return out
}

// testBatch is the messages per record the compaction tests append.
const testBatch = 10

func openCompactLog(tb testing.TB, kind, dir string, seg uint64) Log {
	tb.Helper()
	opts := Options{SegmentSize: seg}
	if kind == "memory" {
		return NewMemory(opts)
	}
	l, err := OpenFile(dir, opts)
	require.NoError(tb, err)
	return l
}

func activeBase(l Log) uint64 {
	segs := l.Segments()
	return segs[len(segs)-1].BaseOffset
}

// TestCompactReference compacts 1M messages over 10,000 keys (100k under
// -short or -race, to stay quick) and checks the log against the
// reference, before and after deletion markers expire, and after reopening.
func TestCompactReference(t *testing.T) {
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			l := openCompactLog(t, kind, dir, 256<<10)
			defer func() { require.NoError(t, l.Close()) }()
			ms := workload(n, 10_000, 17)
			appendWorkload(t, l, ms, testBatch)
			active := activeBase(l)
			ctx := context.Background()
			now := time.UnixMicro(int64(tsFor(uint64(n))))
			st, err := l.Compact(ctx, CompactOptions{TombstoneRetention: time.Hour, Now: now})
			require.NoError(t, err)
			require.NotEmpty(t, st.Segments)
			distinct := map[string]bool{}
			for _, m := range ms {
				if m.key != "" {
					distinct[m.key] = true
				}
			}
			require.Equal(t, len(distinct), st.Keys)
			require.Equal(t, survivors(ms, 0, active, false), readAllOffsets(t, l), "markers kept within retention")
			var before, after uint64
			for _, s := range st.Segments {
				before, after = before+s.BytesBefore, after+s.BytesAfter
			}
			require.Less(t, after, before/3, "compaction shrinks the data (each run of survivors costs a 256-byte record header)")

			st, err = l.Compact(ctx, CompactOptions{TombstoneRetention: time.Hour, Now: now})
			require.NoError(t, err)
			require.True(t, st.Skipped, "nothing changed")

			later := now.Add(2 * time.Hour)
			st, err = l.Compact(ctx, CompactOptions{TombstoneRetention: time.Hour, Now: later})
			require.NoError(t, err)
			var removed uint64
			for _, s := range st.Segments {
				removed += s.TombstonesRemoved
			}
			require.NotZero(t, removed)
			want := survivors(ms, 0, active, true)
			require.Equal(t, want, readAllOffsets(t, l), "expired markers removed")
			require.Equal(t, want[0], l.FirstOffset())
			require.EqualValues(t, n, l.NextOffset())
			if kind == "file" {
				require.NoError(t, l.Close())
				l = openCompactLog(t, kind, dir, 256<<10)
				require.Equal(t, want, readAllOffsets(t, l), "after reopening")
			}
			// Appends go on at the same offsets, and a new value of a key
			// supersedes its compacted one.
			more := []keyedMsg{{key: "k00001"}, {key: "k00002", deleted: true}}
			appendWorkload(t, l, more, testBatch)
			require.EqualValues(t, n+2, l.NextOffset())
		})
	}
}

// TestCompactReadsAcrossGaps reads from every offset of a compacted log
// and checks it starts at the next survivor; OffsetAtTime and Segments
// agree with the gaps.
func TestCompactReadsAcrossGaps(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			l := openCompactLog(t, kind, t.TempDir(), 4<<10)
			defer func() { require.NoError(t, l.Close()) }()
			ms := workload(3000, 50, 3)
			appendWorkload(t, l, ms, testBatch)
			_, err := l.Compact(context.Background(), CompactOptions{Now: time.UnixMicro(int64(tsFor(1 << 40)))})
			require.NoError(t, err)
			all := readAllOffsets(t, l)
			require.Equal(t, survivors(ms, 0, activeBase(l), true), all)
			for off := uint64(0); off < l.NextOffset(); off++ {
				i, _ := slices.BinarySearch(all, off)
				b, n, err := l.Read(nil, off, 3)
				require.NoError(t, err)
				msgs, err := wire.AppendRecordMessages(nil, b)
				require.NoError(t, err)
				if i == len(all) {
					require.Zero(t, n)
					continue
				}
				require.NotZero(t, n, "offset %d", off)
				require.Equal(t, all[i], msgs[0].Offset, "a read at %d starts at the next survivor", off)
			}
			for _, s := range l.Segments() {
				require.LessOrEqual(t, s.Messages, s.NextOffset-s.BaseOffset)
				if s.Compacted {
					require.False(t, s.Active)
				}
			}
			off, ok := l.OffsetAtTime(0)
			require.True(t, ok)
			require.Equal(t, all[0], off)
			require.Equal(t, all[0], l.FirstOffset())
		})
	}
}

// TestCompactRecoveryLeftovers: staged files of a compaction that never
// switched are deleted on open, and a new log with its old index (a crash
// between the renames) gets its index rebuilt.
func TestCompactRecoveryLeftovers(t *testing.T) {
	dir := t.TempDir()
	l := openCompactLog(t, "file", dir, 4<<10)
	ms := workload(2000, 20, 5)
	appendWorkload(t, l, ms, testBatch)
	seg0 := filepath.Join(dir, segmentName(0))
	oldIndex, err := os.ReadFile(seg0 + indexExt)
	require.NoError(t, err)
	_, err = l.Compact(context.Background(), CompactOptions{Now: time.UnixMicro(int64(tsFor(1 << 40)))})
	require.NoError(t, err)
	want := readAllOffsets(t, l)
	require.NoError(t, l.Close())

	require.NoError(t, os.WriteFile(seg0+indexExt, oldIndex, 0o644))
	require.NoError(t, os.WriteFile(seg0+compactExt, []byte("half a compaction"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, segmentName(4096)+compactIndexExt), nil, 0o644))
	l = openCompactLog(t, "file", dir, 4<<10)
	defer func() { require.NoError(t, l.Close()) }()
	require.Equal(t, want, readAllOffsets(t, l))
	for _, name := range []string{seg0 + compactExt, filepath.Join(dir, segmentName(4096)+compactIndexExt)} {
		_, err := os.Stat(name)
		require.ErrorIs(t, err, os.ErrNotExist, "%s removed", name)
	}
	idx, err := os.ReadFile(seg0 + indexExt)
	require.NoError(t, err)
	fh, _, err := checkFileHeader(idx, indexMagic, 0)
	require.NoError(t, err)
	require.Equal(t, uint32(compactedVersion), fh.version, "the index was rebuilt for the compacted log")
}

// TestCompactConcurrentAppendsAndReads compacts while an appender and
// readers run (run with -race): readers only ever see whole, valid records
// in offset order, and the appended messages are all there.
func TestCompactConcurrentAppendsAndReads(t *testing.T) {
	l := openCompactLog(t, "file", t.TempDir(), 8<<10)
	defer func() { require.NoError(t, l.Close()) }()
	ms := workload(10_000, 100, 9)
	appendWorkload(t, l, ms[:3000], testBatch)
	done := make(chan struct{})
	errs := make(chan error, 2)
	go func() {
		defer close(done)
		for at := 3000; at < len(ms); at += 1000 {
			appendWorkload(t, l, ms[at:at+1000], testBatch)
		}
	}()
	go func() {
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			b, _, err := l.Read(nil, 0, 500)
			if err == nil {
				_, err = wire.AppendRecordMessages(nil, b)
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	for i := 0; ; i++ {
		_, err := l.Compact(context.Background(), CompactOptions{Now: time.UnixMicro(int64(tsFor(1 << 40)))})
		require.NoError(t, err)
		select {
		case <-done:
		default:
			continue
		}
		break
	}
	require.NoError(t, <-errs)
	_, err := l.Compact(context.Background(), CompactOptions{Now: time.UnixMicro(int64(tsFor(1 << 40)))})
	require.NoError(t, err)
	require.Equal(t, survivors(ms, 0, activeBase(l), true), readAllOffsets(t, l))
}

func TestKeyOf(t *testing.T) {
	require.Equal(t, iggy.KeyHeader, keyHeader)
	require.Equal(t, iggy.DeletedHeader, deletedHeader)
	enc := func(hs ...wire.Entry) []byte { return wire.AppendTLV(nil, hs) }
	for _, tc := range []struct {
		name           string
		b              []byte
		key            string
		keyed, deleted bool
	}{
		{"none", nil, "", false, false},
		{"string", enc(wire.Header("key", wire.StringValue("a"))), "a", true, false},
		{"raw", enc(wire.Header("key", wire.RawValue([]byte{0, 1}))), "\x00\x01", true, false},
		{"int key is no key", enc(wire.Header("key", wire.Int64Value(3))), "", false, false},
		{"deleted", enc(wire.Header("deleted", wire.BoolValue(true)), wire.Header("key", wire.StringValue("a"))), "a", true, true},
		{"deleted false", enc(wire.Header("key", wire.StringValue("a")), wire.Header("deleted", wire.BoolValue(false))), "a", true, false},
		{"marker without key", enc(wire.Header("deleted", wire.BoolValue(true))), "", false, false},
		{"first wins", enc(wire.Header("key", wire.StringValue("a")), wire.Header("key", wire.StringValue("b"))), "a", true, false},
	} {
		k, keyed, deleted, err := KeyOf(tc.b)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.key, string(k), tc.name)
		require.Equal(t, tc.keyed, keyed, tc.name)
		require.Equal(t, tc.deleted, deleted, tc.name)
	}
	_, keyed, _, err := KeyOf([]byte{3, 9, 0, 0, 0, 'k'})
	require.ErrorContains(t, err, "user headers do not decode")
	require.False(t, keyed)
}

// FuzzKeyOf checks KeyOf against wire.ParseTLV and header lookup.
func FuzzKeyOf(f *testing.F) {
	f.Add([]byte(nil))
	f.Add(wire.AppendTLV(nil, []wire.Entry{wire.Header("key", wire.StringValue("a")), wire.Header("deleted", wire.BoolValue(true))}))
	f.Add(wire.AppendTLV(nil, []wire.Entry{wire.Header("key", wire.RawValue([]byte{9}))}))
	f.Add([]byte{3, 3, 0, 0, 0, 'k', 'e', 'y'})
	f.Fuzz(func(t *testing.T, b []byte) {
		key, keyed, deleted, err := KeyOf(b)
		entries, perr := wire.ParseTLV(b)
		if (err == nil) != (perr == nil) {
			t.Fatalf("KeyOf error %v, ParseTLV error %v", err, perr)
		}
		if err != nil {
			return
		}
		v, ok := wire.Lookup(entries, "key")
		wantKeyed := ok && (v.Kind == wire.KindString || v.Kind == wire.KindRaw)
		if keyed != wantKeyed || (keyed && string(key) != string(v.Data)) {
			t.Fatalf("key %q %v, lookup %v %v", key, keyed, v, ok)
		}
		d, ok := wire.Lookup(entries, "deleted")
		if want := wantKeyed && ok && d.Bool(); deleted != want {
			t.Fatalf("deleted %v, want %v", deleted, want)
		}
	})
}
