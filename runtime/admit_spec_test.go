package runtime

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectors/exec"
	"github.com/stretchr/testify/require"
)

// A plugin_config its spec refuses puts the connector in status Error
// before it opens, with every problem of the file in the message; Admit
// (the API's check) reports the same.
func TestPluginConfigCheckedBySpec(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "exec", Spec: exec.Spec, NewSink: exec.New}))
	e.connector("hook", `type = "sink"
key = "hook"
path = "exec"
[[streams]]
stream = "s"
topics = ["t"]
[plugin_config]
command = "true"
timeout = "often"
concurency = 2
`)
	file := filepath.Join(e.dir, "connectors", "hook.toml")
	want := `2 configuration errors:
  ` + file + `:9: plugin_config.timeout: expected a duration such as "5s", "250ms" or "1h 30m", got "often"
  ` + file + `:10: plugin_config.concurency: unknown key; did you mean "concurrency"?`
	rt := e.start()
	var got Info
	eventually(t, "the sink fails", func() bool {
		i, err := rt.Connector(connector.KindSink, "hook")
		got = i
		return err == nil && i.Status == StatusError
	})
	require.Contains(t, got.LastError, want)

	data, err := os.ReadFile(file)
	require.NoError(t, err)
	c, err := config.ParseConnector(file, data, config.WithEnv(config.MapEnv(nil)))
	require.NoError(t, err)
	c.File = file
	require.EqualError(t, rt.Admit(c), want)
}
