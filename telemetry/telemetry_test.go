package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/telemetry"
	"go.opentelemetry.io/otel/trace"
)

func TestTraceparentRoundTrip(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	tp := telemetry.Traceparent(sc)
	if tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("Traceparent = %q", tp)
	}
	got, err := telemetry.ParseTraceparent(tp)
	if err != nil {
		t.Fatal(err)
	}
	if got.TraceID() != tid || got.SpanID() != sid || !got.IsSampled() || !got.IsRemote() {
		t.Fatalf("ParseTraceparent(%q) = %v", tp, got)
	}
	if s := telemetry.Traceparent(trace.SpanContext{}); s != "" {
		t.Fatalf("Traceparent of an invalid context = %q, want empty", s)
	}
}

func TestParseTraceparentRejects(t *testing.T) {
	for _, bad := range []string{
		"",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",                  // no flags
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",         // version 00 has four parts
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",               // version ff is invalid
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",               // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",               // zero span id
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",               // not hex
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",               // flags not hex
		"00-4bf92f3577b34da6a3ce929d0e0e47360-0f067aa0ba902b7-01",               // wrong lengths
		"00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",               // wrong separator
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01-and-some-more", // extra parts
	} {
		if sc, err := telemetry.ParseTraceparent(bad); err == nil {
			t.Errorf("ParseTraceparent(%q) = %v, want an error", bad, sc)
		} else if !strings.Contains(err.Error(), "traceparent") {
			t.Errorf("ParseTraceparent(%q): error %q does not say what it read", bad, err)
		}
	}
}

// A traceparent header comes from a message: whatever it holds, parsing
// fails with an error or yields a valid context that prints back the same.
func FuzzParseTraceparent(f *testing.F) {
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	f.Add("ff-0-0-0")
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := telemetry.ParseTraceparent(s)
		if err != nil {
			return
		}
		if !sc.IsValid() {
			t.Fatalf("ParseTraceparent(%q) = an invalid context without error", s)
		}
		if _, err := telemetry.ParseTraceparent(telemetry.Traceparent(sc)); err != nil {
			t.Fatalf("Traceparent of ParseTraceparent(%q) does not parse: %v", s, err)
		}
	})
}

func TestStartRejectsBadTargets(t *testing.T) {
	good := config.TelemetryTarget{Transport: "grpc", Endpoint: "http://127.0.0.1:4317"}
	for name, c := range map[string]struct {
		cfg  config.Telemetry
		want string
	}{
		"transport":         {config.Telemetry{Logs: good, Traces: config.TelemetryTarget{Transport: "udp", Endpoint: "http://x:1"}}, `[telemetry.traces]: transport "udp"`},
		"no host":           {config.Telemetry{Logs: config.TelemetryTarget{Transport: "http", Endpoint: "localhost"}, Traces: good}, `[telemetry.logs]: endpoint "localhost"`},
		"scheme":            {config.Telemetry{Logs: good, Traces: config.TelemetryTarget{Transport: "grpc", Endpoint: "ftp://x:1"}}, "scheme must be http or https"},
		"metrics transport": {config.Telemetry{Logs: good, Traces: good, Metrics: config.TelemetryMetrics{Transport: "tcp", Endpoint: "http://x:1"}}, `[telemetry.metrics]: transport "tcp"`},
	} {
		tel, err := telemetry.Start(context.Background(), c.cfg, nil)
		if err == nil {
			_ = tel.Shutdown(context.Background())
			t.Errorf("%s: Start succeeded, want an error containing %q", name, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to contain %q", name, err, c.want)
		}
	}
}

// A sink parses the traceparent of its messages: without allocating.
func TestParseTraceparentDoesNotAllocate(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if n := testing.AllocsPerRun(100, func() {
		if _, err := telemetry.ParseTraceparent(tp); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ParseTraceparent allocates %.0f times", n)
	}
}
