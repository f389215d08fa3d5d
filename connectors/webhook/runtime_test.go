package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/stretchr/testify/require"
)

func sourceTOML(addr, extra string) string {
	return fmt.Sprintf(`type = "source"
key = "hooks"
path = "webhook"
[[streams]]
stream = "webhooks"
topic = "events"
schema = "json"
batch_length = 200
linger_time = "2ms"
[plugin_config]
address = %q
%s
[[plugin_config.endpoints]]
path = "/sw"
verify = "standard-webhooks"
secret = %q
[[plugin_config.endpoints]]
path = "/other"
verify = "standard-webhooks"
secret = %q
topic = "other"
`, addr, extra, testSecret, testSecret)
}

// Through the real runtime and the embedded broker: 300 deliveries from
// 12 concurrent senders, each answered 200, each in the topic once with
// its UUID v5 id; an endpoint's topic routes to that topic of the stream.
func TestRuntimeStoresEachDeliveryOnce(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	run := connectortest.Start(t, map[string]string{"hooks.toml": sourceTOML(addr, `forward_headers = ["X-Trace"]`)})
	p := newProvider(t, "http://"+addr+"/sw")
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 300; i += 12 {
				require.True(t, p.deliver(context.Background(), fmt.Sprintf("d-%d", i), []byte(fmt.Sprintf(`{"n":%d}`, i))))
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 300, p.acknowledged())
	// Every 2xx means the message is in Iggy already: no waiting here.
	msgs := run.Messages(t, "webhooks", "events")
	require.Len(t, msgs, 300)
	seen := map[[16]byte]bool{}
	for _, m := range msgs {
		require.False(t, seen[m.ID], "%x twice", m.ID)
		seen[m.ID] = true
	}
	for i := range 300 {
		require.True(t, seen[MessageID("/sw", fmt.Sprintf("d-%d", i))], "delivery %d", i)
	}
	// Retries of stored deliveries add nothing.
	for i := range 20 {
		require.True(t, p.deliver(context.Background(), fmt.Sprintf("d-%d", i), []byte(fmt.Sprintf(`{"n":%d}`, i))))
	}
	require.Len(t, run.Messages(t, "webhooks", "events"), 300)

	other := newProvider(t, "http://"+addr+"/other")
	require.True(t, other.deliver(context.Background(), "o-1", []byte(`{"routed":true}`)))
	routed := run.Messages(t, "webhooks", "other")
	require.Len(t, routed, 1)
	require.Equal(t, `{"routed":true}`, string(routed[0].Payload))
	require.Equal(t, MessageID("/other", "o-1"), routed[0].ID)
}

// Upstream's http source configuration (its config.toml's
// [plugin_config], from apache/iggy core/connectors/sources/http_source)
// loads unchanged and serves its paths.
func TestUpstreamConfigLoads(t *testing.T) {
	t.Parallel()
	const upstream = `
listen_addr = "127.0.0.1:0"
admin_listen_addr = "127.0.0.1:9091"
instance_name = "http_github"
topic_path = "github_events"
auth_bearer_token = "replace_with_secret_token"
management_token = "replace_with_admin_token"
max_body_size_bytes = 1048576
buffer_capacity = 10000
max_batch_size = 500
include_http_metadata = true
forward_headers = ["X-GitHub-Delivery", "X-Request-ID"]

[[endpoints]]
endpoint_id = "a3f8c2e1b9d04f7a8e6c1d2b3a4f5e6d"
auth_type = "hmac-sha256"
auth_secret = "whsec_github_example"
hmac_header = "X-Hub-Signature-256"
hmac_prefix = "sha256="
`
	var values map[string]any
	_, err := toml.Decode(upstream, &values)
	require.NoError(t, err)
	var eps []any // as the runtime's config loader hands tables over
	for _, e := range values["endpoints"].([]map[string]any) {
		eps = append(eps, e)
	}
	values["endpoints"] = eps
	s, err := build(t, values, nil)
	require.NoError(t, err)
	require.NoError(t, s.Open(context.Background(), nil))
	defer s.Close(context.Background())
	got := ackAll(t, s)
	req, _ := http.NewRequest(http.MethodPost, addrURL(s, "/topics/github_events"), strings.NewReader("raw body"))
	req.Header.Set("Authorization", "Bearer replace_with_secret_token")
	st, _ := do(t, req)
	require.Equal(t, 200, st)
	m := <-got
	require.Equal(t, "raw body", string(m.Payload))
	inst, _ := m.Header("iggy_source_instance")
	require.Equal(t, "http_github", inst.String())
	req, _ = http.NewRequest(http.MethodPost, addrURL(s, "/topics/github_events"), strings.NewReader("raw body"))
	st, _ = do(t, req)
	require.Equal(t, 401, st)

	body := `{"zen":"Keep it logically awesome."}`
	req, _ = http.NewRequest(http.MethodPost, addrURL(s, "/e/a3f8c2e1b9d04f7a8e6c1d2b3a4f5e6d"), strings.NewReader(body))
	req.Header.Set("X-Hub-Signature-256", hmacHex("whsec_github_example", body))
	req.Header.Set("X-GitHub-Delivery", "72d3162e")
	st, _ = do(t, req)
	require.Equal(t, 200, st)
	m = <-got
	require.Equal(t, body, string(m.Payload))
	fwd, _ := m.Header("X-GitHub-Delivery")
	require.Equal(t, "72d3162e", fwd.String())
}

// Bad configurations are errors naming the key, never a panic and never
// a secret.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for i, c := range []struct {
		values map[string]any
		env    map[string]string
		want   string
	}{
		{map[string]any{}, nil, "no endpoint"},
		{map[string]any{"endpoints": []any{endpointTable("verify", "none")}}, nil, "needs a path"},
		{map[string]any{"endpoints": []any{endpointTable("path", "x")}}, nil, "path"},
		{map[string]any{"endpoints": []any{endpointTable("path", "/a", "verify", "github")}}, nil, "needs a secret"},
		{map[string]any{"endpoints": []any{endpointTable("path", "/a", "verify", "github", "secret_env", []any{"NOPE"})}}, nil, "NOPE is not set"},
		{map[string]any{"endpoints": []any{endpointTable("path", "/a", "verify", "github", "secret", "${MISSING}")}}, nil, "MISSING is not set"},
		{map[string]any{"endpoints": []any{endpointTable("path", "/a", "verify", "standard-webhooks", "secret", "whsec_%%%hunter2")}}, nil, "not base64"},
		{map[string]any{"endpoints": []any{endpointTable("path", "/a", "stream", "s")}}, nil, "[[streams]]"},
		{map[string]any{"endpoints": []any{endpointTable("path", "/a"), endpointTable("path", "/a")}}, nil, "used twice"},
		{map[string]any{"endpoints": []any{endpointTable("path", "/a", "verify", "github", "secret", "s", "algorithm", "sha1")}}, nil, "verify = \"hmac\""},
		{map[string]any{"endpoints": []any{endpointTable("path", "/a", "verify", "none", "secret", "s")}}, nil, "takes no secret"},
		{map[string]any{"endpoints": []any{endpointTable("path", "/a", "verify", "basic", "secret", "nocolon")}}, nil, "user:password"},
		{map[string]any{"forward_headers": []any{"Authorization"}, "endpoints": []any{endpointTable("path", "/a")}}, nil, "credential"},
		{map[string]any{"address": "nope", "endpoints": []any{endpointTable("path", "/a")}}, nil, "host:port"},
		{map[string]any{"tls_cert_file": "c.pem", "endpoints": []any{endpointTable("path", "/a")}}, nil, "go together"},
		{map[string]any{"dedup_window": "1m", "endpoints": []any{endpointTable("path", "/a", "verify", "stripe", "secret", "s")}}, nil, "longer than dedup_window"},
		{map[string]any{"endpoints": []any{endpointTable("endpoint_id", "XYZ")}}, nil, "32 lowercase hex"},
	} {
		_, err := build(t, c.values, c.env)
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), c.want, "case %d", i)
		require.NotContains(t, err.Error(), "hunter2", "case %d", i)
	}
	// The spec is in the registry, under upstream's name too.
	for _, name := range []string{"webhook", "http_source", "libiggy_connector_http_source"} {
		_, ok := connector.Default.Lookup(connector.KindSource, name)
		require.True(t, ok, name)
	}
}
