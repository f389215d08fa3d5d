package telemetry_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/servertest"
)

// collectorServer is the OpenTelemetry Collector of the tests: the
// program FERRY_OTELCOL_SERVER names (scripts/test.sh builds it from
// internal/servertest/otelcol), else ferry-otelcol on PATH;
// FERRY_REQUIRE_OTELCOL=1 turns a skip for want of it into a failure.
var collectorServer = &servertest.Server{
	Name:       "OpenTelemetry Collector",
	URLEnv:     "FERRY_TEST_OTELCOL_URL_UNUSED", // each test starts its own (Private)
	RequireEnv: "FERRY_REQUIRE_OTELCOL",
	Start:      startCollector,
}

// collector is a running collector: its OTLP receiver's addresses and the
// directory where its file exporters write traces.json, logs.json and
// metrics.json.
type collector struct {
	grpc, http, dir string
}

func newCollector(t *testing.T) collector {
	t.Helper()
	own := collectorServer.Private(t)
	var c collector
	if _, err := fmt.Sscanf(own.URL, "%s %s %s", &c.grpc, &c.http, &c.dir); err != nil {
		t.Fatalf("collector address %q: %v", own.URL, err)
	}
	return c
}

func startCollector() (*servertest.Process, string, error) {
	bin, err := servertest.Find("FERRY_OTELCOL_SERVER", "ferry-otelcol")
	if err != nil {
		return nil, "", err
	}
	dir, err := servertest.TempDir("otelcol")
	if err != nil {
		return nil, "", err
	}
	gp, err := servertest.FreePort()
	if err != nil {
		return nil, "", err
	}
	hp, err := servertest.FreePort()
	if err != nil {
		return nil, "", err
	}
	grpc, http := "127.0.0.1:"+strconv.Itoa(gp), "127.0.0.1:"+strconv.Itoa(hp)
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file/traces:
    path: %s
    flush_interval: 100ms
  file/logs:
    path: %s
    flush_interval: 100ms
  file/metrics:
    path: %s
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file/traces]
    logs:
      receivers: [otlp]
      exporters: [file/logs]
    metrics:
      receivers: [otlp]
      exporters: [file/metrics]
`, grpc, http, filepath.Join(dir, "traces.json"), filepath.Join(dir, "logs.json"), filepath.Join(dir, "metrics.json"))
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		return nil, "", err
	}
	p, err := servertest.Start(servertest.Command{
		Args: []string{bin, "--config", filepath.Join(dir, "config.yaml")},
		Dir:  dir,
		Ready: func() error {
			if err := servertest.Dial(grpc)(); err != nil {
				return err
			}
			return servertest.Dial(http)()
		},
		Timeout: 60 * time.Second,
	})
	if err != nil {
		return nil, "", err
	}
	return p, grpc + " " + http + " " + dir, nil
}

// The OTLP JSON the file exporter writes, as far as the tests read it.
type (
	kv struct {
		Key   string `json:"key"`
		Value struct {
			String *string `json:"stringValue"`
			Int    *string `json:"intValue"`
		} `json:"value"`
	}
	resource struct {
		Attributes []kv `json:"attributes"`
	}
	span struct {
		TraceID      string `json:"traceId"`
		SpanID       string `json:"spanId"`
		ParentSpanID string `json:"parentSpanId"`
		Name         string `json:"name"`
		Attributes   []kv   `json:"attributes"`
		Links        []struct {
			TraceID string `json:"traceId"`
			SpanID  string `json:"spanId"`
		} `json:"links"`
		Status struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"status"`
		Events []struct {
			Name string `json:"name"`
		} `json:"events"`
		service string
	}
	logRecord struct {
		Body struct {
			String string `json:"stringValue"`
		} `json:"body"`
		SeverityText string `json:"severityText"`
		Attributes   []kv   `json:"attributes"`
		TraceID      string `json:"traceId"`
		service      string
	}
	dataPoint struct {
		Attributes []kv     `json:"attributes"`
		AsDouble   *float64 `json:"asDouble"`
		AsInt      *string  `json:"asInt"`
	}
	metric struct {
		Name string `json:"name"`
		Sum  *struct {
			DataPoints []dataPoint `json:"dataPoints"`
		} `json:"sum"`
		Gauge *struct {
			DataPoints []dataPoint `json:"dataPoints"`
		} `json:"gauge"`
		service string
	}
)

func attr(as []kv, key string) (string, bool) {
	for _, a := range as {
		if a.Key == key {
			switch {
			case a.Value.String != nil:
				return *a.Value.String, true
			case a.Value.Int != nil:
				return *a.Value.Int, true
			}
			return "", true
		}
	}
	return "", false
}

// lines calls each with every JSON line of the file (none while it does
// not exist).
func lines(t *testing.T, path string, each func([]byte)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			each(sc.Bytes())
		}
	}
}

func (c collector) spans(t *testing.T) []span {
	var out []span
	lines(t, filepath.Join(c.dir, "traces.json"), func(b []byte) {
		var doc struct {
			ResourceSpans []struct {
				Resource   resource `json:"resource"`
				ScopeSpans []struct {
					Spans []span `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("traces.json: %v", err)
		}
		for _, rs := range doc.ResourceSpans {
			svc, _ := attr(rs.Resource.Attributes, "service.name")
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					s.service = svc
					out = append(out, s)
				}
			}
		}
	})
	return out
}

func (c collector) logs(t *testing.T) []logRecord {
	var out []logRecord
	lines(t, filepath.Join(c.dir, "logs.json"), func(b []byte) {
		var doc struct {
			ResourceLogs []struct {
				Resource  resource `json:"resource"`
				ScopeLogs []struct {
					LogRecords []logRecord `json:"logRecords"`
				} `json:"scopeLogs"`
			} `json:"resourceLogs"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("logs.json: %v", err)
		}
		for _, rl := range doc.ResourceLogs {
			svc, _ := attr(rl.Resource.Attributes, "service.name")
			for _, sl := range rl.ScopeLogs {
				for _, l := range sl.LogRecords {
					l.service = svc
					out = append(out, l)
				}
			}
		}
	})
	return out
}

func (c collector) metrics(t *testing.T) []metric {
	var out []metric
	lines(t, filepath.Join(c.dir, "metrics.json"), func(b []byte) {
		var doc struct {
			ResourceMetrics []struct {
				Resource     resource `json:"resource"`
				ScopeMetrics []struct {
					Metrics []metric `json:"metrics"`
				} `json:"scopeMetrics"`
			} `json:"resourceMetrics"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("metrics.json: %v", err)
		}
		for _, rm := range doc.ResourceMetrics {
			svc, _ := attr(rm.Resource.Attributes, "service.name")
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					m.service = svc
					out = append(out, m)
				}
			}
		}
	})
	return out
}
