package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	osexec "os/exec"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/ferryhq/ferry/api"
	"github.com/ferryhq/ferry/console"
)

func newUICmd() *cobra.Command {
	f := &apiFlags{}
	var noOpen bool
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Open the web console of the running runtime (prints a one-time login link)",
		Long: `Asks the running runtime (ferry run) for a login link to its web console at
/ui and prints it; where a desktop is there, it opens it in the browser too.
The link works once, for 5 minutes: opening it logs the browser in with a
session cookie, so no key is ever typed into a page. The runtime's
credential is found as for ferry hook and ferry status ([http] api_key, or
the local token only the user running the runtime can read). Sessions end
after 8 hours without use, after 7 days, on "Log out", and when the runtime
restarts; run ferry ui again then.

The console shows the connectors (status, throughput, lag, last error), the
messages each dead-lettered and why (with replay), the hooks (create,
delete, recent runs), configuration versions (edit, activate, restart) and
the Iggy server's streams and topics.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			var link console.Link
			if err := c.call(cmd.Context(), "POST", api.LoginLinksPath, nil, &link); err != nil {
				return fmt.Errorf("ask the runtime for a console login link: %w", err)
			}
			// The link goes to the address this command reached, not one
			// the answer names.
			u := c.url + console.LoginPath + "?" + url.Values{"token": {link.Token}}.Encode()
			if f.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"url": u, "expires_at": link.ExpiresAt})
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Ferry console: open this link (it works once, until %s):\n\n    %s\n\n",
				link.ExpiresAt.Local().Format(time.TimeOnly), u)
			if noOpen {
				return nil
			}
			if opener := browserOpener(); opener != "" {
				if err := openBrowser(cmd.Context(), opener, u); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "could not open a browser (%v): open the link yourself\n", err)
				}
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&noOpen, "no-open", false, "print the link only; do not open a browser")
	return cmd
}

// browserOpener is the program that opens a URL in the user's browser, or
// "" when there is no desktop to open it on (a server, an SSH session).
func browserOpener() string {
	switch runtime.GOOS {
	case "darwin":
		return "open"
	case "windows":
		return "rundll32"
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return ""
	}
	if p, err := osexec.LookPath("xdg-open"); err == nil {
		return p
	}
	return ""
}

// openBrowser starts opener on u as one argument (never through a shell)
// and does not wait for the browser.
func openBrowser(ctx context.Context, opener, u string) error {
	args := []string{u}
	if opener == "rundll32" {
		args = []string{"url.dll,FileProtocolHandler", u}
	}
	cmd := osexec.CommandContext(context.WithoutCancel(ctx), opener, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
