package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/internal/units"
	"github.com/spf13/cobra"
)

func newTopicCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{Use: "topic", Short: "Create, list, inspect and delete topics (STREAM and TOPIC are ids or names)"}
	c.flags(cmd)
	var maxSize, tombstones, segmentSize string
	var compact bool
	var update *cobra.Command
	create := &cobra.Command{
		Use:   "create STREAM TOPIC PARTITIONS COMPRESSION [EXPIRY...]",
		Short: "Create a topic",
		Long: `Create a topic with PARTITIONS partitions and COMPRESSION none or gzip.
EXPIRY is how long messages are kept: a duration such as 1d, "2h 30m" or
15days, or "never" (the default).`,
		Example: "  ferry topic create example_stream example_topic 1 none 1d",
		Args:    cobra.MinimumNArgs(4),
		RunE: c.run(func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			partitions, err := strconv.ParseUint(args[2], 10, 32)
			if err != nil {
				return usageError{fmt.Errorf("PARTITIONS %q is not a number", args[2])}
			}
			opts, err := topicOptions(args[3], strings.Join(args[4:], " "), maxSize)
			if err != nil {
				return err
			}
			if opts, err = compactOptions(opts, compact, tombstones, false); err != nil {
				return err
			}
			if segmentSize != "" {
				n, err := units.ParseSize(segmentSize)
				if err != nil || n < 1<<20 || n > 1<<30 || n%512 != 0 {
					return usageError{fmt.Errorf("--segment-size %q: want a multiple of 512 bytes from 1MiB to 1GiB", segmentSize)}
				}
				opts = append(opts, iggy.TopicSegmentSize(n))
			}
			t, err := cl.CreateTopic(ctx, iggy.ParseID(args[0]), args[1], uint32(partitions), opts...)
			if err != nil {
				return err
			}
			if c.json {
				return printJSON(out, topicJSON(t.TopicHeader))
			}
			_, err = fmt.Fprintf(out, "topic %q created with id %d and %d partitions in stream %s\n", t.Name, t.ID, t.PartitionsCount, args[0])
			return err
		}),
	}
	create.Flags().StringVarP(&maxSize, "max-topic-size", "m", "", `size limit, e.g. "10GB" (default unlimited)`)
	create.Flags().StringVar(&segmentSize, "segment-size", "",
		`size of one segment file, from 1MiB to 1GiB, e.g. "16MiB" (default 1GiB); compaction rewrites only sealed segments`)
	create.Flags().BoolVar(&compact, "compact", false,
		`a compacted topic (a Ferry broker's extension): sealed segments keep the latest message per key (the "key" header), deletion markers ("deleted" = true) for --compact-tombstone-retention, and messages without a key`)
	create.Flags().StringVar(&tombstones, "compact-tombstone-retention", "",
		`how long a compacted topic keeps a deletion marker, e.g. 1d (default: the broker's, 24h for ferry serve)`)

	update = &cobra.Command{
		Use:   "update STREAM TOPIC NAME COMPRESSION [EXPIRY...]",
		Short: "Rename a topic and change its compression, expiry and size limit",
		Args:  cobra.MinimumNArgs(4),
		RunE: c.run(func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			opts, err := topicOptions(args[3], strings.Join(args[4:], " "), maxSize)
			if err != nil {
				return err
			}
			if opts, err = compactOptions(opts, compact, tombstones, update.Flags().Changed("compact")); err != nil {
				return err
			}
			if err := cl.UpdateTopic(ctx, iggy.ParseID(args[0]), iggy.ParseID(args[1]), args[2], opts...); err != nil {
				return err
			}
			return done(out, c.json, "topic %s/%s updated", args[0], args[1])
		}),
	}
	update.Flags().StringVarP(&maxSize, "max-topic-size", "m", "", `size limit, e.g. "10GB" (default unlimited)`)
	update.Flags().BoolVar(&compact, "compact", false, "turn compaction on (--compact) or off (--compact=false); unchanged when not given")
	update.Flags().StringVar(&tombstones, "compact-tombstone-retention", "", "how long a compacted topic keeps a deletion marker, e.g. 1d")

	sub := func(use, short string, n int, fn action) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(n), RunE: c.run(fn)}
	}
	cmd.AddCommand(create, update,
		sub("list STREAM", "List the topics of a stream", 1, func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			topics, err := cl.ListTopics(ctx, iggy.ParseID(args[0]))
			if err != nil {
				return err
			}
			if c.json {
				js := []map[string]any{}
				for _, t := range topics {
					js = append(js, topicJSON(t))
				}
				return printJSON(out, js)
			}
			return topicTable(out, topics)
		}),
		sub("get STREAM TOPIC", "Show a topic and its partitions", 2, func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			t, err := cl.GetTopic(ctx, iggy.ParseID(args[0]), iggy.ParseID(args[1]))
			if err != nil {
				return err
			}
			if c.json {
				js := topicJSON(t.TopicHeader)
				parts := []map[string]any{}
				for _, p := range t.Partitions {
					parts = append(parts, map[string]any{"id": p.ID, "segments_count": p.SegmentsCount,
						"current_offset": p.CurrentOffset, "messages_count": p.MessagesCount, "size_bytes": p.SizeBytes,
						"created_at": timeUS(p.CreatedAt)})
				}
				js["partitions"] = parts
				return printJSON(out, js)
			}
			if err := topicTable(out, []iggy.TopicHeader{t.TopicHeader}); err != nil {
				return err
			}
			fmt.Fprintln(out)
			rows := make([][]string, 0, len(t.Partitions))
			for _, p := range t.Partitions {
				rows = append(rows, []string{strconv.Itoa(int(p.ID)), strconv.FormatUint(p.CurrentOffset, 10),
					strconv.FormatUint(p.MessagesCount, 10), strconv.FormatUint(p.SizeBytes, 10), strconv.Itoa(int(p.SegmentsCount))})
			}
			return table(out, "PARTITION\tCURRENT_OFFSET\tMESSAGES\tSIZE_BYTES\tSEGMENTS", rows)
		}),
		sub("purge STREAM TOPIC", "Delete every message of a topic", 2, func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			if err := cl.PurgeTopic(ctx, iggy.ParseID(args[0]), iggy.ParseID(args[1])); err != nil {
				return err
			}
			return done(out, c.json, "topic %s/%s purged", args[0], args[1])
		}),
		sub("delete STREAM TOPIC", "Delete a topic", 2, func(ctx context.Context, cl *iggy.Client, out io.Writer, args []string) error {
			if err := cl.DeleteTopic(ctx, iggy.ParseID(args[0]), iggy.ParseID(args[1])); err != nil {
				return err
			}
			return done(out, c.json, "topic %s/%s deleted", args[0], args[1])
		}),
	)
	return cmd
}

// compactOptions adds the compaction options: --compact when on (or,
// for an update, when given), --compact-tombstone-retention when given.
func compactOptions(opts []iggy.TopicOption, compact bool, tombstones string, changed bool) ([]iggy.TopicOption, error) {
	if compact || changed {
		opts = append(opts, iggy.TopicCompact(compact))
	}
	if tombstones != "" {
		us, err := units.ParseExpiry(tombstones)
		if err != nil || us == wire.Unlimited {
			return nil, usageError{fmt.Errorf("--compact-tombstone-retention %q: want a duration such as 1d or \"2h 30m\"", tombstones)}
		}
		opts = append(opts, iggy.TopicRawOption(wire.OptCompactTombstoneRetention, wire.Uint64Value(us)))
	}
	return opts, nil
}

// topicOptions turns the CLI's compression, expiry and size arguments into
// topic options, with errors that say what is accepted.
func topicOptions(compression, expiry, maxSize string) ([]iggy.TopicOption, error) {
	var opts []iggy.TopicOption
	switch strings.ToLower(compression) {
	case "none":
		opts = append(opts, iggy.TopicCompression(iggy.CompressionNone))
	case "gzip":
		opts = append(opts, iggy.TopicCompression(iggy.CompressionGzip))
	default:
		return nil, usageError{fmt.Errorf("COMPRESSION %q: use none or gzip", compression)}
	}
	if expiry != "" {
		us, err := units.ParseExpiry(expiry)
		if err != nil {
			return nil, usageError{fmt.Errorf("EXPIRY %q: %v (e.g. 1d, \"2h 30m\", never)", expiry, err)}
		}
		// Microseconds go to the server as they are: no time.Duration
		// overflow for long expiries; 0 ("default") leaves the server's.
		opts = append(opts, iggy.TopicRawOption(wire.OptMessageExpiry, wire.Uint64Value(us)))
	}
	if maxSize != "" {
		n, err := units.ParseSize(maxSize)
		if err != nil {
			return nil, usageError{fmt.Errorf("--max-topic-size %q: %v", maxSize, err)}
		}
		opts = append(opts, iggy.TopicMaxSize(n))
	}
	return opts, nil
}

func expiryString(us uint64) string {
	switch {
	case us == 0 || us == wire.Unlimited:
		return "never"
	case us > math.MaxInt64/uint64(time.Microsecond):
		return fmt.Sprintf("%dd", us/uint64(24*time.Hour/time.Microsecond)) // beyond time.Duration
	}
	return (time.Duration(us) * time.Microsecond).String()
}

func sizeString(n uint64) string {
	if n == 0 || n == wire.Unlimited {
		return "unlimited"
	}
	return strconv.FormatUint(n, 10)
}

func topicJSON(t iggy.TopicHeader) map[string]any {
	m := map[string]any{"id": t.ID, "name": t.Name, "partitions_count": t.PartitionsCount,
		"compression": wire.CompressionName(t.Compression), "message_expiry": expiryString(t.MessageExpiry),
		"max_topic_size": sizeString(t.MaxTopicSize), "messages_count": t.MessagesCount,
		"size_bytes": t.SizeBytes, "created_at": timeUS(t.CreatedAt)}
	if v, ok := wire.Lookup(t.Explicit, wire.OptCompact); ok && v.Bool() {
		m["compact"] = true // only on a compacted topic: other output unchanged
	}
	if v, ok := wire.Lookup(t.Explicit, wire.OptCompactTombstoneRetention); ok && v.Kind == wire.KindUint64 && len(v.Data) == 8 {
		if us := binary.LittleEndian.Uint64(v.Data); us != 0 {
			m["compact_tombstone_retention"] = expiryString(us) // 0 is the broker's default
		}
	}
	return m
}

func topicTable(out io.Writer, topics []iggy.TopicHeader) error {
	rows := make([][]string, 0, len(topics))
	for _, t := range topics {
		rows = append(rows, []string{strconv.Itoa(int(t.ID)), t.Name, strconv.Itoa(int(t.PartitionsCount)),
			wire.CompressionName(t.Compression), expiryString(t.MessageExpiry), sizeString(t.MaxTopicSize),
			strconv.FormatUint(t.MessagesCount, 10), strconv.FormatUint(t.SizeBytes, 10)})
	}
	return table(out, "ID\tNAME\tPARTITIONS\tCOMPRESSION\tEXPIRY\tMAX_SIZE\tMESSAGES\tSIZE_BYTES", rows)
}
