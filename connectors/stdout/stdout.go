// Package stdout is the `stdout` sink: it prints one line per message with
// its stream, topic, partition and offset, and the payload when
// print_payload is true (upstream's libiggy_connector_stdout_sink).
//
// plugin_config:
//
//	print_payload = true
package stdout

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
)

func init() {
	connector.MustRegister(connector.Info{
		Kind:    connector.KindSink,
		Name:    "stdout",
		Aliases: []string{"libiggy_connector_stdout_sink"},
		Summary: "prints each message to standard output",
		Spec:    Spec,
		NewSink: New,
	})
}

// Spec is the stdout sink's plugin_config.
var Spec = connector.NewSpec(
	connector.NewBoolField("print_payload").WithDefault(false).
		WithDoc("print each payload after its position (binary payloads as hex)"),
)

// Sink is the stdout sink.
type Sink struct {
	printPayload bool
	mu           sync.Mutex // one batch's lines stay together
	out          io.Writer
}

// New builds a stdout sink.
func New(cfg connector.Config) (connector.Sink, error) {
	set, err := Spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	return &Sink{printPayload: set.Bool("print_payload"), out: os.Stdout}, nil
}

// NewWriter builds a stdout sink that writes to w instead (for tests and
// embedding).
func NewWriter(w io.Writer, printPayload bool) *Sink {
	return &Sink{printPayload: printPayload, out: w}
}

// Open does nothing.
func (s *Sink) Open(context.Context) error { return nil }

// Consume prints the batch.
func (s *Sink) Consume(_ context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := bufio.NewWriter(s.out)
	for i := range b.Messages {
		m := &b.Messages[i]
		fmt.Fprintf(w, "%s/%s partition %d offset %d", m.Stream, m.Topic, m.Partition, m.Offset)
		if s.printPayload {
			if utf8.Valid(m.Payload) {
				fmt.Fprintf(w, " %s", m.Payload)
			} else {
				fmt.Fprintf(w, " 0x%x", m.Payload)
			}
		}
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("stdout: %w", err)
	}
	return nil
}

// Close does nothing.
func (s *Sink) Close(context.Context) error { return nil }

var _ connector.Sink = (*Sink)(nil)
