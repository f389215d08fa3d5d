package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/plugin"
	"github.com/ferryhq/ferry/plugin/host"
)

// newPluginCmd is `ferry plugin`: out-of-process connectors. Importing
// plugin/host also makes `ferry run` resolve plugin paths.
func newPluginCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "plugin", Short: "Out-of-process connectors (docs/plugins.md)"}
	cmd.AddCommand(newPluginDescribeCmd())
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
