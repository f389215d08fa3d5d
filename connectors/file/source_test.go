package file

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

func newTestSource(t *testing.T, values map[string]any, state []byte) *Source {
	t.Helper()
	s, err := newSource(connector.Config{Key: "src", Plugin: connector.PluginConfig{Values: values, Source: "src.toml"}})
	require.NoError(t, err)
	require.NoError(t, s.Open(context.Background(), state))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// collect polls until it has n messages (or the source ends), returning
// the payloads and the state of the last batch. The deadline is a
// liveness bound, not a timing assertion.
func collect(t *testing.T, s *Source, n int) ([]string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	var state []byte
	for len(got) < n {
		b, err := s.Poll(ctx)
		if errors.Is(err, connector.ErrEndOfInput) {
			break
		}
		require.NoError(t, err, "after %d of %d messages: %v", len(got), n, got)
		for _, m := range b.Messages {
			got = append(got, string(m.Payload))
		}
		if b.State != nil {
			state = b.State
		}
	}
	return got, state
}

// quiet checks that Poll has nothing to give for a while (several poll
// intervals): the absence of a message, not a speed.
func quiet(t *testing.T, s *Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*s.cfg.pollInterval)
	defer cancel()
	for {
		b, err := s.Poll(ctx)
		if err != nil {
			require.ErrorIs(t, err, context.DeadlineExceeded)
			return
		}
		require.Empty(t, b.Messages, "nothing should be sent yet")
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(s), 0o644))
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestSourceFormats(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.ndjson"), "{\"n\":1}\n\n  {\"n\": 2}  \nnot json\n{\"n\":3}")
	write(t, filepath.Join(dir, "b.txt"), "one\r\n\ntwo\nthree")
	write(t, filepath.Join(dir, "c.bin"), "\x00whole\nfile")
	for i, tc := range []struct {
		values map[string]any
		want   []string
		schema connector.Schema
	}{
		{map[string]any{"paths": []any{filepath.Join(dir, "*.ndjson")}}, []string{`{"n":1}`, `{"n": 2}`, `{"n":3}`}, connector.SchemaJSON},
		{map[string]any{"paths": []any{filepath.Join(dir, "b.txt")}, "format": "lines"}, []string{"one", "two", "three"}, connector.SchemaText},
		{map[string]any{"paths": []any{filepath.Join(dir, "c.bin"), filepath.Join(dir, "b.txt")}, "format": "whole_file"},
			[]string{"one\r\n\ntwo\nthree", "\x00whole\nfile"}, connector.SchemaRaw},
		{map[string]any{"paths": []any{filepath.Join(dir, "b.txt")}, "format": "lines", "schema": "raw", "batch_size": int64(1)},
			[]string{"one", "two", "three"}, connector.SchemaRaw},
	} {
		s := newTestSource(t, tc.values, nil)
		var got []string
		for {
			b, err := s.Poll(context.Background())
			if errors.Is(err, connector.ErrEndOfInput) {
				break
			}
			require.NoError(t, err, "case %d", i)
			require.Equal(t, tc.schema, b.Schema, "case %d", i)
			got = append(got, toStrings(b.Messages)...)
		}
		require.Equal(t, tc.want, got, "case %d", i)
	}
}

func toStrings(ms []connector.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Payload))
	}
	return out
}

func TestFollowTailsGrowingFilesAndPicksUpNewOnes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := filepath.Join(dir, "a.ndjson")
	write(t, a, "{\"a\":1}\n{\"a\":2}\n{\"a\":")
	s := newTestSource(t, map[string]any{"paths": []any{filepath.Join(dir, "*.ndjson")}, "follow": true,
		"poll_interval": "5ms", "path_header": "file"}, nil)
	got, _ := collect(t, s, 2)
	require.Equal(t, []string{`{"a":1}`, `{"a":2}`}, got)
	quiet(t, s) // the partial line waits

	appendTo(t, a, "3}\n{\"a\":4}\n")
	got, _ = collect(t, s, 2)
	require.Equal(t, []string{`{"a":3}`, `{"a":4}`}, got, "the partial line once complete, then the next")

	b := filepath.Join(dir, "b.ndjson")
	write(t, b, "{\"b\":1}\n")
	write(t, filepath.Join(dir, "ignored.txt"), "{\"x\":1}\n")
	ctx := context.Background()
	batch, err := s.Poll(ctx)
	require.NoError(t, err)
	require.Len(t, batch.Messages, 1)
	require.Equal(t, `{"b":1}`, string(batch.Messages[0].Payload))
	v, ok := batch.Messages[0].Header("file")
	require.True(t, ok)
	require.Equal(t, b, v.String())
	require.Equal(t, header.KindString, v.Kind)

	var st sourceState
	require.NoError(t, json.Unmarshal(batch.State, &st))
	require.Len(t, st.Files, 2)
	require.Equal(t, a, st.Files[0].Path)
	require.Equal(t, int64(len("{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4}\n")), st.Files[0].Offset)
	require.Equal(t, int64(8), st.Files[1].Offset)
}

func TestRestartResumesAtTheSavedOffset(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "in.log")
	write(t, path, "l1\nl2\nl3\nl4\nl5\nl6\nl7\n")
	values := map[string]any{"paths": []any{path}, "format": "lines", "batch_size": int64(3)}
	s := newTestSource(t, values, nil)
	b1, err := s.Poll(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"l1", "l2", "l3"}, toStrings(b1.Messages))
	b2, err := s.Poll(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"l4", "l5", "l6"}, toStrings(b2.Messages))

	// The runtime saved b1's state and crashed while b2 was in flight: a
	// new source resumes right after b1.
	again := newTestSource(t, values, b1.State)
	got, st := collect(t, again, 100)
	require.Equal(t, []string{"l4", "l5", "l6", "l7"}, got)

	appendTo(t, path, "l8\n")
	third := newTestSource(t, values, st)
	got, _ = collect(t, third, 100)
	require.Equal(t, []string{"l8"}, got, "a file that grew while the source was down continues")
}

func TestRotationByRenameReadsBothFilesOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	live := filepath.Join(dir, "app.log")
	write(t, live, "old1\nold2\n")
	s := newTestSource(t, map[string]any{"paths": []any{live}, "format": "lines", "follow": true, "poll_interval": "5ms"}, nil)
	got, _ := collect(t, s, 2)
	require.Equal(t, []string{"old1", "old2"}, got)

	// The writer appends a last line, then the file is rotated away and a
	// new one takes its name.
	appendTo(t, live, "old3\nold-partial")
	require.NoError(t, os.Rename(live, live+".1"))
	write(t, live, "new1\nnew2\n")
	got, _ = collect(t, s, 4)
	require.ElementsMatch(t, []string{"old3", "old-partial", "new1", "new2"}, got)
	quiet(t, s) // nothing read twice
}

func TestTruncatedFileIsReadAgainFromTheStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "t.log")
	write(t, path, "aaaa\nbbbb\ncccc\n")
	s := newTestSource(t, map[string]any{"paths": []any{path}, "format": "lines", "follow": true, "poll_interval": "5ms"}, nil)
	got, _ := collect(t, s, 3)
	require.Len(t, got, 3)
	require.NoError(t, os.Truncate(path, 0))
	appendTo(t, path, "x\n")
	got, _ = collect(t, s, 1)
	require.Equal(t, []string{"x"}, got)

	// Rewritten in place to a longer file: only the fingerprint tells.
	write(t, path, "yyyyyy\nzz\n")
	got, _ = collect(t, s, 2)
	require.Equal(t, []string{"yyyyyy", "zz"}, got)
}

func TestSameInodeOtherContentAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.log")
	write(t, path, "x1\nx2\n")
	values := map[string]any{"paths": []any{path}, "format": "lines"}
	got, st := collect(t, newTestSource(t, values, nil), 10)
	require.Equal(t, []string{"x1", "x2"}, got)
	write(t, path, "y1\ny2\ny3\n") // same inode, new content, longer
	got, _ = collect(t, newTestSource(t, values, st), 10)
	require.Equal(t, []string{"y1", "y2", "y3"}, got)
}

func TestStartAtEndAndLongLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.log")
	write(t, path, "before1\nbefore2\npart")
	s := newTestSource(t, map[string]any{"paths": []any{path}, "format": "lines", "follow": true,
		"poll_interval": "5ms", "start_at": "end", "max_message_bytes": int64(8)}, nil)
	quiet(t, s)
	appendTo(t, path, "ial\nthis line is too long\nafter\n")
	got, _ := collect(t, s, 2)
	require.Equal(t, []string{"partial", "after"}, got, "start_at = end starts after the last complete line")
}

func TestWholeFileFollowWaitsForTheFileToSettle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := newTestSource(t, map[string]any{"paths": []any{filepath.Join(dir, "*.json")}, "format": "whole_file",
		"schema": "json", "follow": true, "poll_interval": "5ms"}, nil)
	path := filepath.Join(dir, "doc.json")
	write(t, path, `{"v":1}`)
	got, st := collect(t, s, 1)
	require.Equal(t, []string{`{"v":1}`}, got)
	quiet(t, s)
	write(t, path, `{"v":2,"longer":true}`)
	got, _ = collect(t, s, 1)
	require.Equal(t, []string{`{"v":2,"longer":true}`}, got, "a changed file is sent again, whole")

	restarted := newTestSource(t, map[string]any{"paths": []any{filepath.Join(dir, "*.json")}, "format": "whole_file",
		"follow": true, "poll_interval": "5ms"}, st)
	got, _ = collect(t, restarted, 1)
	require.Equal(t, []string{`{"v":2,"longer":true}`}, got, "state had version 1 only")
	quiet(t, restarted)
}

func TestSourceConfigErrors(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{}, "src.toml: plugin_config.paths: required key is missing; expected a non-empty list of strings"},
		{map[string]any{"paths": []any{}}, "src.toml: plugin_config.paths: expected a non-empty list of strings, got 0 items"},
		{map[string]any{"paths": []any{"[x"}}, `src.toml: plugin_config.paths[0]: expected a path or a glob such as "logs/*.ndjson"`},
		{map[string]any{"paths": []any{"a"}, "format": "csv"}, `src.toml: plugin_config.format: expected one of "ndjson", "lines", "whole_file", got "csv"`},
		{map[string]any{"paths": []any{"a"}, "schema": "avro"}, `src.toml: plugin_config.schema: expected one of "json", "text", "raw", got "avro"`},
		{map[string]any{"paths": []any{"a"}, "start_at": "middle"}, `src.toml: plugin_config.start_at: expected one of "beginning", "end", got "middle"`},
		{map[string]any{"paths": []any{"a"}, "batch_size": int64(0)}, "src.toml: plugin_config.batch_size: expected an integer of at least 1, got 0"},
		{map[string]any{"paths": []any{"a"}, "max_message_bytes": "100GB"}, `src.toml: plugin_config.max_message_bytes: expected a byte size such as 1048576 or "64MiB" from 1B to 64MB, got 100GB`},
		{map[string]any{"paths": []any{"a"}, "max_batch_bytes": "lots"}, `src.toml: plugin_config.max_batch_bytes: expected a byte size such as 1048576 or "64MiB" from 1B to 1GiB, got "lots"`},
		{map[string]any{"paths": []any{"a"}, "poll_interval": "0"}, `src.toml: plugin_config.poll_interval: expected a duration above zero, such as "250ms"`},
		{map[string]any{"paths": "a"}, `src.toml: plugin_config.paths: expected a non-empty list of strings, got the string "a"; write ["a"]`},
	} {
		_, err := newSource(connector.Config{Plugin: connector.PluginConfig{Values: tc.values, Source: "src.toml"}})
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
	s, err := newSource(connector.Config{Plugin: connector.PluginConfig{Values: map[string]any{"paths": []any{"a"}}}})
	require.NoError(t, err)
	require.ErrorContains(t, s.Open(context.Background(), []byte("{")), "saved state is not valid")
	require.ErrorContains(t, s.Open(context.Background(), []byte(`{"v":9}`)), "version 9")
}
