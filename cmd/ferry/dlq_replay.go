package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ferryhq/ferry/dlq"
	"github.com/ferryhq/ferry/iggy"
)

func newDLQReplayCmd(c *conn) *cobra.Command {
	var to, from string
	var count, partition uint32
	var offset uint64
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "replay STREAM TOPIC",
		Short: "Send dead-lettered messages again, to the topic they came from or another",
		Long: `Send the dead letters of a dead-letter topic again: each to the stream and
topic it was dead-lettered from (its ferry.dlq.stream and ferry.dlq.topic
headers), or all to --to STREAM/TOPIC, with its payload, its own headers
(the ferry.dlq.* ones removed), its key (so it goes to its key's
partition) and its origin timestamp.

Ids make a replay idempotent: a source's dead letter, which never reached
its topic, keeps its message id; a sink's, whose original is still in the
topic, gets an id made from the dead letter's place (stream, topic,
partition, offset) and its original id, in the header ferry.replay.of, so
a broker that deduplicates by id (ferry run's embedded broker, or Iggy
with message_deduplication) stores each dead letter's replay once, however
often it is replayed. How far replay got is stored as the offset of the
consumer "ferry-dlq-replay" on the dead-letter topic after each batch it
sent, so the next replay goes on from there; --from first starts over.

--partition P --offset N replays that one dead letter alone, and leaves
the stored offset as it is: a later replay still sends the letters before
it that were not replayed (and this one again, under the same id).`,
		Example: `  ferry dlq replay hooks hook-my-first-hook_dead_letter
  ferry dlq replay orders pg_dead_letter --to orders/retry --from 100 --count 10
  ferry dlq replay orders pg_dead_letter --dry-run
  ferry dlq replay orders pg_dead_letter --partition 0 --offset 7`,
		Args: cobra.ExactArgs(2),
	}
	cmd.Flags().StringVar(&to, "to", "", "send every dead letter to this STREAM/TOPIC instead of where it came from")
	cmd.Flags().StringVar(&from, "from", "", `where to start in each partition: "first", or an offset (default: after the last replay)`)
	cmd.Flags().Uint32VarP(&count, "count", "n", 0, "the most messages to replay per partition (default all)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be sent, send nothing")
	cmd.Flags().Uint32Var(&partition, "partition", 0, "with --offset: replay only the dead letter at this partition")
	cmd.Flags().Uint64Var(&offset, "offset", 0, "with --partition: replay only the dead letter at this offset")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var toStream, toTopic string
		if to != "" {
			var ok bool
			if toStream, toTopic, ok = strings.Cut(to, "/"); !ok || toStream == "" || toTopic == "" {
				return usageError{fmt.Errorf("--to %q: want STREAM/TOPIC", to)}
			}
		}
		var fromOffset *uint64
		switch from {
		case "":
		case "first":
			zero := uint64(0)
			fromOffset = &zero
		default:
			n, err := strconv.ParseUint(from, 10, 64)
			if err != nil {
				return usageError{fmt.Errorf(`--from %q: want "first" or an offset`, from)}
			}
			fromOffset = &n
		}
		var one *dlq.Position
		switch {
		case cmd.Flags().Changed("partition") != cmd.Flags().Changed("offset"):
			return usageError{errors.New("--partition and --offset go together: they name the one dead letter to replay")}
		case cmd.Flags().Changed("offset"):
			if from != "" || count != 0 {
				return usageError{errors.New("--partition and --offset replay one dead letter: --from and --count do not apply")}
			}
			one = &dlq.Position{Partition: partition, Offset: offset}
		}
		return c.run(func(ctx context.Context, cl *iggy.Client, out io.Writer, _ []string) error {
			o := dlq.ReplayOptions{Stream: args[0], Topic: args[1], ToStream: toStream, ToTopic: toTopic,
				From: fromOffset, Count: count, DryRun: dryRun, One: one}
			if dryRun {
				o.Sent = func(s dlq.Sent) { fmt.Fprintf(out, "would send %s to %s\n", s.ID, s.To) }
			}
			res, err := dlq.Replay(ctx, cl, o)
			switch {
			case dlq.IsNotFound(err) && res.Replayed == 0:
				p := int64(-1)
				if one != nil {
					p = int64(one.Partition)
				}
				return explainMissing(ctx, cl, args[0], args[1], p, err)
			case errors.Is(err, dlq.ErrNoLetter):
				return fmt.Errorf("--partition %d --offset %d: %w (ferry dlq show %s %s lists the letters)", one.Partition, one.Offset, err, args[0], args[1])
			case errors.Is(err, dlq.ErrNotALetter):
				return fmt.Errorf("%w (--to STREAM/TOPIC)", err)
			case err != nil:
				return err
			}
			return replayReport(out, c.json, args[0], args[1], res)
		})(cmd, args)
	}
	return cmd
}

func replayReport(out io.Writer, asJSON bool, stream, topic string, r dlq.ReplayResult) error {
	if asJSON {
		to := r.To
		if len(to) == 0 {
			to = nil // as before package dlq: "to": null when nothing was sent
		}
		return printJSON(out, map[string]any{"replayed": r.Replayed, "to": to, "dry_run": r.DryRun})
	}
	if r.Replayed == 0 {
		_, err := fmt.Fprintf(out, "nothing to replay in %s/%s\n", stream, topic)
		return err
	}
	dests := make([]string, 0, len(r.To))
	for d := range r.To {
		dests = append(dests, d)
	}
	sort.Strings(dests)
	verb := "replayed"
	if r.DryRun {
		verb = "would replay"
	}
	parts := make([]string, len(dests))
	for i, d := range dests {
		parts[i] = fmt.Sprintf("%d to %s", r.To[d], d)
	}
	_, err := fmt.Fprintf(out, "%s %d message(s) from %s/%s: %s\n", verb, r.Replayed, stream, topic, strings.Join(parts, ", "))
	return err
}
