package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/ferryhq/ferry/iggy"
	"github.com/spf13/cobra"
)

func newStreamCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{Use: "stream", Short: "Create, list, inspect and delete streams (STREAM is an id or a name)"}
	c.flags(cmd)
	sub := func(use, short string, n int, fn action) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(n), RunE: c.run(fn)}
	}
	cmd.AddCommand(
		sub("create NAME", "Create a stream", 1, func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			s, err := cl.CreateStream(ctx, args[0])
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(out, streamJSON(s.StreamHeader))
			}
			_, err = fmt.Fprintf(out, "stream %q created with id %d\n", s.Name, s.ID)
			return err
		}),
		sub("list", "List streams", 0, func(ctx context.Context, cl *iggy.Client, out io.Writer, _ []string) error {
			streams, err := cl.ListStreams(ctx)
			if err != nil {
				return err
			}
			if c.json {
				js := make([]map[string]any, 0, len(streams))
				for _, s := range streams {
					js = append(js, streamJSON(s))
				}
				return printJSON(out, js)
			}
			rows := make([][]string, 0, len(streams))
			for _, s := range streams {
				rows = append(rows, []string{strconv.Itoa(int(s.ID)), s.Name, strconv.Itoa(int(s.TopicsCount)),
					strconv.FormatUint(s.MessagesCount, 10), strconv.FormatUint(s.SizeBytes, 10), timeUS(s.CreatedAt)})
			}
			return table(out, "ID\tNAME\tTOPICS\tMESSAGES\tSIZE_BYTES\tCREATED", rows)
		}),
		sub("get STREAM", "Show a stream and its topics", 1, func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			s, err := cl.GetStream(ctx, iggy.ParseID(args[0]))
			if err != nil {
				return err
			}
			if c.json {
				js := streamJSON(s.StreamHeader)
				topics := []map[string]any{}
				for _, t := range s.Topics {
					topics = append(topics, topicJSON(t))
				}
				js["topics"] = topics
				return printJSON(out, js)
			}
			fmt.Fprintf(out, "stream %d %q: %d topics, %d messages, %d bytes, created %s\n",
				s.ID, s.Name, s.TopicsCount, s.MessagesCount, s.SizeBytes, timeUS(s.CreatedAt))
			return topicTable(out, s.Topics)
		}),
		sub("update STREAM NAME", "Rename a stream", 2, func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			if err := cl.UpdateStream(ctx, iggy.ParseID(args[0]), args[1]); err != nil {
				return err
			}
			return done(out, c.json, "stream %s renamed to %q", args[0], args[1])
		}),
		sub("purge STREAM", "Delete every message of a stream", 1, func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			if err := cl.PurgeStream(ctx, iggy.ParseID(args[0])); err != nil {
				return err
			}
			return done(out, c.json, "stream %s purged", args[0])
		}),
		sub("delete STREAM", "Delete a stream with all its topics", 1, func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			if err := cl.DeleteStream(ctx, iggy.ParseID(args[0])); err != nil {
				return err
			}
			return done(out, c.json, "stream %s deleted", args[0])
		}),
	)
	return cmd
}

// done prints a one-line result, or {"ok": true, ...} with --json.
func done(out io.Writer, asJSON bool, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if asJSON {
		return printJSON(out, map[string]any{"ok": true, "message": msg})
	}
	_, err := fmt.Fprintln(out, msg)
	return err
}

func streamJSON(s iggy.StreamHeader) map[string]any {
	return map[string]any{"id": s.ID, "name": s.Name, "topics_count": s.TopicsCount,
		"messages_count": s.MessagesCount, "size_bytes": s.SizeBytes, "created_at": timeUS(s.CreatedAt)}
}
