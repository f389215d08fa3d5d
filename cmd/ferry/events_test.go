package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/eventtypes"
)

// events runs `ferry events ARGS` in-process (the command is added to
// the root in main.go; here it runs under a root of its own).
func events(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "ferry", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newEventsCmd())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"events"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// eventsDeployment copies eventtypes' sample deployment (two sources,
// two sinks, a hook, four types) to a temporary directory.
func eventsDeployment(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("../../eventtypes/testdata/deploy")))
	return dir
}

func TestEventsList(t *testing.T) {
	dir := eventsDeployment(t)
	cfg := filepath.Join(dir, "config.toml")
	out, err := events(t, "list", "--config", cfg)
	require.NoError(t, err, out)
	require.Contains(t, out, "order.created 1.2.0 (json_schema, "+filepath.Join(dir, "schemas", "order.created.json")+")\n  A customer placed an order\n"+
		"  produced by: source orders (shop/orders)\n  consumed by: sink pg (shop/orders)\n")
	require.Contains(t, out, "order.cancelled 1.0.0 (json_schema")
	require.Contains(t, out, "consumed by: hook hook-notify (shop/orders)")
	require.Contains(t, out, "inventory.adjusted (proto, ")
	require.Contains(t, out, "produced by: topic shop/inventory")

	out, err = events(t, "list", "--config", cfg, "--json")
	require.NoError(t, err, out)
	cat, err := eventtypes.ParseCatalog([]byte(out))
	require.NoError(t, err)
	require.Len(t, cat.Types, 4)

	_, err = events(t, "list")
	require.ErrorContains(t, err, "no configuration: pass --config FILE")
}

func TestEventsCheck(t *testing.T) {
	dir := eventsDeployment(t)
	cfg := filepath.Join(dir, "config.toml")
	out, err := events(t, "check", "--config", cfg)
	require.NoError(t, err, out)
	require.Contains(t, out, "4 event type(s); no earlier catalog to compare with (none recorded in ")

	out, err = events(t, "check", "--config", cfg, "--record")
	require.NoError(t, err, out)
	snap := filepath.Join(dir, "state", "events", "catalog.json")
	require.Contains(t, out, "recorded the catalog in "+snap)
	require.FileExists(t, snap)
	out, err = events(t, "check", "--config", cfg)
	require.NoError(t, err, out)
	require.Contains(t, out, "compared with the catalog recorded in "+snap)

	// A breaking change: customer no longer required, currency loses
	// GBP; and the hook now wants a type nobody produces.
	sch := filepath.Join(dir, "schemas", "order.created.json")
	data, err := os.ReadFile(sch)
	require.NoError(t, err)
	changed := strings.Replace(strings.Replace(string(data), `"required": ["type", "order_id", "customer", "total"]`, `"required": ["type", "order_id", "total"]`, 1),
		`"enum": ["EUR", "USD", "GBP"]`, `"enum": ["EUR", "USD"]`, 1)
	require.NotEqual(t, string(data), changed)
	require.NoError(t, os.WriteFile(sch, []byte(changed), 0o644))
	hook := filepath.Join(dir, "connectors", "hook-notify.toml")
	data, err = os.ReadFile(hook)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(hook, []byte(strings.Replace(string(data), `consumes = ["order.cancelled"]`, `consumes = ["order.cancelled", "payment.settled"]`, 1)), 0o644))

	out, err = events(t, "check", "--config", cfg, "--record")
	require.ErrorContains(t, err, "3 error(s) in the declared event types")
	require.Contains(t, out, "error: payment.settled: hook hook-notify (shop/orders) consumes it, but it is produced only on shop/payments\n")
	require.Contains(t, out, `error: order.created at /customer: the property "customer" was required and is now optional`)
	require.Contains(t, out, `error: order.created at /currency: the enum value "GBP" was removed`)
	require.NotContains(t, out, "recorded the catalog", "a failing check records nothing")

	// --against another deployment's config.toml, and a saved catalog.
	out, err = events(t, "check", "--config", cfg, "--against", "../../eventtypes/testdata/deploy/config.toml")
	require.Error(t, err)
	require.Contains(t, out, "compared with ../../eventtypes/testdata/deploy/config.toml")
	require.Contains(t, out, `the enum value "GBP" was removed`)
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"types":[{"name":"x","format":"xml"}]}`), 0o644))
	_, err = events(t, "check", "--config", cfg, "--against", bad)
	require.ErrorContains(t, err, `--against `+bad+`: types[0] (x): format "xml" is not known`)
}

func TestEventsConfigErrors(t *testing.T) {
	dir := eventsDeployment(t)
	pg := filepath.Join(dir, "connectors", "pg.toml")
	require.NoError(t, os.WriteFile(pg, []byte("type = \"sink\"\nkey = \"pg\"\n[[streams]]\nstream = \"shop\"\ntopics = [\"orders\"]\nconsumes = [\"order.craeted\"]\n"), 0o644))
	out, err := events(t, "check", "--config", filepath.Join(dir, "config.toml"))
	require.Error(t, err)
	require.Contains(t, out, "error: "+pg+`:6: streams[0].consumes[0]: unknown event type "order.craeted"; did you mean "order.created"?`)
	out, err = events(t, "list", "--config", filepath.Join(dir, "config.toml"))
	require.ErrorContains(t, err, "1 problem(s) in the configuration")
	require.Contains(t, out, "order.created 1.2.0")
}
