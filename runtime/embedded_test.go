package runtime

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/config"
)

// The embedded broker listens where [iggy] embedded_address says; an
// address already taken is an error naming the key, never a silent move
// to another port.
func TestEmbeddedBrokerAddress(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	freeAddr := free.Addr().String()
	require.NoError(t, free.Close())

	start := func(addr string) (*Runtime, error) {
		dir := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), []byte(`
[iggy]
address = "embedded"
embedded_address = "`+addr+`"
[state]
path = "state"
[connectors]
config_dir = "connectors"
[http]
enabled = false
`), 0o644))
		env := config.WithEnv(config.MapEnv(nil))
		cfg, err := config.Load(filepath.Join(dir, "config.toml"), env)
		require.NoError(t, err)
		rt, err := New(cfg, Options{ConfigOptions: []config.Option{env}})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return rt, rt.Start(ctx)
	}

	_, err = start(taken.Addr().String())
	require.Error(t, err)
	require.ErrorContains(t, err, taken.Addr().String()+" is already in use ([iggy] embedded_address, or IGGY_CONNECTORS_IGGY_EMBEDDED_ADDRESS)")

	rt, err := start(freeAddr)
	if err != nil && !strings.Contains(err.Error(), "already in use") { // another test may have taken the port meanwhile
		require.NoError(t, err)
	}
	if err == nil {
		defer rt.Stop(context.Background())
		require.Equal(t, freeAddr, rt.IggyAddress())
	}

	_, err = config.Parse("c.toml", []byte("[iggy]\nembedded_address = \"8090\"\n[connectors]\nconfig_dir = \".\"\n"), config.WithEnv(config.MapEnv(nil)))
	require.ErrorContains(t, err, `c.toml:2: iggy.embedded_address: expected host:port such as "127.0.0.1:8090" ("127.0.0.1:0" for any free port), got "8090"`)
}
