package telemetry_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/servertest"
)

const exportMessages = 30 // three batches of ten

// batchSource polls exportMessages JSON messages in batches of ten, with
// a state, and counts acks.
type batchSource struct {
	mu    sync.Mutex
	next  int
	acked int
}

func (s *batchSource) Open(context.Context, []byte) error { return nil }
func (s *batchSource) Close(context.Context) error        { return nil }
func (s *batchSource) Poll(ctx context.Context) (*connector.Batch, error) {
	s.mu.Lock()
	if s.next >= exportMessages {
		s.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	b := &connector.Batch{Schema: connector.SchemaJSON}
	for range 10 {
		b.Messages = append(b.Messages, connector.Message{Payload: fmt.Appendf(nil, `{"n":%d}`, s.next)})
		s.next++
	}
	b.State = []byte(strconv.Itoa(s.next))
	s.mu.Unlock()
	return b, nil
}
func (s *batchSource) Ack(context.Context, *connector.Batch) error {
	s.mu.Lock()
	s.acked++
	s.mu.Unlock()
	return nil
}
func (s *batchSource) Nack(context.Context, *connector.Batch, error) {}

// countingSink counts what it consumes; its first call fails (the
// runtime retries it).
type countingSink struct {
	mu     sync.Mutex
	n      int
	called bool
}

func (s *countingSink) Open(context.Context) error  { return nil }
func (s *countingSink) Close(context.Context) error { return nil }
func (s *countingSink) Consume(_ context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.called {
		s.called = true
		return errors.New("the first write fails")
	}
	s.n += len(b.Messages)
	return nil
}

// ConsumesOutOfOrder lets the sink run with ordering = "none" (lanes).
func (s *countingSink) ConsumesOutOfOrder() {}

func (s *countingSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// A pipeline with [telemetry] on exports, to a real OpenTelemetry
// Collector, over gRPC and over HTTP: a span per batch stage with the
// connector's attributes, the sink's batch spans in the traces of the
// source batches their messages came from (traceparent header), the
// runtime's logs, and its Prometheus metrics under their own names. A
// sink with ordering = "none" writes in lanes, across polled batches: its
// writes have spans of their own (sink.write), linked the same way.
func TestExportToCollector(t *testing.T) {
	for _, c := range []struct{ name, transport, ordering string }{
		{"grpc", "grpc", "partition"},
		{"http", "http", "partition"},
		{"grpc-lanes", "grpc", "none"},
	} {
		t.Run(c.name, func(t *testing.T) { testExport(t, c.transport, c.ordering) })
	}
}

func testExport(t *testing.T, transport, ordering string) {
	lanes := ordering != "partition"
	col := newCollector(t)
	endpoint := "http://" + col.grpc
	logsEndpoint := endpoint
	if transport == "http" {
		endpoint = "http://" + col.http
		logsEndpoint = endpoint + "/v1/logs" // a full URL is taken as it is
	}
	service := "ferry-test-" + transport
	src, dst := &batchSource{}, &countingSink{}
	reg := connector.NewRegistry()
	if err := reg.Register(connector.Info{Kind: connector.KindSource, Name: "batches",
		NewSource: func(connector.Config) (connector.Source, error) { return src, nil }}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(connector.Info{Kind: connector.KindSink, Name: "counting",
		NewSink: func(connector.Config) (connector.Sink, error) { return dst, nil }}); err != nil {
		t.Fatal(err)
	}
	rt := connectortest.Start(t, map[string]string{
		"src.toml": `type = "source"
key = "src"
path = "batches"
[[streams]]
stream = "s"
topic = "t"
[transforms.add_fields]
[[transforms.add_fields.fields]]
key = "via"
value.static = "ferry"
`,
		"dst.toml": `type = "sink"
key = "dst"
path = "counting"
[[streams]]
stream = "s"
topics = ["t"]
poll_interval = "5ms"
ordering = "` + ordering + `"
[transforms.delete_fields]
fields = ["via"]
`,
	}, connectortest.WithRegistry(reg), connectortest.WithConfig(fmt.Sprintf(`
[telemetry]
enabled = true
service_name = %q
[telemetry.logs]
transport = %q
endpoint = %q
[telemetry.traces]
transport = %q
endpoint = %q
[telemetry.metrics]
transport = %q
endpoint = %q
interval = "1h"
`, service, transport, logsEndpoint, transport, endpoint, transport, endpoint)))
	connectortest.Eventually(t, "the sink consumes every message", func() bool { return dst.count() == exportMessages })
	connectortest.Eventually(t, "the source acks every batch", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.acked == exportMessages/10
	})
	// Stopping flushes the spans, the logs and a last collection of the
	// metrics (the interval is an hour: only that one is exported).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	var spans []span
	connectortest.Eventually(t, "the collector writes the sink's spans", func() bool {
		spans = col.spans(t)
		n := 0
		for _, s := range spans {
			if s.Name == "sink.batch" {
				if c, _ := attr(s.Attributes, "messaging.batch.message_count"); c != "" {
					v, _ := strconv.Atoi(c)
					n += v
				}
			}
		}
		return n >= exportMessages
	})
	byID := map[string]span{}
	names := map[string]int{}
	for _, s := range spans {
		if s.service != service {
			t.Errorf("span %s has service.name %q, want %q", s.Name, s.service, service)
		}
		byID[s.SpanID] = s
		names[s.Name]++
	}
	wantNames := []string{"source.batch", "source.poll", "source.transforms", "source.send", "source.state_save",
		"source.ack", "sink.batch", "sink.poll", "sink.decode", "sink.transforms", "sink.consume", "sink.commit"}
	if lanes {
		wantNames = append(wantNames[:len(wantNames)-1], "sink.write") // lanes commit apart from any batch
	}
	for _, want := range wantNames {
		if names[want] == 0 {
			t.Errorf("no %s span; spans: %v", want, names)
		}
	}
	sourceMsgs := 0
	for _, s := range spans {
		switch s.Name {
		case "source.batch", "sink.batch", "sink.write":
			kind, key := "source", "src"
			if s.Name != "source.batch" {
				kind, key = "sink", "dst"
			}
			for k, want := range map[string]string{"ferry.connector.key": key, "ferry.connector.type": kind,
				"iggy.stream": "s", "iggy.topic": "t"} {
				if got, _ := attr(s.Attributes, k); got != want {
					t.Errorf("%s %s: %s = %q, want %q", s.Name, s.SpanID, k, got, want)
				}
			}
			if s.Name != "source.batch" {
				if _, ok := attr(s.Attributes, "iggy.partition"); !ok {
					t.Errorf("%s %s has no iggy.partition", s.Name, s.SpanID)
				}
			} else if c, _ := attr(s.Attributes, "messaging.batch.message_count"); c != "" {
				v, _ := strconv.Atoi(c)
				sourceMsgs += v
			}
			if s.Status.Code == 2 {
				t.Errorf("%s %s has status error", s.Name, s.SpanID)
			}
		default:
			// A stage span is the child of its batch's span.
			p, ok := byID[s.ParentSpanID]
			want := "source.batch"
			switch {
			case lanes && s.Name == "sink.consume":
				want = "sink.write"
			case s.Name[:4] == "sink":
				want = "sink.batch"
			}
			if !ok || p.Name != want || p.TraceID != s.TraceID {
				t.Errorf("%s %s: parent %q is not a %s of its trace", s.Name, s.SpanID, s.ParentSpanID, want)
			}
		}
	}
	// The failed first write is recorded on its span.
	if !slices.ContainsFunc(spans, func(s span) bool {
		return s.Name == "sink.consume" && s.Status.Code == 2 && s.Status.Message == "the first write fails" &&
			slices.ContainsFunc(s.Events, func(e struct {
				Name string `json:"name"`
			}) bool {
				return e.Name == "exception"
			})
	}) {
		t.Errorf("no sink.consume span with the error of the first write")
	}
	if sourceMsgs != exportMessages {
		t.Errorf("the source.batch spans count %d messages, want %d", sourceMsgs, exportMessages)
	}
	// Each sink batch (and lane write) is in the trace of a source batch,
	// its child, and linked to every source batch its messages came from.
	for _, s := range spans {
		if s.Name != "sink.batch" && s.Name != "sink.write" {
			continue
		}
		p, ok := byID[s.ParentSpanID]
		if !ok || p.Name != "source.batch" || p.TraceID != s.TraceID {
			t.Errorf("%s %s: parent %q is not a source.batch of trace %s", s.Name, s.SpanID, s.ParentSpanID, s.TraceID)
		}
		if len(s.Links) == 0 {
			t.Errorf("%s %s has no links", s.Name, s.SpanID)
		}
		for _, l := range s.Links {
			if ls, ok := byID[l.SpanID]; !ok || ls.Name != "source.batch" || ls.TraceID != l.TraceID {
				t.Errorf("%s %s links to %s/%s, not a source.batch", s.Name, s.SpanID, l.TraceID, l.SpanID)
			}
		}
		if !slices.ContainsFunc(s.Links, func(l struct {
			TraceID string `json:"traceId"`
			SpanID  string `json:"spanId"`
		}) bool {
			return l.SpanID == s.ParentSpanID
		}) {
			t.Errorf("%s %s is not linked to its parent %s", s.Name, s.SpanID, s.ParentSpanID)
		}
	}

	// The runtime's logs, with its attributes.
	var logs []logRecord
	connectortest.Eventually(t, "the collector writes the runtime's logs", func() bool {
		logs = col.logs(t)
		return slices.ContainsFunc(logs, func(l logRecord) bool { return l.Body.String == "embedded broker started" })
	})
	for _, l := range logs {
		if l.service != service {
			t.Errorf("log %q has service.name %q, want %q", l.Body.String, l.service, service)
		}
		if l.SeverityText == "DEBUG" {
			t.Errorf("log %q is at debug, below [logging] level", l.Body.String)
		}
	}
	if !slices.ContainsFunc(logs, func(l logRecord) bool {
		_, ok := attr(l.Attributes, "addr")
		return l.Body.String == "embedded broker started" && ok && l.SeverityText == "INFO"
	}) {
		t.Errorf("no INFO \"embedded broker started\" record with its addr attribute in %d records", len(logs))
	}

	// The Prometheus metrics, under their names: the messages the source
	// sent, for its connector.
	connectortest.Eventually(t, "the collector writes iggy_connector_messages_sent_total for src", func() bool {
		for _, m := range col.metrics(t) {
			if m.Name != "iggy_connector_messages_sent_total" || m.Sum == nil || m.service != service {
				continue
			}
			for _, dp := range m.Sum.DataPoints {
				if key, _ := attr(dp.Attributes, "connector_key"); key == "src" && dp.AsDouble != nil && *dp.AsDouble == exportMessages {
					return true
				}
			}
		}
		return false
	})
}

// With the receiver down, the pipeline runs as without telemetry, and it
// stops (the flush gives up).
func TestUnreachableReceiverDoesNotStopThePipeline(t *testing.T) {
	port, err := servertest.FreePort() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	src, dst := &batchSource{}, &countingSink{}
	reg := connector.NewRegistry()
	if err := reg.Register(connector.Info{Kind: connector.KindSource, Name: "batches",
		NewSource: func(connector.Config) (connector.Source, error) { return src, nil }}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(connector.Info{Kind: connector.KindSink, Name: "counting",
		NewSink: func(connector.Config) (connector.Sink, error) { return dst, nil }}); err != nil {
		t.Fatal(err)
	}
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	rt := connectortest.Start(t, map[string]string{
		"src.toml": "type = \"source\"\nkey = \"src\"\npath = \"batches\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n",
		"dst.toml": "type = \"sink\"\nkey = \"dst\"\npath = \"counting\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\npoll_interval = \"5ms\"\n",
	}, connectortest.WithRegistry(reg), connectortest.WithConfig(fmt.Sprintf(`
[telemetry]
enabled = true
[telemetry.logs]
endpoint = %q
[telemetry.traces]
endpoint = %q
`, endpoint, endpoint)))
	connectortest.Eventually(t, "the sink consumes every message", func() bool { return dst.count() == exportMessages })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Stop took %s with the receiver down", time.Since(start)) // reported, not asserted
}
