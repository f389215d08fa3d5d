package runtime

import (
	"context"
	"fmt"
	"log/slog"
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
	v := header.StringValue(tp)
	for _, out := range e.outs {
		for k := range out {
			h := make([]header.Header, len(out[k].Headers), len(out[k].Headers)+1)
			copy(h, out[k].Headers)
			out[k].Headers = header.Set(h, telemetry.TraceparentHeader, v)
		}
	}
}

// startBatch starts the root span of a sink batch: from the poll, a child
// of the traceparent of its first message that has one, linked to every
// distinct traceparent of its messages (the source batches they came
// from); with the poll span.
func (mem *member) startBatch(ctx context.Context, b *iggy.Batch) (context.Context, trace.Span) {
	tr := mem.r.m.tr
	var links []trace.Link
	type id struct {
		trace.TraceID
		trace.SpanID
	}
	seen := map[id]bool{}
	for i := range b.Messages {
		v, ok := header.Get(b.Messages[i].Headers, telemetry.TraceparentHeader)
		if !ok {
			continue
		}
		s, ok := v.Text()
		if !ok {
			continue
		}
		sc, err := telemetry.ParseTraceparent(s)
		if err != nil || seen[id{sc.TraceID(), sc.SpanID()}] {
			continue
		}
		seen[id{sc.TraceID(), sc.SpanID()}] = true
		links = append(links, trace.Link{SpanContext: sc})
	}
	parent := ctx
	if len(links) > 0 {
		parent = trace.ContextWithRemoteSpanContext(ctx, links[0].SpanContext)
	}
	start := mem.pollStart
	if start.IsZero() {
		start = time.Now()
	}
	attrs := append([]attribute.KeyValue{attrStream.String(mem.cs.Stream), attrTopic.String(mem.topic),
		attrPartition.Int64(int64(b.Partition)), attrMessages.Int(len(b.Messages))}, tr.attrs...)
	ctx, root := tr.t.Start(parent, spanSinkBatch, trace.WithTimestamp(start), trace.WithLinks(links...),
		trace.WithAttributes(attrs...), trace.WithSpanKind(trace.SpanKindConsumer))
	if !mem.pollStart.IsZero() {
		tr.timed(ctx, spanSinkPoll, mem.pollStart, mem.pollEnd, attrMessages.Int(len(b.Messages)))
	}
	return ctx, root
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
	r.log = slog.New(slog.NewMultiHandler(r.log.Handler(), t.LogHandler(logLevel(r.cfg.Logging.Level))))
	r.log.Info("OpenTelemetry export started", "service_name", r.cfg.Telemetry.ServiceName,
		"traces", r.cfg.Telemetry.Traces.Endpoint, "logs", r.cfg.Telemetry.Logs.Endpoint)
	return nil
}

// stopTelemetry flushes and stops the export.
func (r *Runtime) stopTelemetry() {
	if r.tel == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.tel.Shutdown(ctx); err != nil {
		r.opts.Logger.Warn("OpenTelemetry export: flushing on shutdown failed", "error", err)
	}
	r.tel = nil
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
