package file

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
)

func TestSourceConformance(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "in.ndjson")
	var mu sync.Mutex
	n := 0
	connectortest.Source(t, connectortest.SourceSuite{
		New: func(t *testing.T) connector.Source {
			s, err := newSource(connector.Config{Key: "in", Plugin: connector.PluginConfig{Source: "in.toml", Values: map[string]any{
				"paths": []any{path}, "follow": true, "poll_interval": "10ms", "batch_size": int64(4)}}})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Add: func(t *testing.T, count int) []string {
			mu.Lock()
			defer mu.Unlock()
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var lines []string
			for range count {
				lines = append(lines, fmt.Sprintf(`{"record":%d}`, n))
				n++
			}
			if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
				t.Fatal(err)
			}
			return lines
		},
		StableIDs: true,
	})
}

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink {
			s, err := newSink(connector.Config{Key: "out", Plugin: connector.PluginConfig{Source: "out.toml", Values: map[string]any{
				"path": filepath.Join(dir, "{stream}-{topic}-{partition}.ndjson")}}})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Read: func(t *testing.T) []string {
			data, err := os.ReadFile(filepath.Join(dir, "conformance-t-0.ndjson"))
			if os.IsNotExist(err) {
				return nil
			}
			if err != nil {
				t.Fatal(err)
			}
			return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		},
	})
}
