package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// deriveCLI runs `ferry derive ARGS` against live.
func deriveCLI(t *testing.T, live *liveRuntime) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		t.Helper()
		return runCmd(newRootCmd(), append(append([]string{"derive"}, args...), "--api", live.url, "--api-key", testAPIKey)...)
	}
}

func runCmd(root *cobra.Command, args ...string) (string, error) {
	var out bufWriter
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return string(out), err
}

type bufWriter []byte

func (b *bufWriter) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }

// ferry derive create, view, get, list and delete on a running runtime:
// counts and sums per key of a topic's keyed messages, looked up through
// GET /views/NAME/KEY and read in the output topic.
func TestDeriveCommandsOnARunningRuntime(t *testing.T) {
	t.Parallel()
	live := startLiveRuntime(t, t.TempDir())
	derive := deriveCLI(t, live)
	must := func(args ...string) string {
		t.Helper()
		out, err := derive(args...)
		require.NoError(t, err, "ferry derive %v: %s", args, out)
		return out
	}
	_, err := derive("create", "bad", "--from", "shop/orders", "--to", "shop/per_user", "--agg", "median(x)")
	require.ErrorContains(t, err, "unknown function")
	_, err = derive("create", "bad", "--to", "shop/per_user")
	require.ErrorContains(t, err, "--from")

	out := must("create", "per_user", "--from", "shop/orders", "--to", "shop/per_user", "--agg", "count(*)", "--agg", "sum(amount)",
		"--filter", `status = "paid"`)
	require.Contains(t, out, "derived topic per_user created: count(*), sum(amount) of shop/orders into shop/per_user")
	_, err = derive("create", "per_user", "--from", "shop/orders", "--to", "shop/per_user")
	require.ErrorContains(t, err, "already exists")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := iggy.Dial(ctx, live.rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	var msgs []iggy.Message
	for i := range 30 {
		status := "paid"
		if i%3 == 0 {
			status = "new"
		}
		msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, `{"amount":%d,"status":%q}`, i, status),
			Headers: []header.Header{header.New(iggy.KeyHeader, header.StringValue(fmt.Sprintf("u%d", i%2)))}})
	}
	_, err = cl.SendMessages(ctx, iggy.NamedID("shop"), iggy.NamedID("orders"), iggy.Balanced(), msgs)
	require.NoError(t, err)
	// u0: i even, not divisible by 3: 2 4 8 10 14 16 20 22 26 28.
	want := `{"key":"u0","count":10,"sum_amount":150}`
	waitFor(t, "u0 aggregated", func() bool {
		out, err := derive("view", "per_user", "u0")
		return err == nil && jsonEq(out, want)
	})
	_, err = derive("view", "per_user", "nobody")
	require.ErrorContains(t, err, "no value")

	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(must("get", "per_user", "--json")), &got))
	require.Equal(t, "running", got["status"])
	require.Equal(t, "shop/per_user", got["to"])
	require.Equal(t, []any{"shop/orders"}, got["from"])
	require.Regexp(t, `per_user\s+running\s+shop/orders\s+shop/per_user\s+count\(\*\) sum\(amount\)`, must("list"))

	r, err := cl.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("shop"),
		Topic: iggy.NamedID("per_user"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100})
	require.NoError(t, err)
	last := map[string]string{}
	for _, m := range r.Messages {
		k, ok := m.Key()
		require.True(t, ok)
		last[string(k.Data)] = string(m.Payload)
	}
	require.JSONEq(t, want, last["u0"])

	require.Contains(t, must("delete", "per_user"), "derived topic per_user deleted")
	require.Contains(t, must("list"), "no derived topics")
	_, err = derive("get", "per_user")
	require.ErrorContains(t, err, "does not exist")
}

func jsonEq(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
