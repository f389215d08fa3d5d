package runtime

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/internal/tlstest"
)

// [iggy.tls]: a runtime reaches an Iggy server that speaks only TLS,
// verifying its certificate against ca_file for domain, and runs a
// pipeline through it; without the CA it does not start.
func TestIggyOverTLS(t *testing.T) {
	cert := tlstest.SelfSigned(t)
	b := brokertest.Start(t, brokertest.Config(func(c *broker.Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	}))
	runtimeConfig := func(tlsSection string) string {
		return fmt.Sprintf(`
[iggy]
address = %q
create_missing = true
%s
[state]
path = "state"
[connectors]
config_type = "local"
config_dir = "connectors"
[http]
enabled = false
`, b.Addr(), tlsSection)
	}

	e := newEnv(t)
	e.write("config.toml", runtimeConfig(fmt.Sprintf("[iggy.tls]\nenabled = true\nca_file = %q\ndomain = \"localhost\"", cert.CertFile)))
	e.sources["numbers"] = &seqSource{max: 20, batch: 5}
	e.sinks["out"] = &collectSink{}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("out", "type = \"sink\"\nkey = \"out\"\npath = \"collect\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n")
	e.start()
	eventually(t, "20 messages through the TLS server", func() bool { return len(e.sinks["out"].messages()) >= 20 })
	require.Equal(t, seqRange(0, 20), e.sinks["out"].ns(t))

	// Without the CA (the system's roots do not know it), no start.
	bad := newEnv(t)
	bad.write("config.toml", runtimeConfig("[iggy.tls]\nenabled = true\ndomain = \"localhost\""))
	cfg, err := config.Load(filepath.Join(bad.dir, "config.toml"), config.WithEnv(config.MapEnv(nil)))
	require.NoError(t, err)
	rt, err := New(cfg, Options{Registry: bad.reg})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = rt.Start(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), "certificate")
	_ = rt.Stop(context.Background())
}
