package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/webhooksig"
	"github.com/stretchr/testify/require"
)

// TestRuntimeChild is the runtime process the kill test kills.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// testSecret is the Standard Webhooks secret of the tests' endpoints.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func testKey(t testing.TB) []byte {
	k, err := webhooksig.ParseSecret(testSecret)
	require.NoError(t, err)
	return k
}

// freeAddr is a loopback address nothing listens on (for a source that
// must keep its address across restarts).
func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// endpointTable is one [[plugin_config.endpoints]] as TOML decodes it.
func endpointTable(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// build makes a source from plugin_config values.
func build(t testing.TB, values map[string]any, env map[string]string) (*Source, error) {
	return newSource(connector.Config{Key: "hooks", Plugin: connector.PluginConfig{Values: values, Source: "webhook.toml"}},
		func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

// open builds and opens a source on a free port; it is closed when the
// test ends.
func open(t testing.TB, values map[string]any, env map[string]string) *Source {
	t.Helper()
	if values["address"] == nil {
		values["address"] = "127.0.0.1:0"
	}
	s, err := build(t, values, env)
	require.NoError(t, err)
	require.NoError(t, s.Open(context.Background(), nil))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// standardValues is a source with one Standard Webhooks endpoint /sw.
func standardValues(extra ...any) map[string]any {
	v := map[string]any{"endpoints": []any{endpointTable("path", "/sw", "verify", "standard-webhooks", "secret_env", []any{"SW_SECRET"})}}
	for i := 0; i < len(extra); i += 2 {
		v[extra[i].(string)] = extra[i+1]
	}
	return v
}

var standardEnv = map[string]string{"SW_SECRET": testSecret}

// signedRequest is a Standard Webhooks delivery of body with id.
func signedRequest(t testing.TB, url, id string, body []byte, at time.Time) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	webhooksig.SetStandardHeaders(req.Header, [][]byte{testKey(t)}, id, at, body)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// do sends req and returns its status and Retry-After.
func do(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	return res.StatusCode, res.Header.Get("Retry-After")
}

// ackAll polls s and acknowledges each batch, as the runtime does, until
// the test ends; got receives the messages.
func ackAll(t testing.TB, s *Source) <-chan connector.Message {
	got := make(chan connector.Message, 100000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for {
			b, err := s.Poll(ctx)
			if err != nil {
				return
			}
			for _, m := range b.Messages {
				got <- m
			}
			_ = s.Ack(ctx, b)
		}
	}()
	return got
}

func addrURL(s *Source, path string) string { return "http://" + s.Addr().String() + path }

func itoa(i int) string { return strconv.Itoa(i) }

// hmacHex is "sha256=" + hex HMAC-SHA256, computed here, not with
// webhooksig.
func hmacHex(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
