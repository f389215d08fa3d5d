package broker

// poll_messages (100, NonReplicated; fact sheet §6.4).
//
// Reply: [partition_id u32][current_offset u64][count u32] then the stored
// batch records, the first and last sliced when the range starts or ends
// inside one (base_offset unchanged). An undecodable body is an empty poll
// of partition 0; a missing stream/topic/partition is status
// 1009/2010/3007. A plain consumer without a partition reads partition 0.
// A group consumer must name a partition (else an empty poll of partition
// 0, as for an unknown group) and pass the fence: its header client id
// owns the partition and it is not pending revocation; otherwise the poll
// is empty with partition_id 0xFFFFFFFF, the resync sentinel.
//
// Start: offset → value; timestamp → first record appended at or after
// value; first → the first stored offset; last → current − (count−1),
// saturating; next → stored offset + 1, or 0. At most count messages and
// at most one frame's worth of bytes (whole records). count 0, an empty
// partition or a start past the current offset give an empty poll. With
// auto_commit the offset of the last message served is stored (never
// moving backwards).

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/ferryhq/ferry/broker/storage"
	"github.com/ferryhq/ferry/iggy/wire"
)

// maxPollPayload keeps a poll reply within one frame.
const maxPollPayload = wire.MaxFrameSize - wire.HeaderSize - 16

func emptyPoll(pid uint32, current uint64) reply {
	return raw(wire.AppendPollReplyHeader(nil, pid, current, 0))
}

// consumerKey keys a consumer's offsets: a group by its numeric id, a
// named single consumer by XXH32 of its name, a numeric one by its id.
func consumerKey(c wire.Consumer, g *group) offsetKey {
	if g != nil {
		return offsetKey{wire.ConsumerGroup, g.id}
	}
	if n, ok := c.ID.Numeric(); ok {
		return offsetKey{wire.ConsumerSingle, n}
	}
	return offsetKey{wire.ConsumerSingle, wire.NamedConsumerID(c.ID.Name())}
}

func handlePoll(b *Broker, r *request) reply {
	var req wire.PollMessages
	if err := wire.DecodeRequest(r.body, &req); err != nil {
		return emptyPoll(0, 0)
	}
	b.mu.RLock()
	s, t := b.lookupTopic(req.Stream, req.Topic)
	var g *group
	var p *partition
	if t != nil {
		if req.Consumer.Kind == wire.ConsumerGroup {
			g = t.groupBy(req.Consumer.ID)
		}
		p = t.partition(req.Partition.ID) // ID is 0 when absent
	}
	b.mu.RUnlock()
	switch {
	case s == nil:
		return status(wire.ErrStreamIDNotFound.Code)
	case t == nil:
		return status(wire.ErrTopicIDNotFound.Code)
	case req.Consumer.Kind == wire.ConsumerGroup && (g == nil || !req.Partition.Set):
		return emptyPoll(0, 0)
	case p == nil:
		return status(wire.ErrPartitionNotFound.Code)
	}
	if g != nil {
		// Held to the end, so a rebalance cannot move the partition between
		// the fence and recording what was served.
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.deleted {
			return emptyPoll(0, 0)
		}
		g.settle(p, time.Now())
		if !g.canPoll(r.h.Client, p.id) {
			cur, _ := p.current()
			return emptyPoll(wire.PollResync, cur)
		}
	}
	key := consumerKey(req.Consumer, g)
	current, nonEmpty := p.current()
	start, ok := pollStart(p, req, key, current)
	if !nonEmpty || !ok || req.Count == 0 || start > current {
		return emptyPoll(p.id, current)
	}
	frame, err := readMessages(p, start, req.Count)
	if err != nil {
		if errors.Is(err, storage.ErrClosed) {
			return status(wire.ErrPartitionNotFound.Code)
		}
		return b.failed("poll", err)
	}
	body := frame[wire.HeaderSize:]
	binary.LittleEndian.PutUint64(body[4:], current)
	body, n, first := trimRecords(body, start)
	binary.LittleEndian.PutUint32(body[12:], n)
	if n > 0 {
		p.topic.traffic.out(n, len(body)-16)
		last := servedEnd(body[16:], first) - 1 // not first+n-1: a compacted range has gaps
		if g != nil {
			if prev, ok := g.polled[p.id]; !ok || prev < last {
				g.polled[p.id] = last
			}
		}
		if req.AutoCommit {
			if err := p.storeOffset(key, last, true); err != nil {
				b.log.Error("auto-commit failed", "partition", p.id, "err", err)
			}
		}
	}
	return reply{body: frame[:wire.HeaderSize+len(body)], framed: true}
}

// pollStart returns the first offset a poll asks for.
func pollStart(p *partition, req wire.PollMessages, key offsetKey, current uint64) (uint64, bool) {
	switch req.Strategy.Kind {
	case wire.PollOffset:
		return req.Strategy.Value, true
	case wire.PollTimestamp:
		return p.log.OffsetAtTime(req.Strategy.Value)
	case wire.PollFirst:
		return p.log.FirstOffset(), true
	case wire.PollLast:
		if req.Count == 0 || current < uint64(req.Count-1) {
			return 0, true
		}
		return current - uint64(req.Count-1), true
	case wire.PollNext:
		if stored, ok := p.getOffset(key); ok {
			return stored + 1, true
		}
		return 0, true
	}
	return 0, false
}

// readMessages reads up to count messages from start into a poll reply
// frame: room for the reply header, then the body (16-byte prefix with
// partition id; the caller fills the rest) and the records. It reads in
// chunks sized by the average message seen so far, so a large count does
// not read much more than one frame can carry.
func readMessages(p *partition, start uint64, count uint32) ([]byte, error) {
	const prefix = wire.HeaderSize + 16
	size := prefix + min(p.log.Span(start, count), maxPollPayload+wire.BatchHeaderSize)
	body := binary.LittleEndian.AppendUint32(make([]byte, wire.HeaderSize, size), p.id)
	body = append(body, make([]byte, 12)...)
	var got uint32
	next := start
	for got < count && len(body)-prefix < maxPollPayload {
		chunk := count - got // all of it when it fits the frame
		if size > prefix+maxPollPayload {
			chunk = min(chunk, 256)
		}
		if got > 0 {
			avg := (len(body)-prefix)/int(got) + 1
			chunk = min(count-got, uint32(max((maxPollPayload-(len(body)-prefix))/avg, 1)))
		}
		at := len(body)
		var n uint32
		var err error
		if body, n, err = p.log.Read(body, next, chunk); err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		got += n
		next = servedEnd(body[at:], next)
	}
	return body, nil
}

// servedEnd is the offset after the last message of records read from
// start. The records may leave gaps between them (a compacted topic), so
// it is the last record's end, not start plus the message count.
func servedEnd(records []byte, start uint64) uint64 {
	end := start
	for len(records) >= wire.BatchHeaderSize {
		h, err := wire.DecodeBatchHeader(records)
		if err != nil || h.Length < wire.BatchHeaderSize || h.Length > uint64(len(records)) {
			break
		}
		end = max(h.BaseOffset, start) + uint64(h.Count)
		records = records[h.Length:]
	}
	return end
}

// firstServed is the offset of the first message of records read from
// start: a record at or after start is whole, one before it was sliced at
// start.
func firstServed(records []byte, start uint64) uint64 {
	if h, err := wire.DecodeBatchHeader(records); err == nil && h.BaseOffset >= start {
		return h.BaseOffset
	}
	return start
}

// trimRecords keeps the whole records of a poll body (16-byte prefix, then
// records) that fit in one frame. It returns the body, the number of
// messages in it and the offset of the first: a record starting at or
// after start is served whole, one starting before it was sliced at start.
func trimRecords(body []byte, start uint64) ([]byte, uint32, uint64) {
	var n uint32
	first := start
	pos := 16
	for i := 0; len(body)-pos >= wire.BatchHeaderSize; i++ {
		h, _ := wire.DecodeBatchHeader(body[pos:])
		if h.Length < wire.BatchHeaderSize || h.Length > uint64(len(body)-pos) {
			break
		}
		if uint64(pos)+h.Length > maxPollPayload+16 {
			break
		}
		if i == 0 {
			first = firstServed(body[pos:], start)
		}
		n += h.Count
		pos += int(h.Length)
	}
	return body[:pos], n, first
}
