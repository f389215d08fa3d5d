package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/webhooksig"
	"github.com/stretchr/testify/require"
)

// webhookCLI runs `ferry webhook ARGS` against the live runtime.
func webhookCLI(t *testing.T, live *liveRuntime, args ...string) (string, error) {
	t.Helper()
	cmd := newWebhookCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(args, "--api", live.url, "--api-key", testAPIKey))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func freeLoopback(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// Not parallel: the runtime reads the secret from this process's
// environment (t.Setenv).
func TestWebhookCommandsOnARunningRuntime(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	t.Setenv("WH_TEST_GH_SECRET", secret)
	live := startLiveRuntime(t, t.TempDir())
	addr := freeLoopback(t)

	out, err := webhookCLI(t, live, "create", "github", "--topic", "gh-events", "--verify", "github", "--secret-env", "WH_TEST_GH_SECRET", "--address", addr)
	require.NoError(t, err, out)
	require.Contains(t, out, "webhook github created")
	require.Contains(t, out, "give the provider this URL: http://"+addr+"/github")
	require.Contains(t, out, "loopback")
	require.NotContains(t, out, secret)

	// A signed delivery to the printed URL is stored before the 200.
	body := []byte(`{"zen":"Design for failure."}`)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/github", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Hub-Signature-256", webhooksig.GitHub.Sign([]byte(secret), body))
	req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	// create returned once the source runs: its listener is open.
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	status := res.StatusCode
	require.Equal(t, 200, status)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := iggy.Dial(ctx, live.rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	got, err := cl.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("webhooks"),
		Topic: iggy.NamedID("gh-events"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	require.Equal(t, string(body), string(got.Messages[0].Payload))

	out, err = webhookCLI(t, live, "get", "github", "--json")
	require.NoError(t, err, out)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	require.Equal(t, "running", v["status"])
	require.Equal(t, "http://"+addr+"/github", v["url"])
	require.Equal(t, "github", v["verify"])
	require.Equal(t, []any{"WH_TEST_GH_SECRET"}, v["secret_env"])
	require.NotContains(t, out, secret)

	out, err = webhookCLI(t, live, "list")
	require.NoError(t, err, out)
	require.Contains(t, out, "github")
	require.Contains(t, out, "webhooks/gh-events")

	// A secret variable the runtime does not have: not created, and the
	// configuration is removed again.
	out, err = webhookCLI(t, live, "create", "broken", "--topic", "t", "--verify", "stripe", "--secret-env", "WH_TEST_UNSET", "--address", freeLoopback(t))
	require.Error(t, err)
	require.Contains(t, err.Error(), "WH_TEST_UNSET")
	_, err = webhookCLI(t, live, "get", "broken")
	require.ErrorContains(t, err, "does not exist")

	// Usage errors before anything is sent.
	for _, args := range [][]string{
		{"create", "x", "--verify", "github", "--secret-env", "A"},
		{"create", "x", "--topic", "t"},
		{"create", "x", "--topic", "t", "--verify", "github"},
		{"create", "x", "--topic", "t", "--verify", "none", "--secret-env", "A"},
		{"create", "x", "--topic", "t", "--verify", "pgp", "--secret-env", "A"},
		{"create", "bad name", "--topic", "t", "--verify", "none"},
	} {
		_, err := webhookCLI(t, live, args...)
		require.Error(t, err, "%v", args)
		var u usageError
		require.ErrorAs(t, err, &u, "%v: %v", args, err)
	}

	out, err = webhookCLI(t, live, "delete", "github")
	require.NoError(t, err, out)
	_, err = webhookCLI(t, live, "get", "github")
	require.ErrorContains(t, err, "does not exist")
}

func TestWebhookURL(t *testing.T) {
	t.Parallel()
	u, hint := webhookURL("https://hooks.example.com", "0.0.0.0:8088", "/gh")
	require.Equal(t, "https://hooks.example.com/gh", u)
	require.Empty(t, hint)
	u, hint = webhookURL("", "0.0.0.0:8088", "/gh")
	require.True(t, strings.HasSuffix(u, ":8088/gh"))
	require.NotEmpty(t, hint)
	u, hint = webhookURL("", "10.1.2.3:9000", "/gh")
	require.Equal(t, "http://10.1.2.3:9000/gh", u)
	require.Empty(t, hint)
}
