package file

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// clock is an injected sink clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestSink(t *testing.T, values map[string]any) (*Sink, *clock) {
	t.Helper()
	s, err := newSink(connector.Config{Key: "out", Plugin: connector.PluginConfig{Values: values, Source: "out.toml"}})
	require.NoError(t, err)
	c := &clock{t: time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)}
	s.now = c.now
	require.NoError(t, s.Open(context.Background()))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, c
}

func sinkBatch(schema connector.Schema, payloads ...string) *connector.SinkBatch {
	b := &connector.SinkBatch{Stream: "s", Topic: "t", Partition: 1, Schema: schema}
	for i, p := range payloads {
		b.Messages = append(b.Messages, connector.Message{Payload: []byte(p), Offset: uint64(i),
			Timestamp: time.Date(2025, 6, 1, 23, 59, 0, 0, time.UTC)})
	}
	return b
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestSinkFormats(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		format   string
		schema   connector.Schema
		payloads []string
		want     string
		bad      []int
	}{
		{"ndjson", connector.SchemaJSON, []string{`{"a":1}`, "{\n  \"b\": [1,\r\n 2]\n}"}, "{\"a\":1}\n{\"b\":[1,2]}\n", nil},
		{"ndjson", connector.SchemaText, []string{`"text that is JSON"`, "plain text"}, "\"text that is JSON\"\n", []int{1}},
		{"lines", connector.SchemaText, []string{"one", "two\nthree", "four\r"}, "one\nfour\r\n", []int{1}},
		{"raw", connector.SchemaRaw, []string{"\x00\x01", "ab", "\n"}, "\x00\x01ab\n", nil},
	} {
		dir := t.TempDir()
		s, _ := newTestSink(t, map[string]any{"path": filepath.Join(dir, "{stream}-{topic}-{partition}.out"), "format": tc.format})
		err := s.Consume(context.Background(), sinkBatch(tc.schema, tc.payloads...))
		if tc.bad == nil {
			require.NoError(t, err, "case %d", i)
		} else {
			require.True(t, connector.IsPermanent(err), "case %d: %v", i, err)
			var per connector.MessageErrors
			require.ErrorAs(t, err, &per, "case %d", i)
			var idx []int
			for k := range per {
				idx = append(idx, k)
			}
			require.Equal(t, tc.bad, idx, "case %d", i)
		}
		require.Equal(t, tc.want, readFile(t, filepath.Join(dir, "s-t-1.out")), "case %d", i)
	}
}

func TestSinkPathTemplate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, c := newTestSink(t, map[string]any{"path": filepath.Join(dir, "{key}", "{stream}", "{date}", "{hour}-{topic}.ndjson")})
	b := sinkBatch(connector.SchemaJSON, `1`, `2`)
	b.Stream, b.Topic = "../etc", "a/b"
	b.Messages[1].Timestamp = time.Date(2025, 6, 2, 0, 0, 1, 0, time.UTC)
	require.NoError(t, s.Consume(context.Background(), b))
	require.Equal(t, "1\n", readFile(t, filepath.Join(dir, "out", ".._etc", "2025-06-01", "23-a_b.ndjson")))
	require.Equal(t, "2\n", readFile(t, filepath.Join(dir, "out", ".._etc", "2025-06-02", "00-a_b.ndjson")))

	b = sinkBatch(connector.SchemaJSON, `3`)
	b.Stream, b.Messages[0].Timestamp = "..", time.Time{} // no broker time: the sink's clock
	require.NoError(t, s.Consume(context.Background(), b))
	require.Equal(t, "3\n", readFile(t, filepath.Join(dir, "out", "_", c.now().Format("2006-01-02"), "10-t.ndjson")))

	for i, bad := range []string{"{nope}.log", "{stream.log"} {
		_, err := newSink(connector.Config{Plugin: connector.PluginConfig{Values: map[string]any{"path": bad}}})
		require.Error(t, err, "case %d", i)
	}
	_, err := newSink(connector.Config{Plugin: connector.PluginConfig{Values: map[string]any{"path": "x", "format": "whole_file"}}})
	require.ErrorContains(t, err, `plugin_config.format: expected one of "ndjson", "lines", "raw", got "whole_file"`)
	_, err = newSink(connector.Config{Plugin: connector.PluginConfig{Values: map[string]any{}}})
	require.ErrorContains(t, err, "plugin_config.path: required key is missing; expected a string")
}

// listDir returns the names in dir, sorted, without hidden files.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func TestSinkRotatesBySize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, c := newTestSink(t, map[string]any{"path": filepath.Join(dir, "p{partition}.ndjson"), "rotate_size": int64(10)})
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaJSON, `"aa"`, `"bb"`, `"cc"`)))
	require.Equal(t, []string{"p1.ndjson"}, listDir(t, dir), "a batch is never split across files: it may pass rotate_size")
	c.advance(time.Second)
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaJSON, `"ddddddddddddd"`, `"e"`)))
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaJSON, `"f"`)))
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaJSON, `"g"`)))
	require.Equal(t, []string{"p1.20250601T100001Z.ndjson", "p1.20250601T100001Z_001.ndjson", "p1.ndjson"},
		listDir(t, dir), "rotated names sort in rotation order")
	require.Equal(t, "\"aa\"\n\"bb\"\n\"cc\"\n", readFile(t, filepath.Join(dir, "p1.20250601T100001Z.ndjson")))
	require.Equal(t, "\"ddddddddddddd\"\n\"e\"\n", readFile(t, filepath.Join(dir, "p1.20250601T100001Z_001.ndjson")))
	require.Equal(t, "\"f\"\n\"g\"\n", readFile(t, filepath.Join(dir, "p1.ndjson")), "8 bytes: room for another batch")
}

// allRecords reads every file under dir, rotated ones included.
func allRecords(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		out = append(out, strings.Fields(readFile(t, path))...)
		return nil
	}))
	sort.Strings(out)
	return out
}

// TestSinkRotationAndAFailedBatch is the reviewer's case: a batch that
// fills its file, then fails on another file, is retried; no record may
// end up twice (rotation in the middle of the batch used to commit and
// rename part of it).
func TestSinkRotationAndAFailedBatch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := newTestSink(t, map[string]any{"path": filepath.Join(dir, "{date}", "out.ndjson"), "rotate_size": int64(10)})
	day1, day2 := time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC), time.Date(2025, 6, 2, 8, 0, 0, 0, time.UTC)
	b := func(recs ...any) *connector.SinkBatch {
		out := &connector.SinkBatch{Stream: "s", Topic: "t", Partition: 1, Schema: connector.SchemaJSON}
		for i := 0; i < len(recs); i += 2 {
			out.Messages = append(out.Messages, connector.Message{Payload: []byte(recs[i].(string)), Timestamp: recs[i+1].(time.Time)})
		}
		return out
	}
	require.NoError(t, s.Consume(context.Background(), b(`"aa"`, day1)))
	// day 2's directory cannot be made: the batch fails after "bb" and
	// "cc" took day 1's file past rotate_size.
	blocker := filepath.Join(dir, "2025-06-02")
	write(t, blocker, "not a directory")
	batch := b(`"bb"`, day1, `"cc"`, day1, `"x"`, day2)
	require.Error(t, s.Consume(context.Background(), batch))
	require.Equal(t, []string{`"aa"`}, allRecords(t, filepath.Join(dir, "2025-06-01")), "the failed batch left nothing")
	require.NoError(t, os.Remove(blocker))
	require.NoError(t, s.Consume(context.Background(), batch))
	require.NoError(t, os.Remove(filepath.Join(dir, "2025-06-02", "out.ndjson")))
	require.Equal(t, []string{`"aa"`, `"bb"`, `"cc"`}, allRecords(t, dir), "each record once")
	// The next batch for day 1 rotates first.
	require.NoError(t, s.Consume(context.Background(), b(`"dd"`, day1)))
	require.Len(t, listDir(t, filepath.Join(dir, "2025-06-01")), 2)
	require.Equal(t, "\"dd\"\n", readFile(t, filepath.Join(dir, "2025-06-01", "out.ndjson")))
}

// TestSinkUndoesAFailedBatchOnReopen: when a failed batch cannot be cut
// back (truncate fails), its records already written are not flushed on
// close, and the file is cut back when it is reopened, so the retry does
// not duplicate them.
func TestSinkUndoesAFailedBatchOnReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "out.ndjson")
	s, _ := newTestSink(t, map[string]any{"path": path})
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaJSON, `"a"`)))
	of := s.files[path]
	committed := of.size
	// A batch in progress: one record reached the disk (a full buffer is
	// written out), one is still buffered.
	require.NoError(t, of.write([]byte("\"b\"\n")))
	require.NoError(t, of.w.Flush())
	require.NoError(t, of.write([]byte("\"c\"\n")))
	// The descriptor can no longer truncate (read-only), so the undo fails.
	ro, err := os.Open(path)
	require.NoError(t, err)
	rw := of.f
	of.f = ro
	s.mu.Lock()
	err = s.rollback(map[*outFile]int64{of: committed}, os.ErrInvalid)
	s.mu.Unlock()
	require.Error(t, err)
	require.NoError(t, rw.Close())
	require.NotContains(t, s.files, path, "the file is forgotten, to be reopened")
	require.Equal(t, "\"a\"\n\"b\"\n", readFile(t, path), "the buffered record was not flushed")
	// The retry reopens it: the failed batch's record is cut off first.
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaJSON, `"b"`, `"c"`)))
	require.Equal(t, "\"a\"\n\"b\"\n\"c\"\n", readFile(t, path))
	require.Empty(t, s.cutTo)
}

func TestSinkRotatesByTime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, c := newTestSink(t, map[string]any{"path": filepath.Join(dir, "out.log"), "format": "lines", "rotate_interval": "1h"})
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaText, "a")))
	c.advance(59 * time.Minute)
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaText, "b")))
	require.Equal(t, []string{"out.log"}, listDir(t, dir))
	c.advance(time.Minute)
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaText, "c")))
	require.Equal(t, []string{"out.20250601T110000Z.log", "out.log"}, listDir(t, dir))
	require.Equal(t, "a\nb\n", readFile(t, filepath.Join(dir, "out.20250601T110000Z.log")))
	require.Equal(t, "c\n", readFile(t, filepath.Join(dir, "out.log")))
	c.advance(30 * time.Minute)
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaText, "d")))
	require.Len(t, listDir(t, dir), 2, "the new file's hour counts from its creation")
}

func TestSinkRepairsAHalfWrittenRecordOnOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "out.ndjson")
	write(t, path, "{\"n\":1}\n{\"n\":2}\n{\"n\":")
	s, _ := newTestSink(t, map[string]any{"path": path})
	require.NoError(t, s.Consume(context.Background(), sinkBatch(connector.SchemaJSON, `{"n":3}`)))
	require.Equal(t, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n", readFile(t, path))

	// raw: the size record says what was committed.
	raw := filepath.Join(dir, "out.bin")
	rs, _ := newTestSink(t, map[string]any{"path": raw, "format": "raw"})
	require.NoError(t, rs.Consume(context.Background(), sinkBatch(connector.SchemaRaw, "abc", "def")))
	require.NoError(t, rs.Close(context.Background()))
	require.Equal(t, "00000000000000000006\n", readFile(t, sidecarPath(raw)))
	appendTo(t, raw, "half-written batch")
	rs2, _ := newTestSink(t, map[string]any{"path": raw, "format": "raw"})
	require.NoError(t, rs2.Consume(context.Background(), sinkBatch(connector.SchemaRaw, "ghi")))
	require.Equal(t, "abcdefghi", readFile(t, raw))
	require.Equal(t, "00000000000000000009\n", readFile(t, sidecarPath(raw)))
	require.NoError(t, rs2.Close(context.Background()))
	require.NoError(t, rs2.Close(context.Background()), "Close is idempotent")
	require.Error(t, rs2.Consume(context.Background(), sinkBatch(connector.SchemaRaw, "x")), "closed")
}

func TestSinkClosesLeastRecentlyUsedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := newTestSink(t, map[string]any{"path": filepath.Join(dir, "{topic}.ndjson"), "max_open_files": int64(2)})
	for _, topic := range []string{"a", "b", "c", "a"} {
		b := sinkBatch(connector.SchemaJSON, `"`+topic+`"`)
		b.Topic = topic
		require.NoError(t, s.Consume(context.Background(), b))
		require.LessOrEqual(t, len(s.files), 2)
	}
	require.Equal(t, "\"a\"\n\"a\"\n", readFile(t, filepath.Join(dir, "a.ndjson")))
}

func FuzzParseSidecar(f *testing.F) {
	f.Add(formatSidecar(42))
	f.Add([]byte("-0000000000000000001\n"))
	f.Add([]byte("99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseSidecar(b)
		if err == nil && (n < 0 || string(formatSidecar(n)) != string(b)) {
			t.Fatalf("parseSidecar(%q) = %d: does not round-trip", b, n)
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	good, _ := encodeState([]fileState{{Path: "/a", Dev: 1, Ino: 2, Offset: 30, FP: 7, FPLen: 30}})
	f.Add(good)
	f.Add([]byte(`{"v":1,"files":[{"offset":-1}]}`))
	f.Add([]byte(`{"v":1,"files":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := decodeState(b)
		if err != nil {
			return
		}
		for _, fs := range files {
			if fs.Offset < 0 || fs.FPLen < 0 || fs.FPLen > fingerprintLen || fs.Size < 0 {
				t.Fatalf("accepted an impossible file state %+v", fs)
			}
		}
	})
}
