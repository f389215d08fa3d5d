package runtime

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span names: one root span per batch, a child span per stage.
const (
	spanSourceBatch      = "source.batch"
	spanSourcePoll       = "source.poll"
	spanSourceTransforms = "source.transforms"
	spanSourceSend       = "source.send"
	spanSourceStateSave  = "source.state_save"
	spanSourceAck        = "source.ack"
	spanSinkBatch        = "sink.batch"
	spanSinkPoll         = "sink.poll"
	spanSinkDecode       = "sink.decode"
	spanSinkTransforms   = "sink.transforms"
	spanSinkConsume      = "sink.consume"
	spanSinkCommit       = "sink.commit"
	spanSinkWrite        = "sink.write" // a lane's write (ordering "key" or "none")
)

// Span attribute keys.
const (
	attrConnectorKey  = attribute.Key("ferry.connector.key")
	attrConnectorType = attribute.Key("ferry.connector.type")
	attrStream        = attribute.Key("iggy.stream")
	attrTopic         = attribute.Key("iggy.topic")
	attrPartition     = attribute.Key("iggy.partition")
	attrOutputs       = attribute.Key("iggy.outputs") // stream/topic of each, when a source has more than one
	attrMessages      = attribute.Key("messaging.batch.message_count")
)

// tracer makes one connector's spans. A connector has none (nil) when
// telemetry is off: every call site checks, so no span, context or
// attribute is made then.
type tracer struct {
	t     trace.Tracer
	attrs []attribute.KeyValue // the connector's key and type
}

func (r *Runtime) tracerFor(kind connector.Kind, key string) *tracer {
	if r.tel == nil {
		return nil
	}
	return &tracer{t: r.tel.Tracer(), attrs: []attribute.KeyValue{attrConnectorKey.String(key), attrConnectorType.String(string(kind))}}
}

// child starts a stage span under the batch span in ctx; nil when ctx
// has no batch span (a sink's lanes, which are not traced per batch).
func (t *tracer) child(ctx context.Context, name string, opts ...trace.SpanStartOption) trace.Span {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	_, s := t.t.Start(ctx, name, opts...)
	return s
}

// timed is a finished stage span from start to end.
func (t *tracer) timed(ctx context.Context, name string, start, end time.Time, attrs ...attribute.KeyValue) {
	if s := t.child(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(attrs...)); s != nil {
		s.End(trace.WithTimestamp(end))
	}
}

// endSpan ends s (nil: nothing), recording err.
func endSpan(s trace.Span, err error) {
	if s == nil {
		return
	}
	if err != nil {
		s.RecordError(err)
		s.SetStatus(codes.Error, err.Error())
	}
	s.End()
}

// polledTimes are when a source batch was polled and transformed, kept
// for its spans while tracing (the poller runs ahead of delivery).
type polledTimes struct {
	pollStart, pollEnd, prepareEnd time.Time
}

// keepTimes records b's times, while tracing.
func (r *sourceRun) keepTimes(b *connector.Batch, t polledTimes) {
	r.preparedMu.Lock()
	defer r.preparedMu.Unlock()
	if r.times == nil {
		r.times = map[*connector.Batch]polledTimes{}
	}
	r.times[b] = t
}

// startBatch starts the root span of a delivery of batches, from the
// first poll, with the poll and transform spans of each batch.
func (r *sourceRun) startBatch(ctx context.Context, batches []*connector.Batch) (context.Context, trace.Span) {
	tr := r.m.tr
	r.preparedMu.Lock()
	times := make([]polledTimes, len(batches))
	for i, b := range batches {
		times[i] = r.times[b]
		delete(r.times, b)
	}
	r.preparedMu.Unlock()
	start := time.Now()
	n := 0
	for i, b := range batches {
		n += len(b.Messages)
		if t := times[i].pollStart; !t.IsZero() && t.Before(start) {
			start = t
		}
	}
	attrs := append([]attribute.KeyValue{attrMessages.Int(n)}, tr.attrs...)
	if len(r.outputs) > 0 {
		attrs = append(attrs, attrStream.String(r.outputs[0].cfg.Stream), attrTopic.String(r.outputs[0].cfg.Topic))
	}
	if len(r.outputs) > 1 {
		outs := make([]string, len(r.outputs))
		for i, o := range r.outputs {
			outs[i] = o.cfg.Stream + "/" + o.cfg.Topic
		}
		attrs = append(attrs, attrOutputs.StringSlice(outs))
	}
	ctx, root := tr.t.Start(ctx, spanSourceBatch, trace.WithTimestamp(start), trace.WithAttributes(attrs...),
		trace.WithSpanKind(trace.SpanKindProducer))
	for i, b := range batches {
		t := times[i]
		if t.pollStart.IsZero() {
			continue
		}
		tr.timed(ctx, spanSourcePoll, t.pollStart, t.pollEnd, attrMessages.Int(len(b.Messages)))
		if len(r.chain) > 0 {
			tr.timed(ctx, spanSourceTransforms, t.pollEnd, t.prepareEnd, attrMessages.Int(len(b.Messages)))
		}
	}
	return ctx, root
}

// withTraceparent gives every message sent of e the traceparent header of
// the batch span in ctx, for the sinks that read them. The headers are
// copied: a message's own may be shared between outputs.
func withTraceparent(ctx context.Context, e *encoded) {
	tp := telemetry.Traceparent(trace.SpanContextFromContext(ctx))
	if tp == "" {
		return
	}
	tph := header.New(telemetry.TraceparentHeader, header.StringValue(tp)) // shared, read only
	for _, out := range e.outs {
		n := 0
		for k := range out {
			n += len(out[k].Headers) + 1
		}
		buf := make([]header.Header, 0, n) // one allocation for the batch's headers
		for k := range out {
			h := append(buf[len(buf):len(buf):len(buf)+len(out[k].Headers)+1], out[k].Headers...)
			if i := slices.IndexFunc(h, func(e header.Header) bool { return e.Key.Is(telemetry.TraceparentHeader) }); i >= 0 {
				h[i] = tph
			} else {
				h = append(h, tph)
			}
			buf = buf[:len(buf)+len(h)]
			out[k].Headers = h
		}
	}
}

// traceLinks are the distinct traceparents of the messages whose headers
// headers(i) gives, as links, in their order.
func traceLinks(n int, headers func(i int) []header.Header) []trace.Link {
	type id struct {
		trace.TraceID
		trace.SpanID
	}
	var links []trace.Link
	var seen map[id]bool
	var last []byte // the value read last: a batch's messages mostly share one
	for i := range n {
		v, ok := header.Get(headers(i), telemetry.TraceparentHeader)
		if !ok || v.Kind != header.KindString || (last != nil && bytes.Equal(v.Data, last)) {
			continue
		}
		last = v.Data
		if seen == nil {
			seen = map[id]bool{}
		}
		sc, err := telemetry.ParseTraceparent(string(v.Data))
		if err != nil || seen[id{sc.TraceID(), sc.SpanID()}] {
			continue
		}
		seen[id{sc.TraceID(), sc.SpanID()}] = true
		links = append(links, trace.Link{SpanContext: sc})
	}
	return links
}

// startLinked starts a root span of a sink, the child of the first of
// links and linked to all of them.
func (mem *member) startLinked(ctx context.Context, name string, start time.Time, links []trace.Link,
	partition uint32, messages int) (context.Context, trace.Span) {
	tr := mem.r.m.tr
	if len(links) > 0 {
		ctx = trace.ContextWithRemoteSpanContext(ctx, links[0].SpanContext)
	}
	attrs := append([]attribute.KeyValue{attrStream.String(mem.cs.Stream), attrTopic.String(mem.topic),
		attrPartition.Int64(int64(partition)), attrMessages.Int(messages)}, tr.attrs...)
	return tr.t.Start(ctx, name, trace.WithTimestamp(start), trace.WithLinks(links...),
		trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindConsumer))
}

// startBatch starts the root span of a polled sink batch, from the poll
// (pollStart to pollEnd, its child span): a child of the traceparent of
// its first message that has one, linked to every distinct traceparent of
// its messages (the source batches they came from).
func (mem *member) startBatch(ctx context.Context, b *iggy.Batch, pollStart, pollEnd time.Time) (context.Context, trace.Span) {
	links := traceLinks(len(b.Messages), func(i int) []header.Header { return b.Messages[i].Headers })
	ctx, root := mem.startLinked(ctx, spanSinkBatch, pollStart, links, b.Partition, len(b.Messages))
	mem.r.m.tr.timed(ctx, spanSinkPoll, pollStart, pollEnd, attrMessages.Int(len(b.Messages)))
	return ctx, root
}

// startWrite starts the root span of a lane's write of msgs (sinks with
// ordering "key" or "none", which write across polled batches), linked
// as startBatch's.
func (mem *member) startWrite(ctx context.Context, partition uint32, msgs []connector.Message) (context.Context, trace.Span) {
	links := traceLinks(len(msgs), func(i int) []header.Header { return msgs[i].Headers })
	return mem.startLinked(ctx, spanSinkWrite, time.Now(), links, partition, len(msgs))
}

// startTelemetry starts the OpenTelemetry export of [telemetry] when it
// is enabled: spans of every batch, the runtime's logs (at the level of
// [logging]) besides the logger of Options, and the metrics besides
// Prometheus.
func (r *Runtime) startTelemetry(ctx context.Context) error {
	if !r.cfg.Telemetry.Enabled {
		return nil
	}
	t, err := telemetry.Start(ctx, r.cfg.Telemetry, r.metrics.registry)
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	r.tel = t
	// Export failures go to the logger of Options only: sent through OTLP
	// they would fail in turn.
	telemetry.SetErrorLog(r.opts.Logger)
	r.log = slog.New(slog.NewMultiHandler(r.log.Handler(), t.LogHandler(logLevel(r.cfg.Logging.Level))))
	r.log.Info("OpenTelemetry export started", "service_name", r.cfg.Telemetry.ServiceName,
		"traces", r.cfg.Telemetry.Traces.Endpoint, "logs", r.cfg.Telemetry.Logs.Endpoint)
	return nil
}

// telemetryFlush bounds the flush at shutdown (a receiver that is down
// holds it that long, no longer).
const telemetryFlush = 5 * time.Second

// stopTelemetry flushes and stops the export.
func (r *Runtime) stopTelemetry() {
	if r.tel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), telemetryFlush)
	defer cancel()
	if err := r.tel.Shutdown(ctx); err != nil {
		r.opts.Logger.Warn("OpenTelemetry export: flushing on shutdown failed", "error", err)
	}
	// r.tel stays: a connector added meanwhile reads it (its spans then go
	// nowhere), and closeResources runs once.
}

// logLevel is [logging] level as a slog level (info when unset).
func logLevel(l config.LogLevel) slog.Level {
	switch l {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
