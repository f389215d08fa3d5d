package connectortest

import (
	"bytes"
	"strings"
	"sync"
)

// Output is an io.Writer that tests read while a connector writes to it
// from other goroutines (a sink's output, a logger's).
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Lines are the complete lines written so far, without their newlines.
func (o *Output) Lines() []string {
	s := o.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.Split(s[:i], "\n")
	}
	return nil
}
