package main

// ferry dlq: the dead-letter topics the runtime writes (runtime's
// HeaderDLQ* headers), read and replayed straight from the Iggy server.

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/runtime"
)

// dlqSuffix ends the name of every dead-letter topic the runtime makes by
// default (<key>_dead_letter).
const dlqSuffix = "_dead_letter"

// replayConsumer is the consumer whose offsets on a dead-letter topic say
// how far ferry dlq replay got.
const replayConsumer = "ferry-dlq-replay"

// HeaderReplayOf is set on a replayed sink dead letter: the id of the
// message it is a copy of.
const HeaderReplayOf = "ferry.replay.of"

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
			streams, err := cl.ListStreams(ctx)
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
			for _, s := range streams {
				if len(args) == 1 && s.Name != args[0] {
					continue
				}
				topics, err := cl.ListTopics(ctx, iggy.NamedID(s.Name))
				if err != nil {
					return err
				}
				for _, t := range topics {
					if strings.HasSuffix(t.Name, dlqSuffix) {
						replayed, err := replayedCount(ctx, cl, s.Name, t.Name)
						if err != nil {
							return err
						}
						rows = append(rows, row{s.Name, t.Name, t.MessagesCount, replayed})
					}
				}
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

// replayedCount is how many messages of a dead-letter topic ferry dlq
// replay has gone past, over its partitions.
func replayedCount(ctx context.Context, cl *iggy.Client, stream, topic string) (uint64, error) {
	t, err := cl.GetTopic(ctx, iggy.NamedID(stream), iggy.NamedID(topic))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, p := range t.Partitions {
		next, err := replayStart(ctx, cl, stream, topic, p.ID)
		if err != nil {
			return 0, err
		}
		n += min(next, p.CurrentOffset+1)
	}
	return n, nil
}

// replayStart is the offset after the last message replay sent from a
// partition (0 when it sent none).
func replayStart(ctx context.Context, cl *iggy.Client, stream, topic string, partition uint32) (uint64, error) {
	off, err := cl.GetConsumerOffset(ctx, iggy.SingleConsumer(iggy.NamedID(replayConsumer)),
		iggy.NamedID(stream), iggy.NamedID(topic), iggy.Partition(partition))
	if errors.Is(err, iggy.ErrConsumerOffsetNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return off.StoredOffset + 1, nil
}

// deadLetter is one dead-lettered message as ferry dlq shows it.
type deadLetter struct {
	Partition uint32 `json:"partition"`
	Offset    uint64 `json:"offset"`
	ID        string `json:"id"`
	Connector string `json:"connector,omitempty"`
	Error     string `json:"error,omitempty"`
	At        string `json:"dead_lettered_at,omitempty"`
	// From is where the message was: stream/topic, with partition and
	// offset for a sink's, the index in its batch for a source's.
	Stream      string  `json:"stream,omitempty"`
	Topic       string  `json:"topic,omitempty"`
	OrigPart    *uint64 `json:"original_partition,omitempty"`
	OrigOffset  *uint64 `json:"original_offset,omitempty"`
	SourceIndex *uint64 `json:"source_index,omitempty"`
	Payload     string  `json:"payload,omitempty"`
	PayloadHex  string  `json:"payload_hex,omitempty"`
}

func describeDeadLetter(partition uint32, m *iggy.Message) deadLetter {
	d := deadLetter{Partition: partition, Offset: m.Offset, ID: idString(m.ID),
		Connector: headerText(m, runtime.HeaderDLQConnector), Error: headerText(m, runtime.HeaderDLQError),
		Stream: headerText(m, runtime.HeaderDLQStream), Topic: headerText(m, runtime.HeaderDLQTopic),
		OrigPart: headerUint(m, runtime.HeaderDLQPartition), OrigOffset: headerUint(m, runtime.HeaderDLQOffset),
		SourceIndex: headerUint(m, runtime.HeaderDLQSourceIndex)}
	if us, err := strconv.ParseInt(headerText(m, runtime.HeaderDLQTimestamp), 10, 64); err == nil {
		d.At = time.UnixMicro(us).UTC().Format(time.RFC3339Nano)
	}
	if utf8.Valid(m.Payload) {
		d.Payload = string(m.Payload)
	} else {
		d.PayloadHex = hex.EncodeToString(m.Payload)
	}
	return d
}

func headerText(m *iggy.Message, name string) string {
	v, ok := header.Get(m.Headers, name)
	if !ok {
		return ""
	}
	if s, ok := v.Text(); ok {
		return s
	}
	return v.String()
}

func headerUint(m *iggy.Message, name string) *uint64 {
	v, ok := header.Get(m.Headers, name)
	if !ok {
		return nil
	}
	var n uint64
	switch {
	case v.Kind == header.KindUint32 && len(v.Data) == 4:
		n = uint64(binary.LittleEndian.Uint32(v.Data))
	case v.Kind == header.KindUint64 && len(v.Data) == 8:
		n = binary.LittleEndian.Uint64(v.Data)
	default:
		return nil
	}
	return &n
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
		var all []deadLetter
		err := eachDeadLetter(ctx, cl, args[0], args[1], func(uint32) uint64 { return offset }, count,
			func(p uint32, m *iggy.Message) error {
				all = append(all, describeDeadLetter(p, m))
				return nil
			}, nil)
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

// eachDeadLetter polls every partition of stream/topic from start(p), at
// most limit messages per partition (0: all), calling fn for each; after
// each polled batch whose messages fn took, done (when given) is called
// with the last offset.
func eachDeadLetter(ctx context.Context, cl *iggy.Client, stream, topic string, start func(uint32) uint64, limit uint32,
	fn func(partition uint32, m *iggy.Message) error, done func(partition uint32, last uint64) error) error {
	t, err := cl.GetTopic(ctx, iggy.NamedID(stream), iggy.NamedID(topic))
	if err != nil {
		return err
	}
	for _, p := range t.Partitions {
		next, seen := start(p.ID), uint32(0)
		for limit == 0 || seen < limit {
			n := uint32(100)
			if limit > 0 {
				n = min(n, limit-seen)
			}
			reply, err := cl.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NamedID(replayConsumer)),
				Stream: iggy.NamedID(stream), Topic: iggy.NamedID(topic), Partition: iggy.Partition(p.ID),
				Strategy: iggy.AtOffset(next), Count: n})
			if err != nil {
				return err
			}
			if len(reply.Messages) == 0 {
				break
			}
			for i := range reply.Messages {
				if err := fn(p.ID, &reply.Messages[i]); err != nil {
					return err
				}
			}
			last := reply.Messages[len(reply.Messages)-1].Offset
			if done != nil {
				if err := done(p.ID, last); err != nil {
					return err
				}
			}
			seen += uint32(len(reply.Messages))
			next = last + 1
		}
	}
	return nil
}
