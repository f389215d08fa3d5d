package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/host"
	"github.com/ferryhq/ferry/plugin/plugintest"
)

// `ferry plugin test` runs the conformance suite in a child process of
// this executable (see package plugintest); this is where the child
// starts, before the command line is parsed (in the test binary too).
func init() { plugintest.RunChildIfAsked() }

// newPluginCmd is `ferry plugin`: out-of-process connectors. Importing
// plugin/host also makes `ferry run` resolve plugin paths.
func newPluginCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "plugin", Short: "Out-of-process connectors (docs/plugins.md)"}
	cmd.AddCommand(newPluginDescribeCmd(), newPluginTestCmd())
	return cmd
}

// newPluginDescribeCmd is `ferry plugin describe PATH`.
func newPluginDescribeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe PATH",
		Short: "Show a plugin's settings as `ferry connectors describe` does (PATH: a ferry-plugin.toml, its directory or an executable)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, ok, err := host.Find(args[0], "")
			if err != nil {
				return err
			}
			if !ok {
				return usageError{fmt.Errorf("%s: no such file", args[0])}
			}
			d, err := host.Describe(m)
			if err != nil {
				return err
			}
			for i, k := range d.Kinds {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				if k == plugin.KindTransform {
					fmt.Fprintf(cmd.OutOrStdout(), "%s transform: %s\n", d.Name, d.Summary)
					sample := fmt.Sprintf("[transforms.plugin]\npath = %q\n\n[transforms.plugin.config]\n%s", args[0], connector.SampleSettings(d.Spec))
					if err := connector.DescribeTable(cmd.OutOrStdout(), "transforms.plugin.config", d.Spec, sample); err != nil {
						return err
					}
					continue
				}
				info := d.Info(connector.Kind(k))
				if err := connector.Describe(cmd.OutOrStdout(), info); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nplugin: %s, transport %s, call_timeout %s, memory_limit %s\n",
				describeWhere(m), m.Transport, m.Limits.CallTimeout, describeLimit(m.Limits.MemoryLimit))
			return nil
		},
	}
}

func describeWhere(m *plugin.Manifest) string {
	if m.File != "" {
		return m.File
	}
	return m.Command
}

func describeLimit(n int64) string {
	if n <= 0 {
		return "none"
	}
	return fmt.Sprintf("%d bytes", n)
}

// newPluginTestCmd is `ferry plugin test PATH`.
func newPluginTestCmd() *cobra.Command {
	var o plugintest.Options
	var config []string
	var kind string
	cmd := &cobra.Command{
		Use:   "test PATH",
		Short: "Run the connector conformance suite against a plugin, with a crash in the middle of a batch and the replay",
		Long: `Run the connector kit's conformance suite (connectortest) against a plugin
(PATH: a ferry-plugin.toml, its directory or an executable), then kill -9 its
process in the middle of a batch and check the replay.

A sink is checked against what its external system holds: --read CMD prints
the payloads written, one a line, or --read-file PATH is a file of them.
A source needs --add CMD, which adds $1 records (also in $N) to its
external system and prints their payloads, one a line. --config KEY=VALUE
sets plugin_config (VALUE as a TOML value, else as text). See docs/plugins.md.`,
		Example: `  ferry plugin test examples/plugins/shell-sink --config path=/tmp/out.txt --read-file /tmp/out.txt
  ferry plugin test examples/plugins/shell-source --config path=/tmp/in.txt \
    --add 'for i in $(seq $1); do l="line $RANDOM$i"; echo "$l" >>/tmp/in.txt; echo "$l"; done'`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Path, o.Kind = args[0], plugin.Kind(kind)
			o.Config = map[string]any{}
			for _, kv := range config {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || strings.TrimSpace(k) == "" {
					return usageError{fmt.Errorf("--config %q: want KEY=VALUE", kv)}
				}
				o.Config[strings.TrimSpace(k)] = configValue(v)
			}
			err := plugintest.Run(cmd.Context(), o, cmd.OutOrStdout())
			if err != nil && !errors.Is(err, plugintest.ErrFailed) && !strings.Contains(err.Error(), "did not finish") {
				return usageError{err}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&config, "config", nil, "a plugin_config key: KEY=VALUE (repeatable)")
	f.StringVar(&o.Read, "read", "", "sink: a shell command printing the payloads its external system holds, one a line")
	f.StringVar(&o.ReadFile, "read-file", "", "sink: a file holding the payloads written, one a line")
	f.StringVar(&o.Add, "add", "", "source: a shell command adding $1 records and printing their payloads, one a line")
	f.StringVar(&kind, "kind", "", "source or sink, for a plugin that is both")
	f.BoolVar(&o.StableIDs, "stable-ids", false, "source: claim that a record's id is the same when read again")
	f.BoolVar(&o.Idempotent, "idempotent", false, "sink: claim that a batch written twice is written once")
	f.StringVar(&o.Poison, "poison", "", "sink: a payload the sink refuses on its own (checks its per-message failures)")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "also print what passing checks logged")
	return cmd
}

// configValue reads VALUE of --config KEY=VALUE as TOML (42, true,
// "text", [1, 2]) or, when it is not a TOML value, as text.
func configValue(v string) any {
	var m map[string]any
	if _, err := toml.Decode("v = "+v, &m); err == nil {
		return m["v"]
	}
	return v
}
