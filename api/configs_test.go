package api

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// createOutV1 is upstream's CreateSinkConfig for a new version of "out".
const createOutV1 = `{
  "enabled": true,
  "name": "Counter v1",
  "path": "count",
  "transforms": null,
  "streams": [{"stream": "s", "topics": ["t"], "schema": "json", "batch_length": 20,
               "poll_interval": "5ms", "consumer_group": "iggy-connect-sink-out"}],
  "plugin_config_format": "json",
  "plugin_config": {"flush": 10},
  "verbose": false,
  "benchmark": false
}`

func TestConfigVersionsFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"gen.toml": genTOML, "out.toml": outTOML}, config.HTTP{})
	eventually(t, "out running", func() bool { return e.statusOf("sink", "out") == "running" })

	// Create version 1.
	r := e.do("POST", "/sinks/out/configs", createOutV1)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	c := r.object(t)
	requireConfigShape(t, c, "out", 1, false)
	require.Equal(t, "Counter v1", c["name"])
	require.Equal(t, "json", c["plugin_config_format"])
	require.Equal(t, map[string]any{"flush": float64(10)}, c["plugin_config"])
	require.Equal(t, float64(20), c["streams"].([]any)[0].(map[string]any)["batch_length"])

	// List: version 0 is active (the highest when the file came first it
	// was the only one) and runs.
	list := e.do("GET", "/sinks/out/configs", "").array(t)
	require.Len(t, list, 2)
	requireConfigShape(t, list[0], "out", 0, false)
	requireConfigShape(t, list[1], "out", 1, true)
	require.Equal(t, true, list[0]["running"])
	require.Equal(t, false, list[1]["running"])
	require.Equal(t, true, list[1]["restart_required"], "the highest version is selected and waits for a restart")
	r = e.do("GET", "/sinks/out/configs/1", "")
	require.Equal(t, http.StatusOK, r.status)
	requireConfigShape(t, r.object(t), "out", 1, true)
	require.Equal(t, "Counter v1", r.object(t)["name"])

	// Select version 0, then 1: the API says at once which version is
	// active and that it waits for a restart; version 0 keeps running.
	r = e.do("PUT", "/sinks/out/configs/active", `{"version": 0}`)
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	a := e.do("GET", "/sinks/out/configs/active", "").object(t)
	requireConfigShape(t, a, "out", 0, true)
	require.Equal(t, true, a["running"])
	require.NotContains(t, a, "restart_required")
	r = e.do("PUT", "/sinks/out/configs/active", `{"version": 1}`)
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	require.Empty(t, r.body)
	a = e.do("GET", "/sinks/out/configs/active", "").object(t)
	requireConfigShape(t, a, "out", 1, true)
	require.Equal(t, false, a["running"])
	require.Equal(t, true, a["restart_required"])
	requireError(t, e.do("DELETE", "/sinks/out/configs?version=0", ""), http.StatusConflict, "config_version_running",
		"version 0 is running: restart the connector (POST /sinks/out/restart)")

	// Restart: version 1 runs.
	r = e.do("POST", "/sinks/out/restart", "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	eventually(t, "out running again", func() bool { return e.statusOf("sink", "out") == "running" })
	d := e.do("GET", "/sinks/out", "").object(t)
	require.Equal(t, "Counter v1", d["name"])
	require.Equal(t, "json", d["plugin_config_format"])
	require.Equal(t, float64(20), d["streams"].([]any)[0].(map[string]any)["batch_length"])
	active := e.do("GET", "/sinks/out/configs/active", "").object(t)
	requireConfigShape(t, active, "out", 1, true)
	require.Equal(t, true, active["running"])
	list = e.do("GET", "/sinks/out/configs", "").array(t)
	requireConfigShape(t, list[0], "out", 0, false)
	requireConfigShape(t, list[1], "out", 1, true)
	require.Equal(t, false, list[0]["running"])
	before := e.count("out").Load()
	eventually(t, "version 1 consumes", func() bool { return e.count("out").Load() > before })

	// Delete: the old version goes, the active one stays.
	r = e.do("DELETE", "/sinks/out/configs?version=0", "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	list = e.do("GET", "/sinks/out/configs", "").array(t)
	require.Len(t, list, 1)
	requireConfigShape(t, list[0], "out", 1, true)
	requireError(t, e.do("DELETE", "/sinks/out/configs?version=1", ""), http.StatusConflict, "config_version_active", "activate another version first")
	requireError(t, e.do("DELETE", "/sinks/out/configs", ""), http.StatusBadRequest, "bad_request", "version")
	requireError(t, e.do("DELETE", "/sinks/out/configs?version=-1", ""), http.StatusBadRequest, "bad_request", "version")
	requireError(t, e.do("DELETE", "/sinks/out/configs?version=9", ""), http.StatusNotFound, "sink_config_not_found", "version: 9")
	requireError(t, e.do("PUT", "/sinks/out/configs/active", `{"version": 9}`), http.StatusNotFound, "sink_config_not_found", "version: 9")
	require.Equal(t, "running", e.statusOf("sink", "out"))
}

func TestSetActiveBadBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{})
	for i, tc := range []struct{ body, field string }{
		{``, "request body"},
		{`not json`, "request body"},
		{`[1]`, "request body"},
		{`{}`, "version"},
		{`{"version": null}`, "version"},
		{`{"version": "1"}`, "version"},
		{`{"version": -1}`, "version"},
		{`{"version": 1.5}`, "version"},
		{`{"version": 1} {}`, "request body"},
	} {
		r := e.do("PUT", "/sinks/out/configs/active", tc.body)
		require.Equal(t, http.StatusBadRequest, r.status, "case %d %q: %s", i, tc.body, r.body)
		require.Contains(t, r.object(t)["reason"], tc.field+":", "case %d %q", i, tc.body)
	}
	r := e.do("PUT", "/sinks/out/configs/active", `{"version": 0, "extra": true}`)
	require.Equal(t, http.StatusNoContent, r.status, "unknown fields are ignored, as upstream: %s", r.body)
}

func TestCreateConfigBadBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{})
	for i, tc := range []struct{ path, body, code, mention string }{
		{"/sinks/out/configs", `{`, "invalid_configuration", "invalid JSON"},
		{"/sinks/out/configs", `[]`, "invalid_configuration", "JSON object"},
		{"/sinks/out/configs", `{"enabled": true, "name": "x", "path": "count"}`, "invalid_configuration", "streams"},
		{"/sinks/out/configs", `{"path": "count", "streams": [{"stream": "s", "topics": ["t"], "batch_length": "many"}]}`, "invalid_configuration", "streams[0].batch_length"},
		{"/sinks/out/configs", `{"path": "count", "streams": [{"stream": "s", "topic": "t"}]}`, "invalid_configuration", "topic"},
		{"/sinks/out/configs", `{"key": "other", "path": "count", "streams": [{"stream": "s", "topics": ["t"]}]}`, "invalid_configuration", "key"},
		{"/sinks/out/configs", `{"path": "count", "nonsense": 1, "streams": [{"stream": "s", "topics": ["t"]}]}`, "invalid_configuration", "nonsense"},
		{"/sinks/..bad/configs", `{"path": "count", "streams": [{"stream": "s", "topics": ["t"]}]}`, "invalid_connector_key", "..bad"},
	} {
		r := e.do("POST", tc.path, tc.body)
		require.Equal(t, http.StatusBadRequest, r.status, "case %d %s: %s", i, tc.body, r.body)
		m := r.object(t)
		require.Equal(t, tc.code, m["code"], "case %d %s: %s", i, tc.body, r.body)
		require.Contains(t, m["reason"], tc.mention, "case %d %s", i, tc.body)
	}
	list := e.do("GET", "/sinks/out/configs", "").array(t)
	require.Len(t, list, 1, "no bad body created a version")
}

func TestNewConnectorThroughTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"gen.toml": genTOML}, config.HTTP{})
	body := `{"enabled": true, "name": "Fresh", "path": "count", "streams": [{"stream": "s", "topics": ["t"], "poll_interval": "5ms"}]}`
	r := e.do("POST", "/sinks/fresh/configs", body)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	requireConfigShape(t, r.object(t), "fresh", 0, false)

	requireError(t, e.do("GET", "/sinks/fresh", ""), http.StatusNotFound, "sink_not_found", "fresh")
	list := e.do("GET", "/sinks/fresh/configs", "").array(t)
	require.Len(t, list, 1)
	requireConfigShape(t, list[0], "fresh", 0, true) // not running: the provider's choice
	requireConfigShape(t, e.do("GET", "/sinks/fresh/configs/active", "").object(t), "fresh", 0, true)

	r = e.do("POST", "/sinks/fresh/restart", "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	eventually(t, "fresh running", func() bool { return e.statusOf("sink", "fresh") == "running" })
	eventually(t, "fresh consumes", func() bool { return e.count("fresh").Load() > 0 })
	require.Len(t, e.do("GET", "/sinks", "").array(t), 1)

	// A source version too.
	r = e.do("POST", "/sources/gen/configs", `{"enabled": false, "name": "off", "path": "tick", "streams": [{"stream": "s", "topic": "t"}]}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	c := r.object(t)
	requireConfigShape(t, c, "gen", 1, false)
	require.Equal(t, false, c["enabled"])
	s := c["streams"].([]any)[0].(map[string]any)
	require.Equal(t, float64(1000), s["batch_length"], "defaults filled in")
	require.Equal(t, "5ms", s["linger_time"])
}

func TestRestartTouchesOneConnector(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"gen.toml": genTOML, "out.toml": outTOML, "other.toml": otherTOML}, config.HTTP{})
	eventually(t, "all running", func() bool {
		return e.statusOf("source", "gen") == "running" && e.statusOf("sink", "out") == "running" &&
			e.statusOf("sink", "other") == "running" && e.count("out").Load() > 0
	})
	otherBefore, err := e.rt.Connector(connector.KindSink, "other")
	require.NoError(t, err)
	genBefore, err := e.rt.Connector(connector.KindSource, "gen")
	require.NoError(t, err)
	outBefore, err := e.rt.Connector(connector.KindSink, "out")
	require.NoError(t, err)

	r := e.do("POST", "/sinks/out/restart", "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	require.Empty(t, r.body)
	eventually(t, "out running again", func() bool { return e.statusOf("sink", "out") == "running" })
	outAfter, err := e.rt.Connector(connector.KindSink, "out")
	require.NoError(t, err)
	require.True(t, outAfter.StartedAt.After(outBefore.StartedAt), "out was started again")

	otherAfter, err := e.rt.Connector(connector.KindSink, "other")
	require.NoError(t, err)
	genAfter, err := e.rt.Connector(connector.KindSource, "gen")
	require.NoError(t, err)
	require.Equal(t, otherBefore.StartedAt, otherAfter.StartedAt, "other was not touched")
	require.Equal(t, genBefore.StartedAt, genAfter.StartedAt, "gen was not touched")
	require.Equal(t, "running", e.statusOf("sink", "other"))

	consumed := e.count("out").Load()
	eventually(t, "out consumes after the restart", func() bool { return e.count("out").Load() > consumed })

	// Concurrent restarts of one connector all succeed and leave it running.
	var wg sync.WaitGroup
	statuses := make([]int, 5)
	for i := range statuses {
		wg.Go(func() { // no require off the test goroutine
			req, _ := http.NewRequest("POST", e.url+"/sinks/out/restart", nil)
			req.Header.Set(APIKeyHeader, e.key)
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				statuses[i] = res.StatusCode
				res.Body.Close()
			}
		})
	}
	wg.Wait()
	for i, s := range statuses {
		require.Equal(t, http.StatusNoContent, s, fmt.Sprintf("restart %d", i))
	}
	eventually(t, "out running after concurrent restarts", func() bool { return e.statusOf("sink", "out") == "running" })
	consumed = e.count("out").Load()
	eventually(t, "out consumes after concurrent restarts", func() bool { return e.count("out").Load() > consumed })

	// The source restarts too.
	r = e.do("POST", "/sources/gen/restart", "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	eventually(t, "gen running again", func() bool { return e.statusOf("source", "gen") == "running" })
}
