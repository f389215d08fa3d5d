package api

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/config"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// readEnv is a runtime with a source, two sinks and a sink whose
// connector does not exist, all loaded; the good ones have moved
// messages.
func readEnv(t *testing.T) *env {
	e := newEnv(t, map[string]string{"gen.toml": genTOML, "out.toml": outTOML, "other.toml": otherTOML, "broken.toml": brokenTOML},
		config.HTTP{Metrics: config.HTTPMetrics{Enabled: true}})
	eventually(t, "connectors running and messages consumed", func() bool {
		return e.statusOf("source", "gen") == "running" && e.statusOf("sink", "out") == "running" &&
			e.statusOf("sink", "other") == "running" && e.statusOf("sink", "broken") == "error" &&
			e.count("out").Load() > 0 && e.count("other").Load() > 0
	})
	return e
}

func TestReadEndpoints(t *testing.T) {
	t.Parallel()
	e := readEnv(t)

	t.Run("root", func(t *testing.T) {
		r := e.do("GET", "/", "")
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "Connector Runtime API", string(r.body))
		require.True(t, strings.HasPrefix(r.header.Get("Content-Type"), "text/plain"))
	})

	t.Run("health", func(t *testing.T) {
		r := e.do("GET", "/health", "")
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "application/json", r.header.Get("Content-Type"))
		require.Equal(t, map[string]any{"status": "healthy"}, r.object(t))
	})

	t.Run("sources", func(t *testing.T) {
		r := e.do("GET", "/sources", "")
		require.Equal(t, http.StatusOK, r.status)
		list := r.array(t)
		require.Len(t, list, 1)
		gen := list[0]
		require.ElementsMatch(t, []string{"id", "key", "name", "path", "enabled", "status", "plugin_config_format"}, keys(gen))
		require.Equal(t, "gen", gen["key"])
		require.Equal(t, "Generator", gen["name"])
		require.Equal(t, "tick", gen["path"])
		require.Equal(t, true, gen["enabled"])
		require.Equal(t, "running", gen["status"])
		require.Equal(t, "json", gen["plugin_config_format"])
		require.Equal(t, float64(1), gen["id"], "sources are numbered first")
	})

	t.Run("sinks", func(t *testing.T) {
		r := e.do("GET", "/sinks", "")
		require.Equal(t, http.StatusOK, r.status)
		list := r.array(t)
		require.Len(t, list, 3)
		require.Equal(t, []any{"broken", "other", "out"}, []any{list[0]["key"], list[1]["key"], list[2]["key"]}, "sorted by key")

		broken := list[0]
		require.ElementsMatch(t, []string{"id", "key", "name", "path", "enabled", "status", "last_error"}, keys(broken))
		require.Equal(t, "error", broken["status"])
		le, ok := broken["last_error"].(map[string]any)
		require.True(t, ok, "last_error is an object: %v", broken["last_error"])
		require.ElementsMatch(t, []string{"message", "timestamp"}, keys(le))
		require.Contains(t, le["message"], `"nosuch"`)
		require.Greater(t, le["timestamp"], float64(1e15), "microseconds since the epoch")

		out := list[2]
		require.ElementsMatch(t, []string{"id", "key", "name", "path", "enabled", "status"}, keys(out))
		require.Equal(t, "Counter", out["name"])
		require.Equal(t, "count", out["path"])
		require.Equal(t, "running", out["status"])
		ids := map[float64]bool{}
		for _, s := range list {
			ids[s["id"].(float64)] = true
		}
		require.Len(t, ids, 3, "ids are distinct")
	})

	t.Run("sink details", func(t *testing.T) {
		r := e.do("GET", "/sinks/out", "")
		require.Equal(t, http.StatusOK, r.status)
		d := r.object(t)
		require.ElementsMatch(t, []string{"id", "key", "name", "path", "enabled", "status", "streams"}, keys(d))
		require.Equal(t, "out", d["key"])
		streams := d["streams"].([]any)
		require.Len(t, streams, 1)
		s := streams[0].(map[string]any)
		require.ElementsMatch(t, []string{"stream", "topics", "schema", "avro_schema_json", "avro_schema_path",
			"batch_length", "poll_interval", "consumer_group"}, keys(s))
		require.Equal(t, "s", s["stream"])
		require.Equal(t, []any{"t"}, s["topics"])
		require.Equal(t, "json", s["schema"])
		require.Nil(t, s["avro_schema_json"])
		require.Nil(t, s["avro_schema_path"])
		require.Equal(t, float64(50), s["batch_length"])
		require.Equal(t, "5ms", s["poll_interval"])
		require.Equal(t, "iggy-connect-sink-out", s["consumer_group"])
	})

	t.Run("source details", func(t *testing.T) {
		r := e.do("GET", "/sources/gen", "")
		require.Equal(t, http.StatusOK, r.status)
		d := r.object(t)
		require.ElementsMatch(t, []string{"id", "key", "name", "path", "enabled", "status", "plugin_config_format", "streams"}, keys(d))
		s := d["streams"].([]any)[0].(map[string]any)
		require.ElementsMatch(t, []string{"stream", "topic", "schema", "avro_schema_json", "avro_schema_path",
			"batch_length", "linger_time"}, keys(s))
		require.Equal(t, "t", s["topic"])
		require.Equal(t, float64(100), s["batch_length"])
		require.Equal(t, "5ms", s["linger_time"])
	})

	t.Run("transforms", func(t *testing.T) {
		r := e.do("GET", "/sources/gen/transforms", "")
		require.Equal(t, http.StatusOK, r.status)
		list := r.array(t)
		require.Len(t, list, 2)
		for _, tr := range list {
			require.ElementsMatch(t, []string{"type", "config"}, keys(tr))
		}
		require.Equal(t, "add_fields", list[0]["type"])
		require.Equal(t, map[string]any{"enabled": true, "fields": []any{map[string]any{"key": "via", "value": map[string]any{"static": "ferry"}}}}, list[0]["config"])
		require.Equal(t, "delete_fields", list[1]["type"])
		require.Equal(t, map[string]any{"enabled": false, "fields": []any{"n"}}, list[1]["config"])

		r = e.do("GET", "/sinks/out/transforms", "")
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "[]", string(r.body))
	})

	t.Run("configs", func(t *testing.T) {
		r := e.do("GET", "/sinks/out/configs", "")
		require.Equal(t, http.StatusOK, r.status)
		list := r.array(t)
		require.Len(t, list, 1)
		requireConfigShape(t, list[0], "out", 0, true)
		require.Equal(t, map[string]any{"flush": float64(5)}, list[0]["plugin_config"])
		require.Nil(t, list[0]["transforms"])
		require.Nil(t, list[0]["plugin_config_format"])

		r = e.do("GET", "/sinks/out/configs/0", "")
		require.Equal(t, http.StatusOK, r.status)
		requireConfigShape(t, r.object(t), "out", 0, true)

		r = e.do("GET", "/sinks/out/configs/active", "")
		require.Equal(t, http.StatusOK, r.status)
		requireConfigShape(t, r.object(t), "out", 0, true)

		r = e.do("GET", "/sources/gen/configs/active", "")
		require.Equal(t, http.StatusOK, r.status)
		c := r.object(t)
		requireConfigShape(t, c, "gen", 0, true)
		require.Equal(t, "json", c["plugin_config_format"])
		tr := c["transforms"].(map[string]any)
		require.ElementsMatch(t, []string{"add_fields", "delete_fields"}, keys(tr))

		requireError(t, e.do("GET", "/sinks/out/configs/7", ""), http.StatusNotFound, "sink_config_not_found", "version: 7")
		requireError(t, e.do("GET", "/sinks/out/configs/x1", ""), http.StatusBadRequest, "bad_request", "version")
	})

	t.Run("plugin config", func(t *testing.T) {
		want := map[string]any{"interval": "10ms", "password": "****", "nested": map[string]any{"a": float64(1), "list": []any{"x", "y"}}}
		for i, tc := range []struct {
			query, contentType string
			decode             func([]byte) (map[string]any, error)
		}{
			{"", "application/json", decodeJSON}, // the connector's plugin_config_format
			{"?format=json", "application/json", decodeJSON},
			{"?format=text", "text/plain", decodeJSON},
			{"?format=yaml", "application/yaml", decodeYAML},
			{"?format=toml", "application/toml", decodeTOML},
			{"?format=TOML", "application/toml", decodeTOML},
		} {
			r := e.do("GET", "/sources/gen/configs/plugin"+tc.query, "")
			require.Equal(t, http.StatusOK, r.status, "case %d %q: %s", i, tc.query, r.body)
			require.Equal(t, tc.contentType, r.header.Get("Content-Type"), "case %d %q", i, tc.query)
			got, err := tc.decode(r.body)
			require.NoError(t, err, "case %d %q: %s", i, tc.query, r.body)
			require.Equal(t, want, normalize(got), "case %d %q", i, tc.query)
		}
		r := e.do("GET", "/sinks/out/configs/plugin", "")
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, "application/toml", r.header.Get("Content-Type"), "toml without plugin_config_format, as upstream")
		require.Equal(t, "flush = 5\n", string(r.body))

		requireError(t, e.do("GET", "/sinks/other/configs/plugin", ""), http.StatusNotFound, "plugin_config_not_found", "other")
		requireError(t, e.do("GET", "/sinks/out/configs/plugin?format=xml", ""), http.StatusBadRequest, "bad_request", "format")
	})

	t.Run("unknown keys", func(t *testing.T) {
		for i, tc := range []struct{ method, path, body, code string }{
			{"GET", "/sinks/nope", "", "sink_not_found"},
			{"GET", "/sources/nope", "", "source_not_found"},
			{"GET", "/sources/out", "", "source_not_found"},
			{"GET", "/sinks/nope/transforms", "", "sink_not_found"},
			{"GET", "/sources/nope/transforms", "", "source_not_found"},
			{"GET", "/sinks/nope/configs", "", "sink_not_found"},
			{"GET", "/sinks/nope/configs/0", "", "sink_not_found"},
			{"GET", "/sinks/nope/configs/active", "", "sink_not_found"},
			{"GET", "/sinks/nope/configs/plugin", "", "sink_not_found"},
			{"PUT", "/sinks/nope/configs/active", `{"version":0}`, "sink_not_found"},
			{"DELETE", "/sinks/nope/configs?version=0", "", "sink_not_found"},
			{"POST", "/sinks/nope/restart", "", "sink_not_found"},
			{"POST", "/sources/nope/restart", "", "source_not_found"},
		} {
			r := e.do(tc.method, tc.path, tc.body)
			require.Equal(t, http.StatusNotFound, r.status, "case %d %s %s: %s", i, tc.method, tc.path, r.body)
			require.Equal(t, tc.code, r.object(t)["code"], "case %d %s %s", i, tc.method, tc.path)
			require.Contains(t, r.object(t)["reason"], strings.Split(tc.path, "/")[2], "case %d", i)
		}
		r := e.do("GET", "/sinks", "")
		require.Len(t, r.array(t), 3, "restarting an unknown key added no connector")
	})
}

// requireConfigShape checks upstream's SinkConfigResponse / SourceConfigResponse.
func requireConfigShape(t *testing.T, c map[string]any, key string, version int, active bool) {
	t.Helper()
	require.ElementsMatch(t, []string{"key", "enabled", "version", "name", "path", "transforms", "streams",
		"plugin_config_format", "plugin_config", "verbose", "benchmark", "active", "running", "restart_required"}, append(keys(c), absent(c, "restart_required")...))
	require.Equal(t, key, c["key"])
	require.Equal(t, float64(version), c["version"])
	require.Equal(t, active, c["active"], "active of %s version %d", key, version)
	require.IsType(t, []any{}, c["streams"])
	require.IsType(t, true, c["verbose"])
	require.IsType(t, true, c["benchmark"])
}

// absent lists the keys of names that m lacks (for keys that appear only
// sometimes).
func absent(m map[string]any, names ...string) []string {
	var out []string
	for _, n := range names {
		if _, ok := m[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

func decodeJSON(b []byte) (map[string]any, error) {
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

func decodeYAML(b []byte) (map[string]any, error) {
	var m map[string]any
	return m, yaml.Unmarshal(b, &m)
}

func decodeTOML(b []byte) (map[string]any, error) {
	var m map[string]any
	_, err := toml.Decode(string(b), &m)
	return m, err
}

// normalize makes decoded numbers float64, as encoding/json does.
func normalize(v map[string]any) map[string]any {
	data, _ := json.Marshal(v)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	return out
}

func TestStatsAndMetrics(t *testing.T) {
	t.Parallel()
	e := readEnv(t)
	eventually(t, "counters moved", func() bool {
		st := e.do("GET", "/stats", "").object(t)
		for _, c := range st["connectors"].([]any) {
			m := c.(map[string]any)
			if m["key"] == "gen" && m["messages_sent"].(float64) == 0 {
				return false
			}
			if m["key"] == "out" && m["messages_processed"].(float64) == 0 {
				return false
			}
		}
		return true
	})

	t.Run("stats", func(t *testing.T) {
		r := e.do("GET", "/stats", "")
		require.Equal(t, http.StatusOK, r.status)
		st := r.object(t)
		require.ElementsMatch(t, []string{"connectors_runtime_version", "connectors_runtime_version_semver", "process_id",
			"cpu_usage", "total_cpu_usage", "memory_usage", "total_memory", "available_memory", "run_time", "start_time",
			"sources_total", "sources_running", "sinks_total", "sinks_running", "connectors", "iggy_address", "iggy_embedded"}, keys(st))
		require.Equal(t, e.rt.IggyAddress(), st["iggy_address"], "where the broker is")
		require.Equal(t, true, st["iggy_embedded"])
		require.Equal(t, "1.2.3", st["connectors_runtime_version"])
		require.Equal(t, float64(1002003), st["connectors_runtime_version_semver"])
		require.Equal(t, float64(os.Getpid()), st["process_id"])
		require.Equal(t, float64(e.rt.StartedAt().UnixMicro()), st["start_time"])
		require.Greater(t, st["run_time"], float64(0))
		require.Equal(t, float64(1), st["sources_total"])
		require.Equal(t, float64(1), st["sources_running"])
		require.Equal(t, float64(3), st["sinks_total"])
		require.Equal(t, float64(2), st["sinks_running"], "broken is in error")
		if _, err := os.Stat("/proc/self/stat"); err == nil {
			require.Greater(t, st["memory_usage"], float64(0))
			require.Greater(t, st["total_memory"], float64(0))
			require.Greater(t, st["available_memory"], float64(0))
			require.GreaterOrEqual(t, st["cpu_usage"], float64(0))
		}

		conns := st["connectors"].([]any)
		require.Len(t, conns, 4)
		var order []any
		byKey := map[string]map[string]any{}
		for _, c := range conns {
			m := c.(map[string]any)
			order = append(order, m["key"])
			byKey[m["key"].(string)] = m
		}
		require.Equal(t, []any{"gen", "broken", "other", "out"}, order, "sources first, then sinks")

		gen := byKey["gen"]
		require.ElementsMatch(t, []string{"key", "name", "connector_type", "version", "version_semver", "status", "enabled",
			"messages_produced", "messages_sent", "messages_filtered", "errors", "messages_dead_lettered"}, keys(gen))
		require.Equal(t, "source", gen["connector_type"])
		require.Equal(t, "Generator", gen["name"])
		require.Equal(t, "1.2.3", gen["version"])
		require.Equal(t, float64(1002003), gen["version_semver"])
		require.Equal(t, "running", gen["status"])
		require.Equal(t, true, gen["enabled"])
		require.Greater(t, gen["messages_produced"], float64(0))
		require.Greater(t, gen["messages_sent"], float64(0))
		require.Equal(t, float64(0), gen["messages_filtered"])

		out := byKey["out"]
		require.ElementsMatch(t, []string{"key", "name", "connector_type", "version", "version_semver", "status", "enabled",
			"messages_consumed", "messages_processed", "messages_filtered", "errors", "messages_dead_lettered", "lag", "lag_total"}, keys(out))
		require.Equal(t, "sink", out["connector_type"])
		require.GreaterOrEqual(t, out["lag_total"], float64(0), "Ferry: what the sink's group has not committed")
		require.Greater(t, out["messages_consumed"], float64(0))
		require.Greater(t, out["messages_processed"], float64(0))
		require.Equal(t, float64(0), out["errors"])

		require.Equal(t, "error", byKey["broken"]["status"])
		require.GreaterOrEqual(t, byKey["broken"]["errors"], float64(1))
	})

	t.Run("metrics", func(t *testing.T) {
		r := e.do("GET", "/metrics", "")
		require.Equal(t, http.StatusOK, r.status)
		require.Contains(t, r.header.Get("Content-Type"), "text/plain")
		body := string(r.body)
		for _, name := range []string{
			"iggy_connectors_sources_total", "iggy_connectors_sources_running",
			"iggy_connectors_sinks_total", "iggy_connectors_sinks_running",
			"iggy_connector_messages_produced_total", "iggy_connector_messages_sent_total",
			"iggy_connector_messages_consumed_total", "iggy_connector_messages_processed_total",
			"iggy_connector_messages_filtered_total", "iggy_connector_errors_total",
			"iggy_connector_stage_duration_seconds_bucket",
		} {
			require.Contains(t, body, "\n"+name, "metric %s", name)
		}
		require.Contains(t, body, `iggy_connector_messages_sent_total{connector_key="gen",connector_type="source"}`)
		require.Contains(t, body, `iggy_connector_messages_processed_total{connector_key="out",connector_type="sink"}`)
		require.Contains(t, body, "iggy_connectors_sources_running 1\n")
		require.Contains(t, body, "iggy_connectors_sinks_total 3\n")
	})
}
