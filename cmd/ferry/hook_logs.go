package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/ferryhq/ferry/connectors/exec"
	"github.com/spf13/cobra"
)

// hookActivity is GET /sinks/hook-NAME/activity of an exec sink.
type hookActivity struct {
	Key      string     `json:"key"`
	Activity []exec.Run `json:"activity"`
}

func newHookLogsCmd(f *apiFlags) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Show a hook's recent runs: offset, exit code, duration and the start of their output",
		Long: `Shows the last runs of a hook's command (up to 100 are kept in the running
runtime, newest last): the message's partition and offset, when it ran, how
long, the exit code (-1 when it was killed or could not start), the error
and the start of its standard output and error (2 KiB of each at most).
The record starts again when the hook or the runtime restarts.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if limit < 1 {
				return usageError{fmt.Errorf("--limit %d: want 1 or more", limit)}
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			if err := checkHookName(args[0]); err != nil {
				return err
			}
			runs, err := hookRuns(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			if len(runs) > limit {
				runs = runs[len(runs)-limit:]
			}
			if f.json {
				return printJSON(cmd.OutOrStdout(), runs)
			}
			if len(runs) == 0 {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "hook %s has not run a command since it started\n", args[0])
				return err
			}
			rows := make([][]string, 0, len(runs))
			for _, r := range runs {
				out := r.Error
				if out == "" {
					out = r.Stdout
				}
				if out == "" {
					out = r.Stderr
				}
				rows = append(rows, []string{r.Started.Local().Format(time.DateTime), strconv.FormatUint(uint64(r.Partition), 10),
					strconv.FormatUint(r.Offset, 10), strconv.Itoa(r.ExitCode),
					(time.Duration(r.DurationMicros) * time.Microsecond).Round(time.Millisecond / 10).String(), oneLineText(out, 100)})
			}
			return table(cmd.OutOrStdout(), "STARTED\tPARTITION\tOFFSET\tEXIT\tDURATION\tOUTPUT", rows)
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "show at most this many runs, the newest")
	return cmd
}

// hookRuns reads a hook's recent runs from the runtime.
func hookRuns(ctx context.Context, c *apiClient, name string) ([]exec.Run, error) {
	h, err := getHook(ctx, c, name)
	if err != nil {
		return nil, err
	}
	if h.URL != "" {
		return nil, fmt.Errorf("hook %s sends to %s and keeps no run log: its last error (ferry hook get %s) and its dead-letter topic %s say what failed", name, h.URL, name, h.DeadLetter)
	}
	var a hookActivity
	err = c.call(ctx, "GET", "/sinks/"+url.PathEscape(hookKey(name))+"/activity", nil, &a)
	if isNotFound(err) {
		return nil, errors.New("hook " + name + " is not running, so it has no recent runs (ferry hook get " + name + " says why)")
	}
	return a.Activity, err
}
