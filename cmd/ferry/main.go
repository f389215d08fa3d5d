// Command ferry is Ferry's one binary: the connector runtime (run), the
// embedded Iggy-compatible broker (serve), and admin commands that work
// against any Iggy-protocol server (stream, topic, message, ping).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
)

// version, commit and commitDate may be set at build time with -ldflags
// "-X main.version=..."; commit and commitDate default to what the Go
// toolchain stamped (see versionLine).
var (
	version    = "0.1.0-dev"
	commit     = ""
	commitDate = ""
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "ferry:", oneLine(err))
		os.Exit(exitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "ferry",
		Short:         "Move data in and out of Apache Iggy",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(
		newVersionCmd(),
		newServeCmd(),
		newRunCmd(),
		newPingCmd(),
		newStreamCmd(),
		newTopicCmd(),
		newMessageCmd(),
		newUserCmd(), newPATCmd(),
		newHookCmd(),
		newWebhookCmd(),
		newDeriveCmd(),
		newStatusCmd(),
		newDLQCmd(),
		newUICmd(),
		newConnectorsCmd(),
		newBenchCmd(),
		newPluginCmd(),
		newTransformCmd(),
		newEventsCmd(),
	)
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Ferry's version, commit and build date",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), versionLine())
		},
	}
}

// versionLine is "ferry VERSION (commit C from DATE[, modified], goX)":
// the commit and its date come from what the Go toolchain stamps into a
// binary built in a git checkout (go build, go install and go run do
// unless -buildvcs=false), or from -ldflags "-X main.commit=... -X
// main.commitDate=...".
func versionLine() string {
	c, date, modified := commit, commitDate, false
	gover := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		gover = bi.GoVersion
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && c == "":
				c = s.Value
			case s.Key == "vcs.time" && date == "":
				date = s.Value
			case s.Key == "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if c == "" {
		return fmt.Sprintf("ferry %s (commit unknown: built without VCS stamping, see go build -buildvcs; %s)", version, gover)
	}
	if len(c) > 12 {
		c = c[:12]
	}
	if date != "" {
		c += " from " + date
	}
	if modified {
		c += ", modified"
	}
	return fmt.Sprintf("ferry %s (commit %s; %s)", version, c, gover)
}

// usageError marks errors in how the command was called (exit code 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// oneLine keeps an error message on one line for scripts and people.
func oneLine(err error) string {
	b := []byte(err.Error())
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
