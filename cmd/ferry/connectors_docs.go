package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ferryhq/ferry/connector"
	"github.com/spf13/cobra"
)

// The built-in connectors are registered by run.go's import of
// connectors/all; list and describe read connector.Default, so they need
// no running runtime.

// newConnectorsListCmd is `ferry connectors list`.
func newConnectorsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the built-in connectors (no runtime needed)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tKIND\tSUMMARY")
			for _, info := range builtins() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", info.Name, info.Kind, info.Summary)
			}
			return tw.Flush()
		},
	}
}

// newConnectorsDescribeCmd is `ferry connectors describe NAME`.
func newConnectorsDescribeCmd() *cobra.Command {
	var all, markdown bool
	var kind string
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a built-in connector's settings: types, defaults, docs and a sample file (no runtime needed)",
		Long: "Show a built-in connector's plugin_config: each key's type, default, whether it is required or secret,\n" +
			"its documentation, and a sample connector file that loads. NAME may be an upstream library name.\n" +
			"--all --markdown prints the reference docs/connectors.md.",
		Args: func(cmd *cobra.Command, args []string) error {
			if all != (len(args) == 0) || len(args) > 1 {
				return usageError{fmt.Errorf("describe takes one NAME, or --all")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var infos []connector.Info
			if all {
				infos = builtins()
			} else {
				var err error
				if infos, err = findConnector(args[0], kind); err != nil {
					return err
				}
			}
			if markdown {
				return writeReference(cmd.OutOrStdout(), infos, all)
			}
			for i, info := range infos {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				if err := connector.Describe(cmd.OutOrStdout(), info); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every built-in connector")
	cmd.Flags().BoolVar(&markdown, "markdown", false, "Markdown, as docs/connectors.md")
	cmd.Flags().StringVar(&kind, "kind", "", `"source" or "sink", when NAME is both`)
	return cmd
}

// builtins are the registered connectors, sources first, each sorted.
func builtins() []connector.Info {
	return append(connector.Default.List(connector.KindSource), connector.Default.List(connector.KindSink)...)
}

// findConnector finds the connectors NAME names, of kind when not empty.
func findConnector(name, kind string) ([]connector.Info, error) {
	var out []connector.Info
	for _, k := range []connector.Kind{connector.KindSource, connector.KindSink} {
		if kind != "" && string(k) != kind {
			continue
		}
		if info, ok := connector.Default.Lookup(k, name); ok {
			out = append(out, info)
		}
	}
	if len(out) == 0 {
		var names []string
		for _, info := range builtins() {
			names = append(names, info.Name+" ("+string(info.Kind)+")")
		}
		return nil, usageError{fmt.Errorf("no built-in connector is called %q; built in: %s", name, strings.Join(names, ", "))}
	}
	return out, nil
}

// referenceCommand regenerates docs/connectors.md.
const referenceCommand = "go run ./cmd/ferry connectors describe --all --markdown > docs/connectors.md"

// writeReference writes the Markdown reference of infos; whole adds the
// document's title and preface.
func writeReference(w io.Writer, infos []connector.Info, whole bool) error {
	var b bytes.Buffer
	if whole {
		fmt.Fprintf(&b, "# Built-in connectors\n\n"+
			"<!-- Generated from the connectors' specs; do not edit. Regenerate with:\n     %s -->\n\n"+
			"Each connector file names its connector with `path` (the name, or upstream's library name) and sets it up in\n"+
			"`[plugin_config]`. The runtime checks that table against the connector's spec when it loads the file and\n"+
			"reports every problem at once, with the line and key. Durations are written like `\"250ms\"`, `\"5s\"` or\n"+
			"`\"1h 30m\"` (`\"0\"` is zero; an integer is milliseconds); byte sizes like `1048576`, `\"64MiB\"` or `\"1GB\"`.\n"+
			"Secret keys are never echoed in errors and are redacted in API answers. `IGGY_CONNECTORS_<SOURCE|SINK>_<KEY>_PLUGIN_CONFIG_<FIELD>`\n"+
			"sets a key from the environment, checked by the same spec. `ferry connectors describe NAME` prints one section.\n\n",
			referenceCommand)
		for _, info := range infos {
			fmt.Fprintf(&b, "- [%s %s](#%s-%s)\n", info.Name, info.Kind, info.Name, info.Kind)
		}
		b.WriteString("\n")
	}
	for _, info := range infos {
		if err := connector.Markdown(&b, info); err != nil {
			return err
		}
	}
	_, err := w.Write(bytes.TrimRight(b.Bytes(), "\n"))
	if err == nil {
		_, err = io.WriteString(w, "\n")
	}
	return err
}
