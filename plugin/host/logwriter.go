package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
)

// Bounds of what a plugin's standard error puts in the runtime's log.
const (
	// MaxLogLine is the longest line logged; the rest is cut.
	MaxLogLine = 4096
	// LogRate and LogBurst bound lines per second: a plugin that writes
	// more has lines dropped, and the log says how many.
	LogRate  = 50
	LogBurst = 200
	// lastLines is how many recent lines a failure's reason may quote.
	lastLines = 5
)

// LogWriter puts what a plugin process writes (its standard error, or
// its standard output after the handshake) into the runtime's log, one
// record per line, with the connector's key (from log) and the stream's
// name, bounded by MaxLogLine, LogRate and LogBurst. It remembers the
// last lines, for the reason of a failure (Last).
type LogWriter struct {
	log    *slog.Logger
	stream string

	mu      sync.Mutex
	partial []byte
	tokens  float64
	last    time.Time
	dropped int
	recent  []string
}

// NewLogWriter returns a LogWriter for one stream ("stderr", "stdout").
func NewLogWriter(log *slog.Logger, stream string) *LogWriter {
	return &LogWriter{log: log, stream: stream, tokens: LogBurst, last: time.Now()}
}

// Write logs the complete lines of p and keeps the rest for the next.
func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := MaxLogLine + 1 - len(w.partial)
			if room > 0 {
				w.partial = append(w.partial, p[:min(room, len(p))]...)
			}
			break
		}
		line := p[:i]
		if len(w.partial) > 0 {
			line = append(w.partial, line[:min(len(line), MaxLogLine+1)]...)
			w.partial = w.partial[:0]
		}
		w.line(line)
		p = p[i+1:]
	}
	return n, nil
}

// Flush logs a last line without its newline.
func (w *LogWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.partial) > 0 {
		w.line(w.partial)
		w.partial = w.partial[:0]
	}
}

func (w *LogWriter) line(b []byte) {
	b = bytes.TrimRight(b, "\r")
	cut := len(b) > MaxLogLine
	if cut {
		b = b[:MaxLogLine] // a rune cut in two becomes U+FFFD below
	}
	s := string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
	if cut {
		s += " …(line cut)"
	}
	level := slog.LevelInfo
	if e, ok := hclogLine(b); ok && !cut {
		// go-plugin's own log of a Go plugin: its level, and debug noise
		// is not a plugin's last words.
		level, s = e.level, e.msg
	}
	if level > slog.LevelDebug {
		w.recent = append(w.recent, s)
		if len(w.recent) > lastLines {
			w.recent = w.recent[1:]
		}
	}
	now := time.Now()
	w.tokens = min(LogBurst, w.tokens+now.Sub(w.last).Seconds()*LogRate)
	w.last = now
	if w.tokens < 1 {
		w.dropped++
		return
	}
	w.tokens--
	if w.dropped > 0 {
		w.log.Warn("plugin output dropped: more lines than the log takes", "stream", w.stream, "dropped_lines", w.dropped)
		w.dropped = 0
	}
	w.log.Log(context.Background(), level, s, "plugin_output", w.stream)
}

type hclogEntry struct {
	level slog.Level
	msg   string
}

// hclogLine reads a line of hclog's JSON format, as go-plugin's server
// writes it: {"@level":"debug","@message":"plugin address",...}.
func hclogLine(b []byte) (hclogEntry, bool) {
	if !bytes.HasPrefix(b, []byte(`{"@level":`)) {
		return hclogEntry{}, false
	}
	var e map[string]any
	if json.Unmarshal(b, &e) != nil {
		return hclogEntry{}, false
	}
	lv, _ := e["@level"].(string)
	msg, _ := e["@message"].(string)
	var attrs []string
	for k, v := range e {
		if !strings.HasPrefix(k, "@") {
			attrs = append(attrs, fmt.Sprintf("%s=%v", k, v))
		}
	}
	sort.Strings(attrs)
	if len(attrs) > 0 {
		msg += " " + strings.Join(attrs, " ")
	}
	level := slog.LevelInfo
	switch lv {
	case "trace", "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	return hclogEntry{level, msg}, true
}

// Last is the last line logged, or "".
func (w *LogWriter) Last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.recent) == 0 {
		return ""
	}
	return w.recent[len(w.recent)-1]
}

// Recent are the last few lines.
func (w *LogWriter) Recent() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.recent...)
}
