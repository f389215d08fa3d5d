package exec

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// runLogSize is how many recent runs a sink keeps for Activity (ferry
// hook logs); runOutputLimit bounds each run's kept stdout and stderr.
const (
	runLogSize     = 100
	runOutputLimit = 2048
)

// Run is one command run, as ferry hook logs shows it.
type Run struct {
	Stream    string    `json:"stream"`
	Topic     string    `json:"topic"`
	Partition uint32    `json:"partition"`
	Offset    uint64    `json:"offset"`
	Started   time.Time `json:"started"`
	// DurationMicros is how long the command ran.
	DurationMicros int64 `json:"duration_us"`
	// ExitCode is the command's exit status: -1 when it was killed (a
	// timeout or a signal) or could not start.
	ExitCode int    `json:"exit_code"`
	Error    string `json:"error,omitempty"`
	// Stdout and Stderr are the start of the output, at most 2 KiB each
	// (the rest is counted in the text).
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
}

// runLog keeps the last runLogSize runs, oldest first when read.
type runLog struct {
	mu   sync.Mutex
	runs []Run
	next int // where the next run goes once full
}

func (l *runLog) add(r Run) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.runs) < runLogSize {
		l.runs = append(l.runs, r)
		return
	}
	l.runs[l.next] = r
	l.next = (l.next + 1) % runLogSize
}

func (l *runLog) list() []Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Run, 0, len(l.runs))
	out = append(out, l.runs[l.next:]...)
	return append(out, l.runs[:l.next]...)
}

// record adds the run of m that started at start and ended with raw
// (what the command returned), described as err.
func (l *runLog) record(m *connector.Message, start time.Time, raw, err error, stdout, stderr *capture) {
	r := Run{Stream: m.Stream, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Started: start.UTC(),
		DurationMicros: time.Since(start).Microseconds(), Stdout: stdout.head(runOutputLimit), Stderr: stderr.head(runOutputLimit)}
	if err != nil {
		r.Error, r.ExitCode = err.Error(), -1
	}
	var ee *exec.ExitError
	if errors.As(raw, &ee) {
		r.ExitCode = ee.ExitCode() // -1 when killed by a signal
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.ExitCode = -1
		}
	}
	l.add(r)
}

// Activity returns the sink's recent runs, oldest first (the runtime
// serves it at GET /sinks/{key}/activity: connector.ActivityReporter).
func (s *Sink) Activity() any { return s.runs.list() }

// head is the kept output cut to n bytes, with a note when something
// was cut.
func (c *capture) head(n int) string {
	if c == nil || c.total == 0 {
		return ""
	}
	short := *c
	if len(short.buf) > n {
		short.buf = short.buf[:n]
	}
	return short.String()
}
