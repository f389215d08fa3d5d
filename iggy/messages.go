package iggy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/ferryhq/ferry/iggy/wire"
)

// MaxPayloadSize is the largest message payload a send accepts, the
// upstream server's limit.
const MaxPayloadSize = 64_000_000

// SendMessages sends msgs as one batch to a partition of stream/topic and
// returns the server's confirmation (the partition written and the batch's
// base offset).
//
// Before sending it fills in, in msgs itself, every zero ID with a UUID
// version 7 and every zero OriginTimestamp with the current time (to the
// µs), so the caller sees what was sent; the send sets each Checksum. It
// checks each payload (1..MaxPayloadSize bytes) and each message's headers
// (see Message.Headers).
//
// Balanced and key partitioning are resolved here, as the Go SDK does: the
// client caches the topic's partition count (from GetTopic, dropped after
// CreatePartitions or DeletePartitions) and sends to an explicit partition,
// keeping its own round-robin cursor per topic, or XXH32(key) % count.
//
// The payloads and headers are copied into the request; msgs may be
// reused once SendMessages returns. A send is at-least-once: after a
// connection failure the batch may or may not have been committed.
// Messages whose origin timestamps span more than MaxTimestampSpread go
// as several batches, one request each, in order (the confirmation is
// the last one's); after an error the batches before the failing one
// are stored.
func (c *Client) SendMessages(ctx context.Context, stream, topic Identifier, p Partitioning, msgs []Message) (SendConfirmation, error) {
	const cmd = wire.CmdSendMessages
	if err := checkIDs(cmd, stream, topic); err != nil {
		return SendConfirmation{}, err
	}
	if err := p.Validate(); err != nil {
		return SendConfirmation{}, fmt.Errorf("iggy: %s: partitioning: %w", cmd, err)
	}
	if err := prepareMessages(msgs); err != nil {
		return SendConfirmation{}, fmt.Errorf("iggy: %s: %w", cmd, err)
	}
	rp, err := c.resolvePartition(ctx, stream, topic, p)
	if err != nil {
		return SendConfirmation{}, err
	}
	var conf SendConfirmation
	for len(msgs) > 0 {
		n := withinTimestampSpread(msgs)
		if conf, err = c.sendBatch(ctx, stream, topic, rp, msgs[:n]); err != nil {
			return SendConfirmation{}, err
		}
		msgs = msgs[n:]
	}
	return conf, nil
}

// MaxTimestampSpread is the most a batch's origin timestamps may differ:
// the protocol gives each message its time as a 32-bit µs delta from the
// batch's earliest (about 71.6 minutes). SendMessages sends messages that
// span more as several batches, in order.
const MaxTimestampSpread = math.MaxUint32 * time.Microsecond

// withinTimestampSpread is how many of msgs, from the first, one batch
// can carry: their origin timestamps within MaxTimestampSpread of each
// other.
func withinTimestampSpread(msgs []Message) int {
	lo, hi := msgs[0].OriginTimestamp.UnixMicro(), msgs[0].OriginTimestamp.UnixMicro()
	for i := 1; i < len(msgs); i++ {
		t := msgs[i].OriginTimestamp.UnixMicro()
		lo, hi = min(lo, t), max(hi, t)
		if hi-lo > math.MaxUint32 {
			return i
		}
	}
	return len(msgs)
}

// sendBatch sends prepared msgs, one batch, to the resolved partition rp.
func (c *Client) sendBatch(ctx context.Context, stream, topic Identifier, rp Partitioning, msgs []Message) (SendConfirmation, error) {
	const cmd = wire.CmdSendMessages
	frames := getWire(len(msgs))
	defer putWire(frames)
	toWire(frames, msgs)
	var conf SendConfirmation
	s := sendState{stream: stream, topic: topic, p: rp, msgs: msgs, frames: frames, conf: &conf}
	err := c.do(ctx, cmd, s.encode, s.decode)
	if err != nil {
		if errorIsAny(err, ErrPartitionNotFound, ErrResourceNotFound) {
			c.parts.invalidate()
		}
		return SendConfirmation{}, err
	}
	return conf, nil
}

// sendState carries one send through encode and decode without closures.
type sendState struct {
	stream, topic Identifier
	p             Partitioning
	msgs          []Message
	frames        []wire.Message // msgs as frames
	conf          *SendConfirmation
}

func (s *sendState) encode(b []byte) ([]byte, error) {
	b, err := wire.AppendSendMessages(b, s.stream, s.topic, s.p, s.frames)
	for i := range s.frames {
		s.msgs[i].Checksum = s.frames[i].Checksum
	}
	return b, err
}

func (s *sendState) decode(p []byte) error {
	if len(p) == 0 {
		return fmt.Errorf("%w: the send reply is empty", wire.ErrInvalidCommand)
	}
	var r wire.SendReply
	if err := wire.Unmarshal(p, &r); err != nil {
		return err
	}
	if len(r) > 0 {
		*s.conf = r[0]
	}
	return nil
}

// prepareMessages validates msgs and fills in zero ids and timestamps.
// Zero ids get UUIDv7s: the first from uuid.NewV7, the rest of the batch
// share its millisecond and sequence fields with fresh random bits, which
// keeps the cost per message to a random number rather than a lock and an
// allocation.
func prepareMessages(msgs []Message) error {
	if len(msgs) == 0 {
		return fmt.Errorf("no messages to send: %w", ErrInvalidMessagesCount)
	}
	now := time.UnixMicro(time.Now().UnixMicro())
	var base uuid.UUID
	for i := range msgs {
		m := &msgs[i]
		switch n := len(m.Payload); {
		case n == 0:
			return fmt.Errorf("message %d: payload is empty: %w", i, ErrEmptyMessagePayload)
		case n > MaxPayloadSize:
			return fmt.Errorf("message %d: payload is %d bytes, limit %d: %w", i, n, MaxPayloadSize, ErrTooBigMessagePayload)
		}
		if len(m.Headers) > 0 {
			if err := CheckHeaders(m.Headers); err != nil {
				return fmt.Errorf("message %d: %w", i, err)
			}
		}
		if m.ID == ([16]byte{}) {
			if base == (uuid.UUID{}) {
				var err error
				if base, err = uuid.NewV7(); err != nil {
					return fmt.Errorf("message %d: minting an id: %w", i, err)
				}
				m.ID = base
			} else {
				m.ID = base
				r := rand.Uint64()
				for j := 8; j < 16; j++ {
					m.ID[j] = byte(r >> (8 * (j - 8)))
				}
				m.ID[8] = m.ID[8]&0x3f | 0x80 // RFC 9562 variant
			}
		}
		if m.OriginTimestamp.IsZero() || m.OriginTimestamp.UnixMicro() == 0 {
			m.OriginTimestamp = now
		}
	}
	return nil
}

// PollRequest says what a poll reads: whose messages, from which partition,
// where to start and how many.
type PollRequest struct {
	// Consumer is who polls: SingleConsumer or ConsumerGroup.
	Consumer Consumer
	// Stream and Topic name the topic read.
	Stream, Topic Identifier
	// Partition is the partition read. A single consumer that gives none
	// (AnyPartition) reads partition 0; a group consumer must name one it
	// owns.
	Partition OptPartition
	// Strategy says where the poll starts: First, Last, Next, AtOffset or
	// AtTimestamp.
	Strategy PollingStrategy
	// Count is the most messages the reply holds.
	Count uint32
	// AutoCommit has the server store the offset of the last message
	// returned as the consumer's offset.
	AutoCommit bool
}

// PollMessages reads up to r.Count messages from a partition for
// r.Consumer, starting where r.Strategy says. A group consumer that names
// a partition it does not own gets a reply whose PartitionID is
// wire.PollResync (0xFFFFFFFF) and that holds no messages.
//
// The messages' payloads and headers alias one buffer owned by the reply.
func (c *Client) PollMessages(ctx context.Context, r PollRequest) (*PollReply, error) {
	const cmd = wire.CmdPollMessages
	if err := checkConsumer(cmd, r.Consumer); err != nil {
		return nil, err
	}
	if err := checkIDs(cmd, r.Stream, r.Topic); err != nil {
		return nil, err
	}
	if r.Strategy.Kind < wire.PollOffset || r.Strategy.Kind > wire.PollNext {
		return nil, fmt.Errorf("iggy: %s: polling strategy kind %d, want 1..5: %w", cmd, r.Strategy.Kind, ErrInvalidCommand)
	}
	req := &wire.PollMessages{Consumer: r.Consumer, Stream: r.Stream, Topic: r.Topic, Partition: r.Partition,
		Strategy: r.Strategy, Count: r.Count, AutoCommit: r.AutoCommit}
	cn, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	reply := &PollReply{}
	err = cn.doOwn(ctx, cmd, encodable(req), func(p []byte) error { return decodePollReply(p, reply) }, true)
	if err != nil {
		return nil, err
	}
	return reply, nil
}

// decodePollReply decodes a poll reply payload that the caller owns; the
// messages alias it. It allocates the message slice, sized from the
// reply's count, and the headers of messages that have them.
func decodePollReply(body []byte, reply *PollReply) error {
	d := wire.NewDecoder(body)
	d.Bytes(12, "poll reply prefix")
	var w wire.PollReply
	if n := d.U32("messages count"); d.Err() == nil && uint64(n)*wire.MessageHeaderSize <= uint64(len(body)) {
		w.Messages = getWire(int(n))[:0]
		defer func() { putWire(w.Messages) }()
	}
	if err := wire.Unmarshal(body, &w); err != nil {
		return err
	}
	reply.PartitionID, reply.CurrentOffset = w.PartitionID, w.CurrentOffset
	reply.Messages = make([]Message, len(w.Messages))
	for i := range w.Messages {
		reply.Messages[i] = fromWire(&w.Messages[i])
	}
	return nil
}

func checkConsumer(cmd wire.Command, c Consumer) error {
	if c.Kind != wire.ConsumerSingle && c.Kind != wire.ConsumerGroup {
		return fmt.Errorf("iggy: %s: consumer kind %d, want single (1) or group (2): %w", cmd, c.Kind, ErrInvalidCommand)
	}
	if err := c.ID.Validate(); err != nil {
		return fmt.Errorf("iggy: %s: consumer id: %w", cmd, err)
	}
	return nil
}

func errorIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// topicKey identifies a topic as the caller named it.
type topicKey struct{ stream, topic Identifier }

// partitionCache holds partition counts for client-side balanced and key
// partitioning, and a round-robin cursor per topic that outlives the
// counts.
type partitionCache struct {
	mu      sync.Mutex
	counts  map[topicKey]uint32
	cursors map[topicKey]*atomic.Uint32
}

func (pc *partitionCache) init() {
	pc.counts = map[topicKey]uint32{}
	pc.cursors = map[topicKey]*atomic.Uint32{}
}

// invalidate drops every cached count; cursors stay.
func (pc *partitionCache) invalidate() {
	pc.mu.Lock()
	clear(pc.counts)
	pc.mu.Unlock()
}

func (pc *partitionCache) get(k topicKey) (uint32, *atomic.Uint32, bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	cur := pc.cursors[k]
	if cur == nil {
		cur = new(atomic.Uint32)
		pc.cursors[k] = cur
	}
	n, ok := pc.counts[k]
	return n, cur, ok
}

func (pc *partitionCache) put(k topicKey, n uint32) {
	pc.mu.Lock()
	pc.counts[k] = n
	pc.mu.Unlock()
}

// partitionsCount returns the cached partition count of a topic, reading
// it with GetTopic on a miss.
func (c *Client) partitionsCount(ctx context.Context, stream, topic Identifier) (uint32, *atomic.Uint32, error) {
	k := topicKey{stream, topic}
	n, cur, ok := c.parts.get(k)
	if ok {
		return n, cur, nil
	}
	t, err := c.GetTopic(ctx, stream, topic)
	if err != nil {
		return 0, nil, err
	}
	c.parts.put(k, t.PartitionsCount)
	return t.PartitionsCount, cur, nil
}

// resolvePartition turns balanced and key partitioning into an explicit
// partition. A user who may send but not read the topic (its partition
// count) gets p back unchanged, for the server to resolve.
func (c *Client) resolvePartition(ctx context.Context, stream, topic Identifier, p Partitioning) (Partitioning, error) {
	if p.Kind == wire.PartitionByID {
		return p, nil
	}
	n, cur, err := c.partitionsCount(ctx, stream, topic)
	if errors.Is(err, ErrUnauthorized) {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	if n == 0 {
		return p, fmt.Errorf("iggy: %s: topic %s has no partitions: %w", wire.CmdSendMessages, topic, wire.ErrNoPartitions)
	}
	if p.Kind == wire.PartitionByMessageKey {
		return ToPartition(wire.PartitionForKey(p.Key, n)), nil
	}
	return ToPartition((cur.Add(1) - 1) % n), nil
}
