package connectortest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// FileInput is the input of a sink's kill test: a file the built-in file
// source follows into stream/topic (JSON, batches of batch), to which the
// test appends numbered JSON lines while it kills runtimes. Safe for
// concurrent use.
type FileInput struct {
	Path string
	// TOML is the source's connector file (key "in").
	TOML string

	line func(n int) string
	mu   sync.Mutex
	n    int
}

// NewFileInput makes an empty input file; line(n) is the n-th line (from
// 0, across Append calls), without its newline.
func NewFileInput(t testing.TB, stream, topic string, batch int, line func(n int) string) *FileInput {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.ndjson")
	return &FileInput{Path: path, line: line, TOML: fmt.Sprintf(`type = "source"
key = "in"
path = "file"
[[streams]]
stream = %q
topic = %q
schema = "json"
batch_length = %d
linger_time = "0ms"
[plugin_config]
paths = [%q]
follow = true
poll_interval = "10ms"
batch_size = %d
`, stream, topic, batch, path, batch)}
}

// Append writes the next count lines; its signature suits Feed:
//
//	stop := connectortest.Feed(t, 15*time.Millisecond, func(int) error { return in.Append(10) })
func (f *FileInput) Append(count int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for range count {
		b.WriteString(f.line(f.n))
		b.WriteByte('\n')
		f.n++
	}
	file, err := os.OpenFile(f.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := file.WriteString(b.String()); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

// Written is how many lines were appended so far.
func (f *FileInput) Written() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}
