package dlq

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/runtime"
)

// replayNamespace names the ids of replayed sink dead letters (UUID v5).
var replayNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://ferry.invalid/dlq-replay"))

// ReplayID is the id of the replay of a sink's dead letter with id, at
// partition and offset of the dead-letter topic stream/topic.
func ReplayID(stream, topic string, partition uint32, offset uint64, id [16]byte) [16]byte {
	return uuid.NewSHA1(replayNamespace, fmt.Appendf(nil, "%s\x00%s\x00%d\x00%d\x00%x", stream, topic, partition, offset, id))
}

// ErrNoLetter is the error of a one-message replay whose letter is not
// in the topic (never written, or expired).
var ErrNoLetter = errors.New("dlq: no dead letter at that partition and offset")

// ErrNotALetter is the error of a replay without ToStream that meets a
// message without the runtime.HeaderDLQStream and HeaderDLQTopic headers.
var ErrNotALetter = errors.New("dlq: not a Ferry dead letter (no ferry.dlq.stream and ferry.dlq.topic headers)")

// ReplayOptions says what [Replay] sends, and where.
type ReplayOptions struct {
	// Stream and Topic are the dead-letter topic.
	Stream, Topic string
	// ToStream and ToTopic, when set, receive every letter; by default
	// each goes back to the stream and topic it was dead-lettered from.
	ToStream, ToTopic string
	// From starts each partition at this offset instead of after the
	// last replay.
	From *uint64
	// Count is the most letters sent per partition (0: all).
	Count uint32
	// DryRun sends nothing and stores no offset; the result says what
	// would have been sent.
	DryRun bool
	// One, when set, replays exactly that letter, and neither reads nor
	// moves the replay offset (From and Count do not apply).
	One *Position
	// Sent, when set, is called for each letter once it was sent (in a
	// dry run: instead of sending it), in order.
	Sent func(Sent)
}

// Position is one message's place in a topic.
type Position struct {
	Partition uint32 `json:"partition"`
	Offset    uint64 `json:"offset"`
}

// Sent is one replayed letter.
type Sent struct {
	Partition uint32 `json:"partition"`
	Offset    uint64 `json:"offset"`
	// ID is the replay's message id, To its STREAM/TOPIC.
	ID string `json:"id"`
	To string `json:"to"`
}

// MaxListed is how many letters a ReplayResult lists at most.
const MaxListed = 1000

// ReplayResult is what [Replay] sent.
type ReplayResult struct {
	// Replayed letters were sent (a broker deduplicating by id may have
	// stored fewer), To counts them per STREAM/TOPIC.
	Replayed int            `json:"replayed"`
	To       map[string]int `json:"to"`
	DryRun   bool           `json:"dry_run"`
	// Messages are the first MaxListed of them; Truncated says there
	// were more.
	Messages  []Sent `json:"messages"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Replay sends the letters of o.Stream/o.Topic again (see the package doc
// for their ids and for progress): each with its payload, its own headers
// (the ferry.dlq.* ones removed), its key (so it goes to its key's
// partition; a letter without one goes to a partition picked from its
// id) and its origin timestamp. Letters are sent a polled batch at
// a time, in order, in runs to one destination and key; then the batch's
// last offset is stored as [ReplayConsumer]'s. On an error, what was sent
// before it is in the result.
func Replay(ctx context.Context, cl *iggy.Client, o ReplayOptions) (ReplayResult, error) {
	if (o.ToStream == "") != (o.ToTopic == "") {
		return ReplayResult{}, fmt.Errorf("dlq: replay to %q/%q: give both the stream and the topic, or neither", o.ToStream, o.ToTopic)
	}
	r := &replay{ctx: ctx, cl: cl, o: o, res: ReplayResult{To: map[string]int{}, DryRun: o.DryRun, Messages: []Sent{}}}
	if o.One != nil {
		return r.res, r.one(*o.One)
	}
	t, err := cl.GetTopic(ctx, iggy.NamedID(o.Stream), iggy.NamedID(o.Topic))
	if err != nil {
		return r.res, fmt.Errorf("dlq: topic %s/%s: %w", o.Stream, o.Topic, err)
	}
	starts := map[uint32]uint64{}
	for _, p := range t.Partitions {
		if o.From != nil {
			starts[p.ID] = *o.From
		} else if starts[p.ID], err = replayStart(ctx, cl, o.Stream, o.Topic, p.ID); err != nil {
			return r.res, err
		}
	}
	err = each(ctx, cl, o.Stream, o.Topic, func(p uint32) uint64 { return starts[p] }, o.Count, r.add, r.flush)
	return r.res, err
}

type replay struct {
	ctx        context.Context
	cl         *iggy.Client
	o          ReplayOptions
	pending    []pending
	res        ReplayResult
	partitions map[string][]uint32 // a destination's partition ids; nil when unknown
}

type pending struct {
	stream, topic string
	msg           iggy.Message
	key           []byte
	// partition is where a letter without a key goes (-1: balanced).
	partition int64
	from      Position
}

// partitionFor picks the partition of a letter without a key from its
// (replay) id, so that every replay of it goes to the same partition:
// brokers deduplicate per partition. When the destination's partitions
// cannot be read, -1: balanced, and the send says what is wrong.
func (r *replay) partitionFor(stream, topic string, id [16]byte) int64 {
	dest := stream + "/" + topic
	ids, ok := r.partitions[dest]
	if !ok {
		if t, err := r.cl.GetTopic(r.ctx, iggy.NamedID(stream), iggy.NamedID(topic)); err == nil {
			for _, p := range t.Partitions {
				ids = append(ids, p.ID)
			}
		}
		if r.partitions == nil {
			r.partitions = map[string][]uint32{}
		}
		r.partitions[dest] = ids
	}
	if len(ids) == 0 {
		return -1
	}
	return int64(ids[binary.BigEndian.Uint32(id[:4])%uint32(len(ids))])
}

// one replays the letter at pos, without touching the replay offset.
func (r *replay) one(pos Position) error {
	reply, err := poll(r.ctx, r.cl, r.o.Stream, r.o.Topic, pos.Partition, pos.Offset, 1)
	if err != nil {
		return err
	}
	if len(reply.Messages) == 0 || reply.Messages[0].Offset != pos.Offset {
		return fmt.Errorf("%s/%s partition %d offset %d: %w", r.o.Stream, r.o.Topic, pos.Partition, pos.Offset, ErrNoLetter)
	}
	if err := r.add(pos.Partition, &reply.Messages[0]); err != nil {
		return err
	}
	return r.send()
}

func (r *replay) add(partition uint32, m *iggy.Message) error {
	stream, topic := r.o.ToStream, r.o.ToTopic
	if stream == "" {
		stream, topic = headerText(m, runtime.HeaderDLQStream), headerText(m, runtime.HeaderDLQTopic)
		if stream == "" || topic == "" {
			return fmt.Errorf("%s/%s partition %d offset %d: %w; give a stream and topic to send it to",
				r.o.Stream, r.o.Topic, partition, m.Offset, ErrNotALetter)
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
		id = ReplayID(r.o.Stream, r.o.Topic, partition, m.Offset, m.ID)
		headers = header.Set(headers, HeaderReplayOf, header.StringValue(uuid.UUID(m.ID).String()))
	}
	var key []byte
	part := int64(-1)
	if k, ok := m.Key(); ok {
		key = k.Data
	} else {
		part = r.partitionFor(stream, topic, id)
	}
	r.pending = append(r.pending, pending{stream: stream, topic: topic, key: key, partition: part, from: Position{partition, m.Offset},
		msg: iggy.Message{ID: id, Payload: m.Payload, Headers: headers, OriginTimestamp: m.OriginTimestamp}})
	return nil
}

// flush sends what add gathered from one polled batch, then stores its
// last offset as the replay consumer's.
func (r *replay) flush(partition uint32, last uint64) error {
	if err := r.send(); err != nil {
		return err
	}
	if r.o.DryRun {
		return nil
	}
	if err := r.cl.StoreConsumerOffset(r.ctx, iggy.SingleConsumer(iggy.NamedID(ReplayConsumer)),
		iggy.NamedID(r.o.Stream), iggy.NamedID(r.o.Topic), iggy.Partition(partition), last); err != nil {
		return fmt.Errorf("dlq: store how far the replay got (%s/%s partition %d offset %d): %w", r.o.Stream, r.o.Topic, partition, last, err)
	}
	return nil
}

// send sends the pending letters, in order, the longest run to one
// destination and key (or partition) at a time.
func (r *replay) send() error {
	for len(r.pending) > 0 {
		first := r.pending[0]
		n := 1
		for n < len(r.pending) && r.pending[n].stream == first.stream && r.pending[n].topic == first.topic &&
			string(r.pending[n].key) == string(first.key) && r.pending[n].partition == first.partition {
			n++
		}
		msgs := make([]iggy.Message, n)
		for i := range msgs {
			msgs[i] = r.pending[i].msg
		}
		p := iggy.Balanced()
		switch {
		case first.key != nil:
			p = iggy.ByKey(first.key)
		case first.partition >= 0:
			p = iggy.ToPartition(uint32(first.partition))
		}
		dest := first.stream + "/" + first.topic
		if !r.o.DryRun {
			if _, err := r.cl.SendMessages(r.ctx, iggy.NamedID(first.stream), iggy.NamedID(first.topic), p, msgs); err != nil {
				return fmt.Errorf("send %d dead letter(s) to %s: %w (replayed up to here; the next replay sends them again)", n, dest, err)
			}
		}
		for _, pm := range r.pending[:n] {
			s := Sent{Partition: pm.from.Partition, Offset: pm.from.Offset, ID: uuid.UUID(pm.msg.ID).String(), To: dest}
			if len(r.res.Messages) < MaxListed {
				r.res.Messages = append(r.res.Messages, s)
			} else {
				r.res.Truncated = true
			}
			if r.o.Sent != nil {
				r.o.Sent(s)
			}
		}
		r.res.To[dest] += n
		r.res.Replayed += n
		r.pending = r.pending[n:]
	}
	return nil
}
