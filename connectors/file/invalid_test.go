package file

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// logBuffer collects log output, safe for concurrent writers.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLoggedSource(t *testing.T, values map[string]any, state []byte) (*Source, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	s, err := newSource(connector.Config{Key: "src", Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Plugin: connector.PluginConfig{Values: values, Source: "src.toml"}})
	require.NoError(t, err)
	require.NoError(t, s.Open(context.Background(), state))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, logs
}

// invalidInput: a valid record, a line that is not JSON (at offset 8), a
// valid one, a line over max_message_bytes (40, at offset 25), a valid one.
const invalidInput = "{\"n\":1}\nnot json\n{\"n\":2}\n{\"long\":\"" + "0123456789012345678901234567890123456789" + "\"}\n{\"n\":3}\n"

func pollAll(t *testing.T, s *Source) ([]connector.Message, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var msgs []connector.Message
	var state []byte
	for {
		b, err := s.Poll(ctx)
		if err != nil {
			return msgs, state, err
		}
		msgs = append(msgs, b.Messages...)
		if b.State != nil {
			state = b.State
		}
	}
}

func TestOnInvalidSkip(t *testing.T) {
	t.Parallel()
	for i, mode := range []string{"", "skip"} {
		dir := t.TempDir()
		path := filepath.Join(dir, "in.ndjson")
		write(t, path, invalidInput)
		values := map[string]any{"paths": []any{path}, "max_message_bytes": int64(40)}
		if mode != "" {
			values["on_invalid"] = mode
		}
		s, logs := newLoggedSource(t, values, nil)
		msgs, _, err := pollAll(t, s)
		require.ErrorIs(t, err, connector.ErrEndOfInput, "case %d", i)
		require.Equal(t, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}, toStrings(msgs), "case %d", i)
		out := logs.String()
		require.Contains(t, out, `level=WARN msg="line is not valid JSON; skipped" path=`+path+" offset=8", "case %d", i)
		require.Contains(t, out, "skipped_total=1", "case %d", i)
		require.Contains(t, out, "offset=25", "case %d", i)
		require.Contains(t, out, "longer than max_message_bytes (40); skipped", "case %d", i)
		require.Contains(t, out, "skipped_total=2", "case %d: the count goes on", i)
		require.Equal(t, uint64(2), s.skipped)
	}
}

func TestOnInvalidRaw(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "in.ndjson")
	write(t, path, invalidInput)
	s, logs := newLoggedSource(t, map[string]any{"paths": []any{path}, "max_message_bytes": int64(40),
		"on_invalid": "raw", "path_header": "file"}, nil)
	msgs, _, err := pollAll(t, s)
	require.ErrorIs(t, err, connector.ErrEndOfInput)
	require.Equal(t, []string{`{"n":1}`, `not json`, `{"n":2}`, `{"n":3}`}, toStrings(msgs))
	require.Equal(t, []connector.Header{connector.StringHeader(PositionHeader, path+" at byte 8"),
		connector.StringHeader("file", path), connector.StringHeader(InvalidHeader, "json")},
		msgs[1].Headers, "the invalid line is marked")
	require.Len(t, msgs[0].Headers, 2, "valid lines are not")
	out := logs.String()
	require.Contains(t, out, "line is not valid JSON; sent as it is")
	require.Contains(t, out, "offset=8")
	require.Contains(t, out, "longer than max_message_bytes (40); skipped", "what is too long cannot be sent")
	require.Contains(t, out, "skipped_total=1")
}

func TestOnInvalidStop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "in.ndjson")
	write(t, path, invalidInput)
	values := map[string]any{"paths": []any{path}, "max_message_bytes": int64(40), "on_invalid": "stop"}
	s, logs := newLoggedSource(t, values, nil)
	msgs, state, err := pollAll(t, s)
	require.Equal(t, []string{`{"n":1}`}, toStrings(msgs), "what comes before is sent")
	require.ErrorContains(t, err, path+" at offset 8: line is not valid JSON; on_invalid = \"stop\"")
	_, err2 := s.Poll(context.Background())
	require.Equal(t, err, err2, "it stays stopped")
	require.Contains(t, logs.String(), "level=ERROR")

	// After a restart from the saved state it stops at the same line,
	// sending nothing again.
	s2, _ := newLoggedSource(t, values, state)
	msgs, state2, err := pollAll(t, s2)
	require.Empty(t, msgs)
	require.Nil(t, state2)
	require.ErrorContains(t, err, "offset 8")

	// Fixed in place, it goes on from there: nothing was skipped.
	write(t, path, strings.Replace(invalidInput, "not json", `{"ok":1}`, 1))
	s3, _ := newLoggedSource(t, values, state)
	msgs, state, err = pollAll(t, s3)
	require.Equal(t, []string{`{"ok":1}`, `{"n":2}`}, toStrings(msgs))
	require.ErrorContains(t, err, "offset 25: line is longer than max_message_bytes (40)")

	// The long line taken out, the rest follows.
	write(t, path, strings.Replace(strings.Replace(invalidInput, "not json", `{"ok":1}`, 1), `"long"`, `"x"`, 1))
	s4, _ := newLoggedSource(t, map[string]any{"paths": []any{path}, "max_message_bytes": int64(60), "on_invalid": "stop"}, state)
	msgs, _, err = pollAll(t, s4)
	require.ErrorIs(t, err, connector.ErrEndOfInput)
	require.Equal(t, []string{`{"x":"0123456789012345678901234567890123456789"}`, `{"n":3}`}, toStrings(msgs))

	// Lines and whole files too.
	lines := filepath.Join(dir, "in.txt")
	write(t, lines, "ok\n"+strings.Repeat("x", 50)+"\n")
	s5, _ := newLoggedSource(t, map[string]any{"paths": []any{lines}, "format": "lines", "max_message_bytes": int64(40), "on_invalid": "stop"}, nil)
	msgs, _, err = pollAll(t, s5)
	require.Equal(t, []string{"ok"}, toStrings(msgs))
	require.ErrorContains(t, err, "offset 3: line is longer than max_message_bytes")
	big := filepath.Join(dir, "big.bin")
	write(t, big, strings.Repeat("y", 50))
	s6, _ := newLoggedSource(t, map[string]any{"paths": []any{big}, "format": "whole_file", "max_message_bytes": int64(40), "on_invalid": "stop"}, nil)
	_, _, err = pollAll(t, s6)
	require.ErrorContains(t, err, "file of 50 bytes is larger than max_message_bytes (40)")
	// An unterminated last line of a file read once counts too.
	tail := filepath.Join(dir, "tail.ndjson")
	require.NoError(t, os.WriteFile(tail, []byte("{\"n\":1}\n{broken"), 0o644))
	s7, _ := newLoggedSource(t, map[string]any{"paths": []any{tail}, "on_invalid": "stop"}, nil)
	msgs, _, err = pollAll(t, s7)
	require.Equal(t, []string{`{"n":1}`}, toStrings(msgs))
	require.ErrorContains(t, err, "offset 8: line is not valid JSON")

	_, err = newSource(connector.Config{Plugin: connector.PluginConfig{Values: map[string]any{"paths": []any{"a"}, "on_invalid": "ignore"}, Source: "src.toml"}})
	require.ErrorContains(t, err, `src.toml: plugin_config.on_invalid: expected one of "skip", "stop", "raw", got "ignore"`)
}
