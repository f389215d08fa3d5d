// Command go-source is an example Ferry source plugin built with the Go
// SDK: it follows a file and sends each line as a message. Its state is
// the number of lines sent, and each message's id is derived from its
// line number, so a batch read again after a crash carries the same ids.
//
//	go build -o examples/plugins/go-source/go-source ./examples/plugins/go-source
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin/sdk"
)

var spec = connector.NewSpec(
	connector.NewStringField("path").Require().WithExample("/tmp/in.txt").
		WithDoc("the file whose lines are sent, one message each; it may grow"),
	connector.NewIntField("batch_size").WithDefault(10).Between(1, 10000).
		WithDoc("at most this many lines a batch"),
	connector.NewDurationField("poll_interval").WithDefault(20*time.Millisecond).
		WithDoc("how often the file is read again when it has nothing new"),
	connector.NewEnumField("schema", "json", "text", "raw").WithDefault("json").
		WithDoc("the schema of the lines"),
)

type source struct {
	path     string
	batch    int
	interval time.Duration
	schema   connector.Schema
	next     int // lines sent so far
}

func newSource(cfg connector.Config) (connector.Source, error) {
	set, err := spec.Parse(cfg.Plugin)
	if err != nil {
		return nil, err
	}
	return &source{path: set.String("path"), batch: set.Int("batch_size"),
		interval: set.Duration("poll_interval"), schema: connector.Schema(set.String("schema"))}, nil
}

func (s *source) Open(_ context.Context, state []byte) error {
	if state == nil {
		return nil
	}
	n, err := strconv.Atoi(string(state))
	if err != nil {
		return fmt.Errorf("state %q: %w", state, err)
	}
	s.next = n
	return nil
}

// lines reads the complete lines of the file after the first skip.
func (s *source) lines(skip, max int) ([][]byte, error) {
	data, err := os.ReadFile(s.path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		if i >= skip && len(out) < max {
			out = append(out, bytes.Clone(sc.Bytes()))
		}
	}
	if !bytes.HasSuffix(data, []byte("\n")) && len(out) > 0 && skip+len(out) == bytes.Count(data, []byte("\n"))+1 {
		out = out[:len(out)-1] // a last line still being written
	}
	return out, sc.Err()
}

func (s *source) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		lines, err := s.lines(s.next, s.batch)
		if err != nil {
			return nil, err
		}
		if len(lines) > 0 {
			b := &connector.Batch{Schema: s.schema}
			for i, l := range lines {
				var id [16]byte
				copy(id[:], "go-source")
				binary.BigEndian.PutUint64(id[8:], uint64(s.next+i+1))
				b.Messages = append(b.Messages, connector.Message{ID: id, Payload: l})
			}
			s.next += len(lines)
			b.State = []byte(strconv.Itoa(s.next))
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(s.interval):
		}
	}
}

func (s *source) Close(context.Context) error { return nil }

func main() {
	sdk.Serve(connector.Info{
		Kind:      connector.KindSource,
		Name:      "go-source",
		Summary:   "sends each line of a file as a message (an example plugin)",
		Spec:      spec,
		NewSource: newSource,
	})
}
