package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker/brokertest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestRunEmbedded(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run(testCtx(t), &out, nil))
	require.Equal(t, `using an embedded broker
products-v1.csv: sent 3 changed rows and 0 deletions (0 unchanged)
products-v2.csv: sent 2 changed rows and 1 deletions (1 unchanged)
live-example/products as a map (3 keys):
  A1  {"name":"Anchor","price":"12.50"}
  B2  {"name":"Buoy","price":"27.50"}
  D4  {"name":"Deck shoes","price":"60.00"}
`, out.String())
}

// TestRunAgainstServer: against a server that outlives the program, a
// second run sends only what changed since the first.
func TestRunAgainstServer(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	dir := t.TempDir()
	addr := "iggy://iggy:iggy@" + b.Addr()
	state := filepath.Join(dir, "state.json")
	csv := filepath.Join(dir, "p.csv")
	require.NoError(t, os.WriteFile(csv, []byte("sku,name\nA1,Anchor\nB2,Buoy\n"), 0o600))

	var out bytes.Buffer
	require.NoError(t, run(testCtx(t), &out, []string{"-addr", addr, "-state", state, csv}))
	require.Contains(t, out.String(), "p.csv: sent 2 changed rows and 0 deletions (0 unchanged)")

	require.NoError(t, os.WriteFile(csv, []byte("sku,name\nA1,Anchor\n"), 0o600))
	out.Reset()
	require.NoError(t, run(testCtx(t), &out, []string{"-addr", addr, "-state", state, csv}))
	require.Equal(t, `p.csv: sent 0 changed rows and 1 deletions (1 unchanged)
live-example/products as a map (1 keys):
  A1  {"name":"Anchor"}
`, out.String())

	require.NoError(t, os.WriteFile(csv, []byte("sku,name\n,nameless\n"), 0o600))
	err := run(testCtx(t), &out, []string{"-addr", addr, "-state", state, csv})
	require.ErrorContains(t, err, "empty key")
}
