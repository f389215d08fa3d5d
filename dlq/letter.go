package dlq

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/runtime"
)

// Letter is one dead-lettered message, described from its headers.
type Letter struct {
	// Partition and Offset are the letter's place in the dead-letter
	// topic; ID is its message id (UUID text).
	Partition uint32 `json:"partition"`
	Offset    uint64 `json:"offset"`
	ID        string `json:"id"`
	Connector string `json:"connector,omitempty"`
	Error     string `json:"error,omitempty"`
	// At is when it was dead-lettered (RFC 3339, UTC).
	At string `json:"dead_lettered_at,omitempty"`
	// Stream and Topic are where the message was (a sink's) or was for
	// (a source's); a sink's letter has its OrigPart and OrigOffset, a
	// source's its SourceIndex in the polled batch.
	Stream      string  `json:"stream,omitempty"`
	Topic       string  `json:"topic,omitempty"`
	OrigPart    *uint64 `json:"original_partition,omitempty"`
	OrigOffset  *uint64 `json:"original_offset,omitempty"`
	SourceIndex *uint64 `json:"source_index,omitempty"`
	// Payload is the payload when it is UTF-8, else PayloadHex holds it
	// in hexadecimal.
	Payload    string `json:"payload,omitempty"`
	PayloadHex string `json:"payload_hex,omitempty"`
}

// Describe describes m, read from partition of a dead-letter topic. A
// header that is missing or of an unexpected type leaves its field empty.
func Describe(partition uint32, m *iggy.Message) Letter {
	d := Letter{Partition: partition, Offset: m.Offset, ID: uuid.UUID(m.ID).String(),
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

// Read describes the letters of stream/topic from offset from in each
// partition, at most limit per partition (0: all), by partition then
// offset.
func Read(ctx context.Context, cl *iggy.Client, stream, topic string, from uint64, limit uint32) ([]Letter, error) {
	var out []Letter
	err := each(ctx, cl, stream, topic, func(uint32) uint64 { return from }, limit,
		func(p uint32, m *iggy.Message) error {
			out = append(out, Describe(p, m))
			return nil
		}, nil)
	return out, err
}

// ReadNewest describes the newest n letters (n > 0) of each partition of
// t (as [Stat] counted them: letters written since are not read), by
// partition then offset.
func ReadNewest(ctx context.Context, cl *iggy.Client, t Topic, n uint32) ([]Letter, error) {
	starts, ends := map[uint32]uint64{}, map[uint32]uint64{}
	for _, p := range t.Partitions {
		starts[p.Partition] = p.NextOffset - min(p.NextOffset, uint64(n))
		ends[p.Partition] = p.NextOffset
	}
	var out []Letter
	err := each(ctx, cl, t.Stream, t.Topic, func(p uint32) uint64 { return starts[p] }, n,
		func(p uint32, m *iggy.Message) error {
			if m.Offset < ends[p] {
				out = append(out, Describe(p, m))
			}
			return nil
		}, nil)
	return out, err
}

// each polls every partition of stream/topic from start(p), at most limit
// messages per partition (0: all), calling fn for each; after each polled
// batch whose messages fn took, done (when given) is called with the last
// offset. The messages fn gets alias the poll's buffer: valid until done
// returns.
func each(ctx context.Context, cl *iggy.Client, stream, topic string, start func(uint32) uint64, limit uint32,
	fn func(partition uint32, m *iggy.Message) error, done func(partition uint32, last uint64) error) error {
	t, err := cl.GetTopic(ctx, iggy.NamedID(stream), iggy.NamedID(topic))
	if err != nil {
		return fmt.Errorf("dlq: topic %s/%s: %w", stream, topic, err)
	}
	for _, p := range t.Partitions {
		next, seen := start(p.ID), uint32(0)
		for limit == 0 || seen < limit {
			n := uint32(100)
			if limit > 0 {
				n = min(n, limit-seen)
			}
			reply, err := poll(ctx, cl, stream, topic, p.ID, next, n)
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

// poll reads up to n letters of one partition from offset, as
// [ReplayConsumer] and without storing its offset.
func poll(ctx context.Context, cl *iggy.Client, stream, topic string, partition uint32, offset uint64, n uint32) (*iggy.PollReply, error) {
	reply, err := cl.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NamedID(ReplayConsumer)),
		Stream: iggy.NamedID(stream), Topic: iggy.NamedID(topic), Partition: iggy.Partition(partition),
		Strategy: iggy.AtOffset(offset), Count: n})
	if err != nil {
		return nil, fmt.Errorf("dlq: read %s/%s partition %d from offset %d: %w", stream, topic, partition, offset, err)
	}
	return reply, nil
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
