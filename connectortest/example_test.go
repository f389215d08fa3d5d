package connectortest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
)

// A connector author's tests start here. The two connectors below are
// complete, small and real: a source that reads the records of a shared
// in-memory log, and a sink that writes into a shared in-memory table
// keyed by message id. Their tests run Ferry's conformance suites.

// memLog is the "external system" of the example source: an append-only
// list of records.
type memLog struct {
	mu      sync.Mutex
	records []string
}

func (l *memLog) add(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var added []string
	for range n {
		r := fmt.Sprintf(`{"record":%d}`, len(l.records))
		l.records = append(l.records, r)
		added = append(added, r)
	}
	return added
}

// logSource reads memLog from a position; its state is the position
// after the last batch, and each message's id is derived from its
// position, so a replay repeats the ids.
type logSource struct {
	log  *memLog
	next int
}

func (s *logSource) Open(_ context.Context, state []byte) error {
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

func (s *logSource) Poll(ctx context.Context) (*connector.Batch, error) {
	for {
		s.log.mu.Lock()
		end := min(len(s.log.records), s.next+5) // batches of at most 5
		recs := slices.Clone(s.log.records[s.next:end])
		s.log.mu.Unlock()
		if len(recs) > 0 {
			b := &connector.Batch{Schema: connector.SchemaJSON}
			for i, r := range recs {
				var id [16]byte
				id[0], id[15] = 0x10, byte(s.next+i)
				b.Messages = append(b.Messages, connector.Message{ID: id, Payload: []byte(r)})
			}
			s.next = end
			b.State = []byte(strconv.Itoa(end))
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *logSource) Close(context.Context) error { return nil }

func TestExampleSourceConformance(t *testing.T) {
	log := &memLog{}
	connectortest.Source(t, connectortest.SourceSuite{
		New:       func(*testing.T) connector.Source { return &logSource{log: log} },
		Add:       func(_ *testing.T, n int) []string { return log.add(n) },
		StableIDs: true,
	})
}

// memTable is the "external system" of the example sink: rows keyed by
// message id, in insertion order.
type memTable struct {
	mu   sync.Mutex
	ids  map[[16]byte]bool
	rows []string
}

// tableSink inserts each message once (by id), and refuses payloads that
// are not JSON objects, naming them in MessageErrors.
type tableSink struct{ table *memTable }

func (s *tableSink) Open(context.Context) error { return nil }

func (s *tableSink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.table.mu.Lock()
	defer s.table.mu.Unlock()
	failed := connector.MessageErrors{}
	for i, m := range b.Messages {
		var obj map[string]any
		if err := json.Unmarshal(m.Payload, &obj); err != nil {
			failed[i] = connector.Permanent(fmt.Errorf("not a JSON object: %w", err))
			continue
		}
		if !s.table.ids[m.ID] {
			s.table.ids[m.ID] = true
			s.table.rows = append(s.table.rows, string(m.Payload))
		}
	}
	if len(failed) > 0 {
		return failed
	}
	return nil
}

func (s *tableSink) Close(context.Context) error { return nil }

func TestExampleSinkConformance(t *testing.T) {
	table := &memTable{ids: map[[16]byte]bool{}}
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(*testing.T) connector.Sink { return &tableSink{table: table} },
		Read: func(*testing.T) []string {
			table.mu.Lock()
			defer table.mu.Unlock()
			return slices.Clone(table.rows)
		},
		Idempotent: true,
		Poison:     []byte("not json"),
	})
}

// A connector that is registered can run in the real runtime from TOML,
// on an embedded broker.
func TestExampleInTheRuntime(t *testing.T) {
	log, table := &memLog{}, &memTable{ids: map[[16]byte]bool{}}
	reg := connector.NewRegistry()
	if err := reg.Register(connector.Info{Kind: connector.KindSource, Name: "memlog",
		NewSource: func(connector.Config) (connector.Source, error) { return &logSource{log: log}, nil }}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(connector.Info{Kind: connector.KindSink, Name: "memtable",
		NewSink: func(connector.Config) (connector.Sink, error) { return &tableSink{table: table}, nil }}); err != nil {
		t.Fatal(err)
	}
	want := log.add(20)
	connectortest.Start(t, map[string]string{
		"src.toml": "type = \"source\"\nkey = \"src\"\npath = \"memlog\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n",
		"dst.toml": "type = \"sink\"\nkey = \"dst\"\npath = \"memtable\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\npoll_interval = \"5ms\"\n",
	}, connectortest.WithRegistry(reg))
	connectortest.Eventually(t, "every record reaches the table", func() bool {
		table.mu.Lock()
		defer table.mu.Unlock()
		return len(table.rows) == len(want)
	})
	table.mu.Lock()
	defer table.mu.Unlock()
	if !slices.Equal(table.rows, want) {
		t.Fatalf("the table holds %q, want %q", table.rows, want)
	}
}
