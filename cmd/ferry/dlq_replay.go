package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/runtime"
)

// replayNamespace names the ids of replayed sink dead letters (UUID v5).
var replayNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://ferry.invalid/dlq-replay"))

func newDLQReplayCmd(c *conn) *cobra.Command {
	var to, from string
	var count uint32
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
sent, so the next replay goes on from there; --from first starts over.`,
		Example: `  ferry dlq replay hooks hook-my-first-hook_dead_letter
  ferry dlq replay orders pg_dead_letter --to orders/retry --from 100 --count 10
  ferry dlq replay orders pg_dead_letter --dry-run`,
		Args: cobra.ExactArgs(2),
	}
	cmd.Flags().StringVar(&to, "to", "", "send every dead letter to this STREAM/TOPIC instead of where it came from")
	cmd.Flags().StringVar(&from, "from", "", `where to start in each partition: "first", or an offset (default: after the last replay)`)
	cmd.Flags().Uint32VarP(&count, "count", "n", 0, "the most messages to replay per partition (default all)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be sent, send nothing")
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
		return c.run(func(ctx context.Context, cl *iggy.Client, out io.Writer, _ []string) error {
			r := &replay{ctx: ctx, cl: cl, stream: args[0], topic: args[1], toStream: toStream, toTopic: toTopic, dryRun: dryRun, out: out}
			starts := map[uint32]uint64{}
			t, err := cl.GetTopic(ctx, iggy.NamedID(r.stream), iggy.NamedID(r.topic))
			if err != nil {
				return explainMissing(ctx, cl, r.stream, r.topic, -1, err)
			}
			for _, p := range t.Partitions {
				if fromOffset != nil {
					starts[p.ID] = *fromOffset
				} else if starts[p.ID], err = replayStart(ctx, cl, r.stream, r.topic, p.ID); err != nil {
					return err
				}
			}
			err = eachDeadLetter(ctx, cl, r.stream, r.topic, func(p uint32) uint64 { return starts[p] }, count, r.add, r.flush)
			if err != nil {
				return err
			}
			return r.report(c.json)
		})(cmd, args)
	}
	return cmd
}

// replay sends the dead letters of one topic again, a polled batch at a
// time: grouped by destination, in order, then the batch's last offset is
// stored.
type replay struct {
	ctx               context.Context // the command's: every send and offset store
	cl                *iggy.Client
	stream, topic     string
	toStream, toTopic string
	dryRun            bool
	out               io.Writer
	pending           []replayed
	sent              map[string]int // per destination stream/topic
	total             int
}

type replayed struct {
	stream, topic string
	msg           iggy.Message
	key           []byte
}

func (r *replay) add(partition uint32, m *iggy.Message) error {
	stream, topic := r.toStream, r.toTopic
	if stream == "" {
		stream, topic = headerText(m, runtime.HeaderDLQStream), headerText(m, runtime.HeaderDLQTopic)
		if stream == "" || topic == "" {
			return fmt.Errorf("%s/%s partition %d offset %d has no %s and %s headers: not a Ferry dead letter; give --to STREAM/TOPIC",
				r.stream, r.topic, partition, m.Offset, runtime.HeaderDLQStream, runtime.HeaderDLQTopic)
		}
	}
	var headers []header.Header
	for _, h := range m.Headers {
		if h.Key.Kind == header.KindString && strings.HasPrefix(string(h.Key.Data), "ferry.dlq.") {
			continue
		}
		headers = append(headers, h)
	}
	id := m.ID
	if headerUint(m, runtime.HeaderDLQSourceIndex) == nil { // a sink's: the original is in its topic
		id = uuid.NewSHA1(replayNamespace, fmt.Appendf(nil, "%s\x00%s\x00%d\x00%d\x00%x", r.stream, r.topic, partition, m.Offset, m.ID))
		headers = header.Set(headers, HeaderReplayOf, header.StringValue(idString(m.ID)))
	}
	var key []byte
	if k, ok := m.Key(); ok {
		key = k.Data
	}
	r.pending = append(r.pending, replayed{stream: stream, topic: topic, key: key,
		msg: iggy.Message{ID: id, Payload: m.Payload, Headers: headers, OriginTimestamp: m.OriginTimestamp}})
	return nil
}

// flush sends what add gathered from one polled batch, then stores its
// last offset as the replay consumer's.
func (r *replay) flush(partition uint32, last uint64) error {
	ctx := r.ctx
	if r.sent == nil {
		r.sent = map[string]int{}
	}
	for len(r.pending) > 0 {
		// The longest run to one destination and key, in order.
		first := r.pending[0]
		n := 1
		for n < len(r.pending) && r.pending[n].stream == first.stream && r.pending[n].topic == first.topic &&
			string(r.pending[n].key) == string(first.key) {
			n++
		}
		msgs := make([]iggy.Message, n)
		for i := range msgs {
			msgs[i] = r.pending[i].msg
		}
		p := iggy.Balanced()
		if first.key != nil {
			p = iggy.ByKey(first.key)
		}
		dest := first.stream + "/" + first.topic
		if r.dryRun {
			for _, m := range msgs {
				fmt.Fprintf(r.out, "would send %s to %s\n", idString(m.ID), dest)
			}
		} else if _, err := r.cl.SendMessages(ctx, iggy.NamedID(first.stream), iggy.NamedID(first.topic), p, msgs); err != nil {
			return fmt.Errorf("send %d dead letter(s) to %s: %w (replayed up to here; the next replay sends them again)", n, dest, err)
		}
		r.sent[dest] += n
		r.total += n
		r.pending = r.pending[n:]
	}
	if r.dryRun {
		return nil
	}
	if err := r.cl.StoreConsumerOffset(ctx, iggy.SingleConsumer(iggy.NamedID(replayConsumer)),
		iggy.NamedID(r.stream), iggy.NamedID(r.topic), iggy.Partition(partition), last); err != nil {
		return fmt.Errorf("store how far the replay got (partition %d offset %d): %w", partition, last, err)
	}
	return nil
}

func (r *replay) report(asJSON bool) error {
	if asJSON {
		return printJSON(r.out, map[string]any{"replayed": r.total, "to": r.sent, "dry_run": r.dryRun})
	}
	if r.total == 0 {
		_, err := fmt.Fprintf(r.out, "nothing to replay in %s/%s\n", r.stream, r.topic)
		return err
	}
	dests := make([]string, 0, len(r.sent))
	for d := range r.sent {
		dests = append(dests, d)
	}
	sort.Strings(dests)
	verb := "replayed"
	if r.dryRun {
		verb = "would replay"
	}
	parts := make([]string, len(dests))
	for i, d := range dests {
		parts[i] = fmt.Sprintf("%d to %s", r.sent[d], d)
	}
	_, err := fmt.Fprintf(r.out, "%s %d message(s) from %s/%s: %s\n", verb, r.total, r.stream, r.topic, strings.Join(parts, ", "))
	return err
}
