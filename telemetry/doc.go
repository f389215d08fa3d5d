// Package telemetry owns Ferry's OpenTelemetry export: from the
// [telemetry] section it sets up OTLP exporters for traces
// ([telemetry.traces]), logs ([telemetry.logs], fed by the runtime's slog
// logger) and metrics ([telemetry.metrics], a Ferry extension: the
// runtime's Prometheus registry read through the Prometheus bridge and
// exported under the same names), each over gRPC or HTTP, with a resource
// whose service.name is service_name. Shutdown flushes all three.
//
// It also owns the W3C traceparent header that carries a source batch's
// trace context to the sinks that read its messages (Traceparent and
// ParseTraceparent).
//
// The runtime creates spans itself (package runtime, tracing.go); when
// telemetry is off it has no Telemetry and takes no span at all.
package telemetry
