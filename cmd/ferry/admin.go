package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/spf13/cobra"
)

// conn holds the connection flags the admin commands share, in the Iggy
// CLI's shape.
type conn struct {
	address, username, password, token string
	tls                                bool
	tlsCA, tlsDomain                   string
	timeout                            time.Duration
	json                               bool
	who                                string // the user logged in as, for errors; set by dial
}

func (c *conn) flags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	// Defaults that may hold secrets are resolved in dial, not shown here:
	// cobra prints flag defaults in --help.
	f.StringVar(&c.address, "address", "", `server address host:port, or an iggy://user:pass@host:port URL (default $IGGY_ADDRESS, else 127.0.0.1:8090)`)
	f.StringVarP(&c.username, "username", "u", "", "username (default $IGGY_USERNAME, else iggy)")
	f.StringVarP(&c.password, "password", "p", "", "password (default $IGGY_PASSWORD, else iggy)")
	f.StringVar(&c.token, "token", "", "personal access token instead of a password (default $IGGY_TOKEN)")
	f.BoolVar(&c.tls, "tls", false, "connect with TLS")
	f.StringVar(&c.tlsCA, "tls-ca-file", "", "CA certificate file for TLS")
	f.StringVar(&c.tlsDomain, "tls-domain", "", "server name to verify for TLS")
	f.DurationVar(&c.timeout, "timeout", 10*time.Second, "timeout of each request")
	f.BoolVar(&c.json, "json", false, "print JSON for scripts")
}

// orEnv returns the flag value, else the environment variable, else def.
func orEnv(flag, key, def string) string {
	if flag != "" {
		return flag
	}
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return def
}

// dial connects and logs in. Flags given explicitly win over a URL's parts;
// a URL's credentials win over the defaults.
func (c *conn) dial(cmd *cobra.Command) (*iggy.Client, error) {
	address := orEnv(c.address, "IGGY_ADDRESS", "127.0.0.1:8090")
	username := orEnv(c.username, "IGGY_USERNAME", "iggy")
	password := orEnv(c.password, "IGGY_PASSWORD", "iggy")
	token := orEnv(c.token, "IGGY_TOKEN", "")
	var opts []iggy.Option
	isURL := strings.Contains(address, "://")
	_, userSet := os.LookupEnv("IGGY_USERNAME")
	_, passSet := os.LookupEnv("IGGY_PASSWORD")
	c.who = fmt.Sprintf("user %q", username)
	if token != "" {
		c.who = "the owner of the token"
		opts = append(opts, iggy.WithToken(token))
	} else if !isURL || c.username != "" || c.password != "" || userSet || passSet {
		opts = append(opts, iggy.WithCredentials(username, password))
	}
	if c.tls || c.tlsCA != "" {
		opts = append(opts, iggy.WithTLS(c.tlsCA, c.tlsDomain))
	}
	opts = append(opts, iggy.WithRequestTimeout(c.timeout), iggy.WithoutReconnect(), iggy.WithHeartbeat(0),
		iggy.WithSDK("ferry-cli", version))
	ctx, cancel := context.WithTimeout(cmd.Context(), c.timeout)
	defer cancel()
	cl, err := iggy.Dial(ctx, address, opts...)
	if err != nil {
		shown := address
		if u, perr := url.Parse(address); isURL && perr == nil {
			shown = u.Host // never the URL's password
			if c.username == "" && !userSet && u.User != nil {
				username = u.User.Username()
			}
		}
		return nil, explainDial(shown, username, err)
	}
	return cl, nil
}

// action is an admin command's body.
type action func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error

// run dials, calls fn with the command's arguments, and closes.
func (c *conn) run(fn action) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cl, err := c.dial(cmd)
		if err != nil {
			return err
		}
		defer cl.Close()
		return explainDenied(c.who, fn(cmd.Context(), cl, cmd.OutOrStdout(), args))
	}
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows under a header, aligned.
func table(w io.Writer, header string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func timeUS(us uint64) string {
	if us == 0 {
		return "-"
	}
	return time.UnixMicro(int64(us)).UTC().Format(time.RFC3339Nano)
}

func newPingCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{
		Use:   "ping",
		Short: "Log in to an Iggy server and ping it",
		Args:  cobra.NoArgs,
	}
	var count int
	cmd.RunE = c.run(func(ctx context.Context, cl *iggy.Client, out io.Writer, _ []string) error {
		for i := 0; i < count; i++ {
			start := time.Now()
			if err := cl.Ping(ctx); err != nil {
				return err
			}
			rtt := time.Since(start)
			if c.json {
				if err := printJSON(out, map[string]any{"address": cl.Addr(), "rtt_us": rtt.Microseconds()}); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(out, "pong from %s in %s\n", cl.Addr(), rtt.Round(time.Microsecond))
		}
		return nil
	})
	c.flags(cmd)
	cmd.Flags().IntVarP(&count, "count", "n", 1, "pings to send")
	return cmd
}
