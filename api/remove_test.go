package api

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/stretchr/testify/require"
)

func TestDeleteConnector(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"gen.toml": genTOML, "out.toml": outTOML, "other.toml": otherTOML}, config.HTTP{})
	eventually(t, "out running", func() bool { return e.statusOf("sink", "out") == "running" })
	r := e.do("POST", "/sinks/out/configs", createOutV1)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = e.do("PUT", "/sinks/out/configs/active", `{"version": 1}`)
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)

	r = e.do("DELETE", "/sinks/out", "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	requireError(t, e.do("GET", "/sinks/out", ""), http.StatusNotFound, "sink_not_found", "out")
	requireError(t, e.do("GET", "/sinks/out/configs", ""), http.StatusNotFound, "sink_not_found", "out")
	for _, s := range e.do("GET", "/sinks", "").array(t) {
		require.NotEqual(t, "out", s["key"])
	}
	require.Equal(t, "running", e.statusOf("sink", "other"), "other connectors are not touched")
	require.Equal(t, "running", e.statusOf("source", "gen"))

	// Nothing is left in config_dir or in the state's run directory to
	// bring it back.
	dir, run := filepath.Join(e.dir, "connectors"), filepath.Join(e.dir, "state", "connectors")
	require.NoFileExists(t, filepath.Join(dir, "out.toml"))
	require.NoFileExists(t, filepath.Join(run, "sink_out_1.toml"))
	active, err := os.ReadFile(filepath.Join(run, config.ActiveVersionsFile))
	require.NoError(t, err)
	require.NotContains(t, string(active), "out")
	require.NoFileExists(t, filepath.Join(dir, config.ActiveVersionsFile), "config_dir is not written")
	store, err := config.OpenStore(dir, config.WithEnv(config.MapEnv(nil)), config.WithRunDir(run))
	require.NoError(t, err)
	set, err := store.Load(t.Context())
	require.NoError(t, err)
	require.Nil(t, set.Get(config.KindSink, "out"), "a restarted runtime would not load it")
	require.NotNil(t, set.Get(config.KindSink, "other"))

	requireError(t, e.do("DELETE", "/sinks/out", ""), http.StatusNotFound, "sink_not_found", "out")
	requireError(t, e.do("DELETE", "/sources/out", ""), http.StatusNotFound, "source_not_found", "out")
	requireError(t, e.do("DELETE", "/sinks/bad%20key", ""), http.StatusNotFound, "sink_not_found", "bad key")

	// A connector that exists only as stored configuration (never started).
	r = e.do("POST", "/sinks/later/configs", createOutV1)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = e.do("DELETE", "/sinks/later", "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	requireError(t, e.do("GET", "/sinks/later/configs", ""), http.StatusNotFound, "sink_not_found", "later")
}
