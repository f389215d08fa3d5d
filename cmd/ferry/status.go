package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// runtimeStats is the part of GET /stats the CLI shows.
type runtimeStats struct {
	IggyAddress  string           `json:"iggy_address"`
	IggyEmbedded bool             `json:"iggy_embedded"`
	Connectors   []connectorStats `json:"connectors"`
}

// connectorStats is one connector's counters in GET /stats: sources
// have produced and sent, sinks consumed and processed.
type connectorStats struct {
	Key           string  `json:"key"`
	ConnectorType string  `json:"connector_type"`
	Status        string  `json:"status"`
	Produced      *uint64 `json:"messages_produced"`
	Sent          *uint64 `json:"messages_sent"`
	Consumed      *uint64 `json:"messages_consumed"`
	Processed     *uint64 `json:"messages_processed"`
	Errors        uint64  `json:"errors"`
	DeadLettered  uint64  `json:"messages_dead_lettered"`
	LagTotal      *uint64 `json:"lag_total"`
}

// in and out are the messages a connector took and delivered.
func (s connectorStats) in() uint64 {
	if s.ConnectorType == "source" {
		return deref(s.Produced)
	}
	return deref(s.Consumed)
}

func (s connectorStats) out() uint64 {
	if s.ConnectorType == "source" {
		return deref(s.Sent)
	}
	return deref(s.Processed)
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

func (c *apiClient) stats(ctx context.Context) (*runtimeStats, error) {
	var st runtimeStats
	if err := c.call(ctx, "GET", "/stats", nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// find returns the counters of one connector.
func (st *runtimeStats) find(kind, key string) (connectorStats, bool) {
	for _, c := range st.Connectors {
		if c.ConnectorType == kind && c.Key == key {
			return c, true
		}
	}
	return connectorStats{}, false
}

// statusRow is one line of ferry status.
type statusRow struct {
	Key          string `json:"key"`
	Kind         string `json:"kind"`
	Status       string `json:"status"`
	In           uint64 `json:"messages_in"`
	Out          uint64 `json:"messages_out"`
	Errors       uint64 `json:"errors"`
	DeadLettered uint64 `json:"dead_lettered"`
	// Lag is a sink's messages not committed yet, over its partitions.
	Lag       *uint64 `json:"lag,omitempty"`
	LastError string  `json:"last_error,omitempty"`
}

func newStatusCmd() *cobra.Command {
	f := &apiFlags{}
	var watch time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running runtime's connectors: status, messages in and out, lag, errors, last error",
		Long: `Show each connector of the running runtime (ferry run): its status, the
messages it took in (a source's produced, a sink's consumed) and delivered
(sent to Iggy, written by the sink), a sink's lag (messages its consumer
groups have not committed yet, over all its partitions; per partition in
GET /stats and ferry_sink_lag_messages), its errors, the messages it
dead-lettered, and its last error. Reads the runtime's management API, with
the same credential lookup as ferry hook. --watch 2s shows it again every
2 seconds until Ctrl-C.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			if watch < 0 {
				return fmt.Errorf("--watch %s: want a positive interval such as 2s", watch)
			}
			out := cmd.OutOrStdout()
			for ctx := cmd.Context(); ; {
				if watch > 0 && isTerminal(out) {
					fmt.Fprint(out, "\033[H\033[2J") // clear the screen, as watch(1)
				}
				if err := showStatus(ctx, out, c, f.json); err != nil {
					return err
				}
				if watch == 0 {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(watch):
				}
				if !isTerminal(out) {
					fmt.Fprintln(out)
				}
			}
		},
	}
	f.register(cmd)
	cmd.Flags().DurationVar(&watch, "watch", 0, "show the status again at this interval (e.g. 2s) until Ctrl-C")
	return cmd
}

// showStatus prints one status of the runtime behind c.
func showStatus(ctx context.Context, out io.Writer, c *apiClient, asJSON bool) error {
	st, err := c.stats(ctx)
	if err != nil {
		return err
	}
	var rows []statusRow
	for _, kind := range []string{"source", "sink"} {
		var infos []sinkInfo // the same shape for sources
		if err := c.call(ctx, "GET", "/"+kind+"s", nil, &infos); err != nil {
			return err
		}
		for _, i := range infos {
			s, _ := st.find(kind, i.Key)
			r := statusRow{Key: i.Key, Kind: kind, Status: i.Status, In: s.in(), Out: s.out(), Errors: s.Errors,
				DeadLettered: s.DeadLettered, Lag: s.LagTotal}
			if i.LastError != nil {
				r.LastError = i.LastError.Message
			}
			rows = append(rows, r)
		}
	}
	if asJSON {
		return printJSON(out, map[string]any{"api": c.url, "iggy_address": st.IggyAddress, "connectors": rows})
	}
	return printStatus(out, c.url, st, rows)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func printStatus(w io.Writer, api string, st *runtimeStats, rows []statusRow) error {
	where := "Iggy server " + st.IggyAddress
	if st.IggyEmbedded {
		where = "embedded broker " + st.IggyAddress
	}
	fmt.Fprintf(w, "runtime %s, %s\n\n", api, where)
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no connectors")
		return err
	}
	t := make([][]string, len(rows))
	for i, r := range rows {
		lag := "-"
		if r.Lag != nil {
			lag = strconv.FormatUint(*r.Lag, 10)
		}
		t[i] = []string{r.Key, r.Kind, r.Status, strconv.FormatUint(r.In, 10), strconv.FormatUint(r.Out, 10), lag,
			strconv.FormatUint(r.Errors, 10), strconv.FormatUint(r.DeadLettered, 10), oneLineText(orDash(r.LastError), 120)}
	}
	return table(w, "KEY\tKIND\tSTATUS\tIN\tOUT\tLAG\tERRORS\tDEAD\tLAST ERROR", t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newConnectorsCmd() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{Use: "connectors", Short: "Manage the running runtime's connectors"}
	f.register(cmd)
	var kind string
	restart := &cobra.Command{
		Use:   "restart KEY",
		Short: "Restart one connector: finish its batches in flight, reload its active configuration, start it",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			key := args[0]
			k, err := kindOf(ctx, c, key, kind)
			if err != nil {
				return err
			}
			if err := c.call(ctx, "POST", "/"+k+"s/"+url.PathEscape(key)+"/restart", nil, nil); err != nil {
				return err
			}
			var i sinkInfo
			if err := c.call(ctx, "GET", "/"+k+"s/"+url.PathEscape(key), nil, &i); err != nil {
				return err
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), map[string]any{"key": key, "kind": k, "status": i.Status})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s restarted (status %s)\n", k, key, i.Status)
			return err
		},
	}
	restart.Flags().StringVar(&kind, "kind", "", `"source" or "sink", when both have the key`)
	cmd.AddCommand(restart)
	cmd.AddCommand(newConnectorsListCmd(), newConnectorsDescribeCmd())
	return cmd
}

// kindOf finds whether key is a source or a sink of the runtime.
func kindOf(ctx context.Context, c *apiClient, key, want string) (string, error) {
	switch want {
	case "source", "sink":
		return want, nil
	case "":
	default:
		return "", usageError{fmt.Errorf("--kind %q: want source or sink", want)}
	}
	var found []string
	for _, k := range []string{"source", "sink"} {
		err := c.call(ctx, "GET", "/"+k+"s/"+url.PathEscape(key), nil, nil)
		switch {
		case err == nil:
			found = append(found, k)
		case !isNotFound(err):
			return "", err
		}
	}
	switch len(found) {
	case 0:
		return "", errors.New("no connector " + strconv.Quote(key) + " (ferry status lists them)")
	case 1:
		return found[0], nil
	}
	return "", usageError{fmt.Errorf("both a source and a sink have the key %q: say which with --kind source or --kind sink", key)}
}
