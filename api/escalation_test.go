package api

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/config"
)

// The attacks of the security review, as another local user would run
// them against a runtime that has no api_key: a file sink writing
// anywhere, a file source copying a private file out, and a file sink
// planting an exec sink in config_dir for a restart to run. Without the
// local token every step is refused; with it, the runtime's own files
// stay out of reach all the same.
func TestEscalationsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, map[string]string{"out.toml": outTOML}, config.HTTP{})
	loot := t.TempDir()
	secret := filepath.Join(loot, "id_rsa")
	require.NoError(t, os.WriteFile(secret, []byte("PRIVATE KEY"), 0o600))
	conns := filepath.Join(e.dir, "connectors")
	mark := filepath.Join(loot, "PWNED")

	fileSink := func(key, path string) string {
		return fmt.Sprintf(`{"enabled": true, "path": "file", "streams": [{"stream": "s", "topics": ["t"], "poll_interval": "5ms"}],
			"plugin_config": {"path": %q, "format": "raw"}}`, path)
	}
	fileSource := func(glob string) string {
		return fmt.Sprintf(`{"enabled": true, "path": "file", "streams": [{"stream": "s", "topic": "t"}],
			"plugin_config": {"paths": [%q], "format": "whole_file"}}`, glob)
	}
	attacks := []struct{ method, path, body string }{
		{"POST", "/sinks/anywhere/configs", fileSink("anywhere", filepath.Join(loot, "written.txt"))},
		{"POST", "/sinks/anywhere/restart", ""},
		{"POST", "/sources/copy/configs", fileSource(secret)},
		{"POST", "/sources/copy/restart", ""},
		{"POST", "/sinks/plant/configs", fileSink("plant", filepath.Join(conns, "evil.toml"))},
		{"POST", "/sinks/plant/restart", ""},
		{"PUT", "/sinks/plant/configs/active", `{"version": 0}`},
	}
	for _, key := range []string{"", "wrong", strings.Repeat("0", 64), e.key[:63], strings.ToUpper(e.key)} {
		for _, a := range attacks {
			h := headers("Content-Type", "application/json")
			if key != "" {
				h.Set(APIKeyHeader, key)
			}
			r := send(t, a.method, e.url+a.path, "", a.body, h)
			requireError(t, r, http.StatusUnauthorized, codeUnauthorized, "")
		}
	}

	// The last step on its own: an exec sink file already in config_dir
	// (however it got there) is not loaded by a restart without the token.
	require.NoError(t, os.WriteFile(filepath.Join(conns, "evil.toml"), []byte(fmt.Sprintf(`
type = "sink"
key = "evil"
path = "exec"
[[streams]]
stream = "s"
topics = ["t"]
[plugin_config]
command = "touch %s"
`, mark)), 0o600))
	requireError(t, send(t, "POST", e.url+"/sinks/evil/restart", "", "", nil), http.StatusUnauthorized, codeUnauthorized, "local token")
	requireError(t, send(t, "POST", e.url+"/sinks/evil/restart", "", "", headers(APIKeyHeader, "guess")), http.StatusUnauthorized, codeUnauthorized, "")
	_, err := e.rt.Connector("sink", "evil")
	require.Error(t, err, "not loaded")
	require.NoError(t, os.Remove(filepath.Join(conns, "evil.toml")))

	// With the token (the owner), the runtime's own files are still out of
	// reach of connectors, on every way in.
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/sinks/plant/configs", fileSink("plant", filepath.Join(conns, "evil.toml")), "connector configuration directory (config_dir)"},
		{"POST", "/sinks/plant/configs", fileSink("plant", filepath.Join(conns, "{topic}.toml")), "connector configuration directory (config_dir)"},
		{"POST", "/sinks/state/configs", fileSink("state", filepath.Join(e.dir, "state", "sources", "x")), "state directory"},
		{"POST", "/sinks/conf/configs", fileSink("conf", filepath.Join(e.dir, "config.toml")), "configuration file"},
		{"POST", "/sources/read/configs", fileSource(filepath.Join(conns, "*.toml")), "connector configuration directory (config_dir)"},
		{"POST", "/sources/read/configs", fileSource(filepath.Join(e.dir, "state", "*")), "state directory"},
	} {
		requireError(t, e.do(tc.method, tc.path, tc.body), http.StatusBadRequest, codeInvalidConfig, tc.want)
	}
	// A version stored by other means (a file the operator wrote) is
	// refused by activate and by restart alike.
	require.NoError(t, os.WriteFile(filepath.Join(conns, "sink_late_0.toml"), []byte(fmt.Sprintf(`
type = "sink"
key = "late"
path = "file"
[[streams]]
stream = "s"
topics = ["t"]
[plugin_config]
path = %q
`, filepath.Join(conns, "late.toml"))), 0o600))
	requireError(t, e.do("PUT", "/sinks/late/configs/active", `{"version": 0}`), http.StatusBadRequest, codeInvalidConfig, "config_dir")
	requireError(t, e.do("POST", "/sinks/late/restart", ""), http.StatusBadRequest, codeInvalidConfig, "config_dir")
	_, err = e.rt.Connector("sink", "late")
	require.Error(t, err, "not loaded")

	// What the owner may do still works: a file sink outside the
	// runtime's files, created and started.
	out := filepath.Join(loot, "out", "{topic}.raw")
	r := e.do("POST", "/sinks/mine/configs", fileSink("mine", out))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = e.do("POST", "/sinks/mine/restart", "")
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	eventually(t, "mine runs", func() bool { return e.statusOf("sink", "mine") == "running" })

	require.NoFileExists(t, mark)
	require.NoFileExists(t, filepath.Join(loot, "written.txt"))
	require.NoFileExists(t, filepath.Join(conns, "evil.toml"))
	require.NoFileExists(t, filepath.Join(conns, "late.toml"))
}
