package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/units"
	"github.com/spf13/cobra"
)

// The personal access token commands mirror the Iggy CLI's
// (core/cli/src/args/personal_access_token.rs): create NAME [EXPIRY...],
// list and delete NAME, with the same aliases. Tokens belong to the user
// logged in. Upstream's --store-token (the OS keyring) is not offered.

func newPATCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{Use: "pat", Short: "Create, list and delete the personal access tokens of the user logged in"}
	c.flags(cmd)
	sub := func(use, alias, short string, args cobra.PositionalArgs, fn action) *cobra.Command {
		return &cobra.Command{Use: use, Aliases: []string{alias}, Short: short, Args: args, RunE: c.run(fn)}
	}
	create := sub("create NAME [EXPIRY...]", "c", "Create a personal access token and print it, once", cobra.MinimumNArgs(1),
		func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			expiry, err := parsePATExpiry(strings.Join(args[1:], " "))
			if err != nil {
				return err
			}
			token, err := cl.CreatePAT(ctx, args[0], expiry)
			if err != nil {
				if errors.Is(err, iggy.ErrPATAlreadyExists) {
					return fmt.Errorf("personal access token %q already exists (`ferry pat delete %s` deletes it): %w", args[0], args[0], err)
				}
				return err
			}
			if c.json {
				return printJSON(out, map[string]any{"name": args[0], "token": token, "expiry": patExpiryString(expiry)})
			}
			when := "never expires"
			if expiry != 0 {
				when = "expires in " + patExpiryString(expiry)
			}
			_, err = fmt.Fprintf(out, "personal access token %q created (%s); it is shown only this once:\n%s\n", args[0], when, token)
			return err
		})
	create.Long = `Create a personal access token NAME (3..30 bytes) for the user logged in,
and print it: the server keeps only its hash, so it is shown this once.
Log in with it by --token or $IGGY_TOKEN.

EXPIRY is how long the token is valid: a duration such as 1day, 3weeks or
"15days 2min 2s" (the words may be separate arguments), or none (the
default: it never expires).`
	create.Example = `  ferry pat create deploy
  ferry pat create client 1day
  ferry pat create sensor 15days 2min 2s`

	cmd.AddCommand(create,
		sub("list", "l", "List the tokens of the user logged in", cobra.NoArgs, func(ctx context.Context, cl *iggy.Client, out io.Writer, _ []string) error {
			pats, err := cl.ListPATs(ctx)
			if err != nil {
				return err
			}
			if c.json {
				js := make([]map[string]any, 0, len(pats))
				for _, p := range pats {
					js = append(js, map[string]any{"name": p.Name, "expires_at": patExpiresAt(p.Expiry)})
				}
				return printJSON(out, js)
			}
			rows := make([][]string, 0, len(pats))
			for _, p := range pats {
				rows = append(rows, []string{p.Name, patExpiresAt(p.Expiry)})
			}
			return table(out, "NAME\tEXPIRES", rows)
		}),
		sub("delete NAME", "d", "Delete a token of the user logged in", cobra.ExactArgs(1), func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			if err := cl.DeletePAT(ctx, args[0]); err != nil {
				if errors.Is(err, iggy.ErrResourceNotFound) {
					return fmt.Errorf("personal access token %q not found (`ferry pat list` shows the tokens of the user logged in): %w", args[0], err)
				}
				return err
			}
			return done(out, c.json, "personal access token %q deleted", args[0])
		}),
	)
	return cmd
}

// parsePATExpiry parses EXPIRY as the Iggy CLI does (humantime, several
// parts summed): "" and none, never or unlimited mean never (0).
func parsePATExpiry(s string) (time.Duration, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none", "never", "unlimited":
		return 0, nil
	}
	d, err := units.ParseDuration(s)
	if err != nil {
		return 0, usageError{fmt.Errorf("EXPIRY %q: %v (e.g. 1day, 3weeks, \"15days 2min\", none)", s, err)}
	}
	if d < time.Second {
		return 0, usageError{fmt.Errorf("EXPIRY %q: less than a second (none makes a token that never expires)", s)}
	}
	return d, nil
}

func patExpiryString(d time.Duration) string {
	if d == 0 {
		return "never"
	}
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return units.FormatDuration(d)
}

// patExpiresAt renders a token's expiry time (µs since the epoch; 0 is
// never).
func patExpiresAt(us uint64) string {
	if us == 0 {
		return "never"
	}
	return timeUS(us)
}
