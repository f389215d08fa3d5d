package main

// ferry dlq: the dead-letter topics the runtime writes (runtime's
// HeaderDLQ* headers), read and replayed straight from the Iggy server
// (package dlq).

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ferryhq/ferry/dlq"
	"github.com/ferryhq/ferry/iggy"
)

func newDLQCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List, show and replay dead-lettered messages",
		Long: `Dead-lettered messages are in Iggy topics: a connector's "<key>_dead_letter"
in its stream by default (dead_letter_stream and dead_letter_topic choose
others). Each carries the original payload and headers, and ferry.dlq.*
headers saying which connector sent it there, from which stream, topic,
partition and offset, when, and why. These commands read them from the
Iggy server (the same connection flags as ferry message).`,
	}
	c.flags(cmd)
	cmd.AddCommand(newDLQListCmd(c), newDLQShowCmd(c), newDLQReplayCmd(c))
	return cmd
}

func newDLQListCmd(c *conn) *cobra.Command {
	return &cobra.Command{
		Use:   "list [STREAM]",
		Short: "List the dead-letter topics (names ending in _dead_letter) and how many messages each holds",
		Args:  cobra.MaximumNArgs(1),
		RunE: c.run(func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			stream := ""
			if len(args) == 1 {
				stream = args[0]
			}
			topics, err := dlq.Topics(ctx, cl, stream)
			if err != nil {
				return err
			}
			type row struct {
				Stream   string `json:"stream"`
				Topic    string `json:"topic"`
				Messages uint64 `json:"messages"`
				Replayed uint64 `json:"replayed"`
			}
			var rows []row
			for _, t := range topics {
				rows = append(rows, row{t.Stream, t.Topic, t.Messages, t.Replayed})
			}
			if c.json {
				return printJSON(out, rows)
			}
			if len(rows) == 0 {
				_, err := fmt.Fprintln(out, "no dead-letter topics")
				return err
			}
			t := make([][]string, len(rows))
			for i, r := range rows {
				t[i] = []string{r.Stream, r.Topic, strconv.FormatUint(r.Messages, 10), strconv.FormatUint(r.Replayed, 10)}
			}
			return table(out, "STREAM\tTOPIC\tMESSAGES\tREPLAYED", t)
		}),
	}
}

func newDLQShowCmd(c *conn) *cobra.Command {
	var offset uint64
	var count uint32
	cmd := &cobra.Command{
		Use:   "show STREAM TOPIC",
		Short: "Show dead-lettered messages: why, from where, and their payloads",
		Example: `  ferry dlq show hooks hook-my-first-hook_dead_letter
  ferry dlq show orders pg_dead_letter --offset 100 --count 5 --json`,
		Args: cobra.ExactArgs(2),
	}
	cmd.Flags().Uint64Var(&offset, "offset", 0, "the first offset to show, in each partition")
	cmd.Flags().Uint32VarP(&count, "count", "n", 20, "the most messages to show per partition")
	cmd.RunE = c.run(func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
		all, err := dlq.Read(ctx, cl, args[0], args[1], offset, count)
		if err != nil {
			return explainMissing(ctx, cl, args[0], args[1], -1, err)
		}
		if c.json {
			return printJSON(out, all)
		}
		if len(all) == 0 {
			_, err := fmt.Fprintf(out, "no dead letters in %s/%s from offset %d\n", args[0], args[1], offset)
			return err
		}
		for _, d := range all {
			from := d.Stream + "/" + d.Topic
			switch {
			case d.OrigPart != nil && d.OrigOffset != nil:
				from += fmt.Sprintf(" partition %d offset %d", *d.OrigPart, *d.OrigOffset)
			case d.SourceIndex != nil:
				from += fmt.Sprintf(" (message %d of a source batch)", *d.SourceIndex)
			}
			fmt.Fprintf(out, "partition %d offset %d  id %s  %s\n", d.Partition, d.Offset, d.ID, orDash(d.At))
			fmt.Fprintf(out, "  connector: %s\n  from:      %s\n  reason:    %s\n", orDash(d.Connector), from, orDash(d.Error))
			if d.PayloadHex != "" {
				fmt.Fprintf(out, "  payload:   0x%s\n", oneLineText(d.PayloadHex, 200))
			} else {
				fmt.Fprintf(out, "  payload:   %s\n", oneLineText(d.Payload, 200))
			}
		}
		return nil
	})
	return cmd
}
