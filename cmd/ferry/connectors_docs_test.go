package main

import (
	"os"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// docs/connectors.md is what the specs say now.
func TestConnectorsReferenceIsCurrent(t *testing.T) {
	t.Parallel()
	want, err := ferry(t, "", "connectors", "describe", "--all", "--markdown")
	require.NoError(t, err)
	got, err := os.ReadFile("../../docs/connectors.md")
	require.NoError(t, err)
	require.True(t, string(got) == want, "docs/connectors.md is out of date; regenerate it with\n\t%s", referenceCommand)
	for _, info := range builtins() {
		require.Contains(t, want, "## "+info.Name+" "+string(info.Kind), "every built-in has a section")
		for _, a := range info.Aliases {
			require.Contains(t, want, "`"+a+"`", "upstream's library names are listed")
		}
	}
}

// Each connector's sample file loads: the runtime's keys through config,
// plugin_config through the connector's spec.
func TestSamplesLoad(t *testing.T) {
	t.Parallel()
	for _, info := range builtins() {
		sample := connector.Sample(info)
		c, err := config.ParseConnector("sample.toml", []byte(sample), config.WithEnv(config.MapEnv(nil)))
		require.NoError(t, err, "%s %s:\n%s", info.Name, info.Kind, sample)
		require.NoError(t, info.Spec.Check(connector.PluginConfig{Values: c.PluginConfig, Source: "sample.toml",
			Lines: c.PluginConfigLines}), "%s %s:\n%s", info.Name, info.Kind, sample)
	}
}

func TestConnectorsListAndDescribe(t *testing.T) {
	t.Parallel()
	out, err := ferry(t, "", "connectors", "list")
	require.NoError(t, err)
	for _, info := range builtins() {
		require.Contains(t, out, info.Summary)
	}

	out, err = ferry(t, "", "connectors", "describe", "libiggy_connector_http_sink")
	require.NoError(t, err)
	require.Contains(t, out, "http sink: delivers messages")
	require.Contains(t, out, "signing_secret             string (secret)")
	require.Contains(t, out, `timeout                    duration (default "30s")`)
	require.Contains(t, out, `url = "https://example.com/hooks/iggy"`)

	out, err = ferry(t, "", "connectors", "describe", "postgres")
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(out, "sample:"), "the source and the sink")
	out, err = ferry(t, "", "connectors", "describe", "postgres", "--kind", "sink")
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(out, "sample:"))

	_, err = ferry(t, "", "connectors", "describe", "snowflake")
	require.ErrorContains(t, err, `no built-in connector is called "snowflake"; built in: `)
	_, err = ferry(t, "", "connectors", "describe")
	require.ErrorContains(t, err, "one NAME, or --all")
}
