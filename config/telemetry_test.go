package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// [telemetry.metrics] (Ferry extension) is read from the file and from
// IGGY_CONNECTORS_TELEMETRY_METRICS_*; left out, it is empty (the
// exporter then uses [telemetry.traces]' target).
func TestTelemetryMetricsSection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(file, []byte(`
[connectors]
config_dir = "."
[telemetry]
enabled = true
service_name = "edge"
[telemetry.traces]
transport = "http"
endpoint = "http://otel:4318"
[telemetry.metrics]
transport = "http"
endpoint = "http://metrics:4318/v1/metrics"
interval = "15s"
`), 0o644))
	rt, err := Load(file, noEnv)
	require.NoError(t, err)
	require.Equal(t, TelemetryMetrics{Transport: "http", Endpoint: "http://metrics:4318/v1/metrics", Interval: 15 * time.Second}, rt.Telemetry.Metrics)

	rt, err = Load(file, WithEnv(MapEnv(map[string]string{
		"IGGY_CONNECTORS_TELEMETRY_METRICS_ENDPOINT": "http://other:4317",
		"IGGY_CONNECTORS_TELEMETRY_METRICS_INTERVAL": "2s",
	})))
	require.NoError(t, err)
	require.Equal(t, "http://other:4317", rt.Telemetry.Metrics.Endpoint)
	require.Equal(t, 2*time.Second, rt.Telemetry.Metrics.Interval)

	require.NoError(t, os.WriteFile(file, []byte("[connectors]\nconfig_dir = \".\"\n[telemetry]\nenabled = true\n"), 0o644))
	rt, err = Load(file, noEnv)
	require.NoError(t, err)
	require.Equal(t, TelemetryMetrics{}, rt.Telemetry.Metrics)

	require.NoError(t, os.WriteFile(file, []byte("[connectors]\nconfig_dir = \".\"\n[telemetry.metrics]\ntransport = \"udp\"\n"), 0o644))
	_, err = Load(file, noEnv)
	require.ErrorContains(t, err, "udp")
}
