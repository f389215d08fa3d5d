package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	promb "go.opentelemetry.io/contrib/bridges/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of Ferry's spans and logs.
const Name = "github.com/ferryhq/ferry"

// DefaultMetricsInterval is how often metrics are exported when
// [telemetry.metrics] interval is not set.
const DefaultMetricsInterval = 60 * time.Second

// Telemetry is a running OpenTelemetry export.
type Telemetry struct {
	traces  *sdktrace.TracerProvider
	logs    *sdklog.LoggerProvider
	metrics *sdkmetric.MeterProvider
	tracer  trace.Tracer
	handler slog.Handler
}

// Start sets up the exporters of cfg; metrics come from gatherer (the
// runtime's Prometheus registry; nil exports none). Nothing is dialled
// here: the exporters connect when they first export, and an unreachable
// receiver is reported by the SDK's error handler, not by Start. Start
// fails on an endpoint or transport it cannot use.
func Start(ctx context.Context, cfg config.Telemetry, gatherer prometheus.Gatherer) (*Telemetry, error) {
	name := cfg.ServiceName
	if name == "" {
		name = "iggy-connectors"
	}
	res := resource.NewSchemaless(attribute.String("service.name", name))
	t := &Telemetry{}
	ok := false
	defer func() {
		if !ok {
			_ = t.Shutdown(context.WithoutCancel(ctx))
		}
	}()

	te, err := traceExporter(ctx, cfg.Traces)
	if err != nil {
		return nil, fmt.Errorf("telemetry: [telemetry.traces]: %w", err)
	}
	t.traces = sdktrace.NewTracerProvider(sdktrace.WithBatcher(te), sdktrace.WithResource(res))
	t.tracer = t.traces.Tracer(Name)

	le, err := logExporter(ctx, cfg.Logs)
	if err != nil {
		return nil, fmt.Errorf("telemetry: [telemetry.logs]: %w", err)
	}
	t.logs = sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(le)), sdklog.WithResource(res))
	t.handler = otelslog.NewHandler(Name, otelslog.WithLoggerProvider(t.logs))

	mt := config.TelemetryTarget{Transport: cfg.Metrics.Transport, Endpoint: cfg.Metrics.Endpoint}
	if mt.Endpoint == "" {
		mt = cfg.Traces // by default, metrics go where traces go
	}
	if _, err := parseTarget(mt, ""); err != nil {
		return nil, fmt.Errorf("telemetry: [telemetry.metrics]: %w", err)
	}
	if gatherer != nil {
		me, err := metricExporter(ctx, mt)
		if err != nil {
			return nil, fmt.Errorf("telemetry: [telemetry.metrics]: %w", err)
		}
		interval := cfg.Metrics.Interval
		if interval <= 0 {
			interval = DefaultMetricsInterval
		}
		reader := sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(interval),
			sdkmetric.WithProducer(promb.NewMetricProducer(promb.WithGatherer(gatherer))))
		t.metrics = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	}
	ok = true
	return t, nil
}

// SetErrorLog sends the OpenTelemetry SDK's errors (an export that
// failed: the receiver is down, say) to log, at warn, instead of the
// standard logger. The SDK's error handler is global: the last call wins.
func SetErrorLog(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry export failed", "error", err)
	}))
}

// Tracer is the tracer of Ferry's spans.
func (t *Telemetry) Tracer() trace.Tracer { return t.tracer }

// LogHandler is the slog handler that sends records from min up through
// OTLP.
func (t *Telemetry) LogHandler(min slog.Leveler) slog.Handler {
	return levelHandler{min: min, Handler: t.handler}
}

// levelHandler is a handler that takes records from min up.
type levelHandler struct {
	min slog.Leveler
	slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min.Level() && h.Handler.Enabled(ctx, l)
}

func (h levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return levelHandler{h.min, h.Handler.WithAttrs(as)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{h.min, h.Handler.WithGroup(name)}
}

// Shutdown flushes what is buffered (spans, log records, a last
// collection of the metrics) and stops the exporters.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	if t.traces != nil {
		errs = append(errs, t.traces.Shutdown(ctx))
	}
	if t.logs != nil {
		errs = append(errs, t.logs.Shutdown(ctx))
	}
	if t.metrics != nil {
		errs = append(errs, t.metrics.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// target is an endpoint parsed: u is the URL for http (with the signal's
// path when the endpoint has none), insecure when its scheme is http.
type target struct {
	grpc     bool
	endpoint string // host:port
	path     string // for http
	insecure bool
}

func parseTarget(t config.TelemetryTarget, signalPath string) (target, error) {
	var out target
	switch t.Transport {
	case "", "grpc":
		out.grpc = true
	case "http":
	default:
		return out, fmt.Errorf("transport %q: want \"grpc\" or \"http\"", t.Transport)
	}
	ep := t.Endpoint
	if ep == "" {
		ep = "http://localhost:4317"
	}
	u, err := url.Parse(ep)
	if err != nil || u.Host == "" {
		return out, fmt.Errorf("endpoint %q: want a URL such as http://localhost:4317", ep)
	}
	switch u.Scheme {
	case "http":
		out.insecure = true
	case "https":
	default:
		return out, fmt.Errorf("endpoint %q: the scheme must be http or https", ep)
	}
	out.endpoint = u.Host
	out.path = u.Path
	if out.path == "" || out.path == "/" {
		out.path = signalPath
	}
	return out, nil
}

func traceExporter(ctx context.Context, t config.TelemetryTarget) (sdktrace.SpanExporter, error) {
	tg, err := parseTarget(t, "/v1/traces")
	if err != nil {
		return nil, err
	}
	if tg.grpc {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(tg.endpoint)}
		if tg.insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(tg.endpoint), otlptracehttp.WithURLPath(tg.path)}
	if tg.insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return otlptracehttp.New(ctx, opts...)
}

func logExporter(ctx context.Context, t config.TelemetryTarget) (sdklog.Exporter, error) {
	tg, err := parseTarget(t, "/v1/logs")
	if err != nil {
		return nil, err
	}
	if tg.grpc {
		opts := []otlploggrpc.Option{otlploggrpc.WithEndpoint(tg.endpoint)}
		if tg.insecure {
			opts = append(opts, otlploggrpc.WithInsecure())
		}
		return otlploggrpc.New(ctx, opts...)
	}
	opts := []otlploghttp.Option{otlploghttp.WithEndpoint(tg.endpoint), otlploghttp.WithURLPath(tg.path)}
	if tg.insecure {
		opts = append(opts, otlploghttp.WithInsecure())
	}
	return otlploghttp.New(ctx, opts...)
}

func metricExporter(ctx context.Context, t config.TelemetryTarget) (sdkmetric.Exporter, error) {
	tg, err := parseTarget(t, "/v1/metrics")
	if err != nil {
		return nil, err
	}
	if tg.grpc {
		opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(tg.endpoint)}
		if tg.insecure {
			opts = append(opts, otlpmetricgrpc.WithInsecure())
		}
		return otlpmetricgrpc.New(ctx, opts...)
	}
	opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(tg.endpoint), otlpmetrichttp.WithURLPath(tg.path)}
	if tg.insecure {
		opts = append(opts, otlpmetrichttp.WithInsecure())
	}
	return otlpmetrichttp.New(ctx, opts...)
}

// TraceparentHeader is the message header that carries a trace context.
const TraceparentHeader = "traceparent"

// Traceparent is sc in the W3C traceparent format
// (version-traceid-spanid-flags), or "" when sc is not valid.
func Traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return fmt.Sprintf("00-%s-%s-%02x", sc.TraceID(), sc.SpanID(), byte(sc.TraceFlags()))
}

// ParseTraceparent reads a W3C traceparent value; it fails on anything
// else, naming what is wrong. It does not allocate on success (a sink
// reads one per message).
func ParseTraceparent(s string) (trace.SpanContext, error) {
	// version "-" trace-id "-" parent-id "-" flags: 2+1+32+1+16+1+2 = 55;
	// a later version may append "-" and more.
	if len(s) < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-' || (len(s) > 55 && s[55] != '-') {
		return trace.SpanContext{}, fmt.Errorf("traceparent %q: want 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>", s)
	}
	var version, flags [1]byte
	var tid trace.TraceID
	var sid trace.SpanID
	if !lowerHex(version[:], s[0:2]) || version[0] == 0xff || (version[0] == 0 && len(s) != 55) {
		return trace.SpanContext{}, fmt.Errorf("traceparent %q: bad version", s)
	}
	if !lowerHex(tid[:], s[3:35]) || !tid.IsValid() {
		return trace.SpanContext{}, fmt.Errorf("traceparent %q: bad trace id", s)
	}
	if !lowerHex(sid[:], s[36:52]) || !sid.IsValid() {
		return trace.SpanContext{}, fmt.Errorf("traceparent %q: bad span id", s)
	}
	if !lowerHex(flags[:], s[53:55]) {
		return trace.SpanContext{}, fmt.Errorf("traceparent %q: bad flags", s)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]), Remote: true}), nil
}

// lowerHex decodes s, lowercase hex of len(dst) bytes, into dst.
func lowerHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := hexDigit(s[2*i])
		lo, ok2 := hexDigit(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
