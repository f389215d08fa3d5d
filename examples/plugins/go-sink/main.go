// Command go-sink is an example Ferry sink plugin built with the Go SDK:
// it appends each message's payload as a line to a file.
//
// Build it next to its manifest and name the manifest in a connector file:
//
//	go build -o examples/plugins/go-sink/go-sink ./examples/plugins/go-sink
//
//	type = "sink"
//	key = "lines"
//	path = "../../examples/plugins/go-sink/ferry-plugin.toml"
//	[plugin_config]
//	path = "/tmp/lines.txt"
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin/sdk"
)

var spec = connector.NewSpec(
	connector.NewStringField("path").Require().WithExample("/tmp/lines.txt").
		WithDoc("the file each payload is appended to, one line each"),
	connector.NewDurationField("delay").WithDefault(time.Duration(0)).
		WithDoc("a pause before each message (to watch batches in flight)"),
	connector.NewStringField("reject").
		WithDoc("payloads containing this text are refused for good (dead-lettered)"),
)

type sink struct {
	path   string
	delay  time.Duration
	reject []byte

	mu sync.Mutex
	f  *os.File
}

func newSink(cfg connector.Config) (connector.Sink, error) {
	set, err := spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	s := &sink{path: set.String("path"), delay: set.Duration("delay")}
	if r := set.String("reject"); r != "" {
		s.reject = []byte(r)
	}
	return s, nil
}

func (s *sink) Open(context.Context) error {
	f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return connector.Unavailable(err)
	}
	s.f = f
	return nil
}

func (s *sink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	failed := connector.MessageErrors{}
	for i, m := range b.Messages {
		if err := ctx.Err(); err != nil {
			return err
		}
		if s.delay > 0 {
			time.Sleep(s.delay)
		}
		if s.reject != nil && bytes.Contains(m.Payload, s.reject) {
			failed[i] = connector.Permanent(fmt.Errorf("the payload contains %q", s.reject))
			continue
		}
		if bytes.IndexByte(m.Payload, '\n') >= 0 {
			failed[i] = connector.Permanent(errors.New("a payload with a newline cannot be one line"))
			continue
		}
		if _, err := s.f.Write(append(m.Payload, '\n')); err != nil {
			return connector.Unavailable(err)
		}
	}
	if len(failed) > 0 {
		return failed
	}
	return nil
}

func (s *sink) Close(context.Context) error {
	if s.f == nil {
		return nil
	}
	return s.f.Close()
}

func main() {
	sdk.Serve(connector.Info{
		Kind:    connector.KindSink,
		Name:    "go-sink",
		Summary: "appends each message's payload as a line to a file (an example plugin)",
		Spec:    spec,
		NewSink: newSink,
	})
}
