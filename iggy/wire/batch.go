package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zeebo/xxh3"
)

// Batch layout sizes.
const (
	BatchHeaderSize   = 256
	MessageHeaderSize = 48
	// batchSumPrefix is the header bytes the batch checksum covers:
	// partition_id, base_offset, base_timestamp, origin_timestamp,
	// batch_length (5 × u64) and message_count (u32).
	batchSumPrefix = 44
)

// Message is one message as a producer builds it and a consumer reads it.
// Decoders alias Headers and Payload into the frame they read.
type Message struct {
	// ID is 16 opaque bytes (a UUID, or a u128 in little-endian order).
	ID [16]byte
	// Offset is the message's offset in its partition (set on poll).
	Offset uint64
	// Timestamp is the broker's append time in µs since the epoch (set on poll).
	Timestamp uint64
	// OriginTimestamp is the producer's time in µs since the epoch.
	OriginTimestamp uint64
	// Checksum is the frame's XXH3-64 checksum (set by encoding and on poll).
	Checksum uint64
	// Headers is the encoded user-headers TLV, or nil.
	Headers []byte
	Payload []byte
}

// FrameSize returns the encoded size of m in a batch.
func (m *Message) FrameSize() int { return MessageHeaderSize + len(m.Payload) + len(m.Headers) }

// BatchHeader is the 256-byte header of a batch record.
type BatchHeader struct {
	PartitionID     uint64
	BaseOffset      uint64
	BaseTimestamp   uint64
	OriginTimestamp uint64
	Length          uint64 // header plus all frames
	Checksum        uint64
	Count           uint32
}

// Put writes h into b[:BatchHeaderSize], zeroing the reserved bytes.
func (h *BatchHeader) Put(b []byte) {
	clear(b[52:BatchHeaderSize])
	h.putSummed(b)
	binary.LittleEndian.PutUint64(b[40:], h.Checksum)
}

// putSumPrefix writes the 44 bytes the batch checksum starts with.
func (h *BatchHeader) putSumPrefix(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], h.PartitionID)
	binary.LittleEndian.PutUint64(b[8:], h.BaseOffset)
	binary.LittleEndian.PutUint64(b[16:], h.BaseTimestamp)
	binary.LittleEndian.PutUint64(b[24:], h.OriginTimestamp)
	binary.LittleEndian.PutUint64(b[32:], h.Length)
	binary.LittleEndian.PutUint32(b[40:], h.Count)
}

func (h *BatchHeader) putSummed(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], h.PartitionID)
	binary.LittleEndian.PutUint64(b[8:], h.BaseOffset)
	binary.LittleEndian.PutUint64(b[16:], h.BaseTimestamp)
	binary.LittleEndian.PutUint64(b[24:], h.OriginTimestamp)
	binary.LittleEndian.PutUint64(b[32:], h.Length)
	binary.LittleEndian.PutUint32(b[48:], h.Count)
}

// DecodeBatchHeader reads a batch header. It checks the size only.
func DecodeBatchHeader(b []byte) (BatchHeader, error) {
	if len(b) < BatchHeaderSize {
		return BatchHeader{}, fmt.Errorf("%w: batch header is %d bytes, want %d", ErrMalformed, len(b), BatchHeaderSize)
	}
	return BatchHeader{
		PartitionID:     binary.LittleEndian.Uint64(b[0:]),
		BaseOffset:      binary.LittleEndian.Uint64(b[8:]),
		BaseTimestamp:   binary.LittleEndian.Uint64(b[16:]),
		OriginTimestamp: binary.LittleEndian.Uint64(b[24:]),
		Length:          binary.LittleEndian.Uint64(b[32:]),
		Checksum:        binary.LittleEndian.Uint64(b[40:]),
		Count:           binary.LittleEndian.Uint32(b[48:]),
	}, nil
}

// MessageHeader is the 48-byte header of one message frame.
type MessageHeader struct {
	Checksum       uint64
	ID             [16]byte
	OffsetDelta    uint32
	TimestampDelta uint32
	HeadersLength  uint32
	PayloadLength  uint32
}

// NextFrame splits the first message frame off b. It checks that the frame
// fits and that its reserved bytes are zero; it does not verify the checksum.
func NextFrame(b []byte) (h MessageHeader, frame, rest []byte, err error) {
	if len(b) < MessageHeaderSize {
		return h, nil, nil, fmt.Errorf("%w: message frame header is %d bytes, want %d", ErrMalformed, len(b), MessageHeaderSize)
	}
	h.Checksum = binary.LittleEndian.Uint64(b[0:])
	copy(h.ID[:], b[8:24])
	h.OffsetDelta = binary.LittleEndian.Uint32(b[24:])
	h.TimestampDelta = binary.LittleEndian.Uint32(b[28:])
	h.HeadersLength = binary.LittleEndian.Uint32(b[32:])
	h.PayloadLength = binary.LittleEndian.Uint32(b[36:])
	if binary.LittleEndian.Uint64(b[40:]) != 0 {
		return h, nil, nil, fmt.Errorf("%w: message frame reserved bytes", ErrInvalidReservedField)
	}
	n := uint64(MessageHeaderSize) + uint64(h.PayloadLength) + uint64(h.HeadersLength)
	if n > uint64(len(b)) {
		return h, nil, nil, fmt.Errorf("%w: message frame of %d bytes, %d left in the batch", ErrMalformed, n, len(b))
	}
	return h, b[:n:n], b[n:], nil
}

// FrameChecksum computes a frame's checksum: XXH3-64 over everything after
// the checksum field (id, deltas, lengths, reserved, payload, headers).
func FrameChecksum(frame []byte) uint64 { return xxh3.Hash(frame[8:]) }

// AppendBatch appends a batch record holding msgs, with the three
// server-stamped fields at zero as a producer sends them. The batch origin
// timestamp is the smallest message origin timestamp; each message's must be
// within about 71 minutes of it. It computes every frame checksum and the
// batch checksum, and sets each msgs[i].Checksum.
func AppendBatch(b []byte, msgs []Message) ([]byte, error) {
	if len(msgs) == 0 {
		return b, fmt.Errorf("%w: a batch needs at least one message", ErrInvalidMessagesCount)
	}
	origin := uint64(math.MaxUint64)
	size := BatchHeaderSize
	for i := range msgs {
		origin = min(origin, msgs[i].OriginTimestamp)
		size += msgs[i].FrameSize()
	}
	start := len(b)
	b = grow(b, size)
	out := b[start : start+size]
	sums := make([]byte, batchSumPrefix, batchSumPrefix+8*len(msgs))
	pos := BatchHeaderSize
	for i := range msgs {
		m := &msgs[i]
		delta := m.OriginTimestamp - origin
		if delta > math.MaxUint32 {
			return b[:start], fmt.Errorf("%w: message %d is %d µs after the batch's first", ErrInvalidMessageTimestampDelta, i, delta)
		}
		f := out[pos : pos+m.FrameSize()]
		copy(f[8:24], m.ID[:])
		binary.LittleEndian.PutUint32(f[24:], uint32(i))
		binary.LittleEndian.PutUint32(f[28:], uint32(delta))
		binary.LittleEndian.PutUint32(f[32:], uint32(len(m.Headers)))
		binary.LittleEndian.PutUint32(f[36:], uint32(len(m.Payload)))
		clear(f[40:48])
		copy(f[48:], m.Payload)
		copy(f[48+len(m.Payload):], m.Headers)
		m.Checksum = FrameChecksum(f)
		binary.LittleEndian.PutUint64(f[0:], m.Checksum)
		sums = binary.LittleEndian.AppendUint64(sums, m.Checksum)
		pos += len(f)
	}
	h := BatchHeader{OriginTimestamp: origin, Length: uint64(size), Count: uint32(len(msgs))}
	h.putSumPrefix(sums)
	h.Checksum = xxh3.Hash(sums)
	h.Put(out)
	return b, nil
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n+len(b)/4)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// BatchChecker validates batch records and re-stamps them, reusing one
// scratch buffer; it is not safe for concurrent use.
type BatchChecker struct {
	sums []byte
}

// Validate checks a batch record the way the server does on ingest: the
// header's length matches len(b), count > 0, reserved bytes are zero,
// exactly count frames tile the batch, and every frame checksum and the
// batch checksum verify.
func (c *BatchChecker) Validate(b []byte) (BatchHeader, error) { return c.validate(b, false) }

// ValidateSend checks what Validate checks and also that every frame's
// offset_delta is its index in the batch (0, 1, 2, ...), as a producer
// must send it: a consumer computes each message's offset as base_offset +
// offset_delta, so other deltas would mislabel the messages. Upstream does
// not check the deltas; a broker that wants offsets it can trust does.
// A wrong delta is ErrMalformed.
func (c *BatchChecker) ValidateSend(b []byte) (BatchHeader, error) { return c.validate(b, true) }

func (c *BatchChecker) validate(b []byte, deltas bool) (BatchHeader, error) {
	h, err := DecodeBatchHeader(b)
	if err != nil {
		return h, err
	}
	switch {
	case h.Length != uint64(len(b)):
		return h, fmt.Errorf("%w: batch_length %d but the batch is %d bytes", ErrMalformed, h.Length, len(b))
	case h.Count == 0:
		return h, fmt.Errorf("%w: batch holds no messages", ErrInvalidMessagesCount)
	case !allZero(b[52:BatchHeaderSize]):
		return h, fmt.Errorf("%w: batch header reserved bytes", ErrInvalidReservedField)
	case uint64(h.Count)*MessageHeaderSize > uint64(len(b)-BatchHeaderSize):
		return h, fmt.Errorf("%w: %d messages cannot fit in %d bytes", ErrMalformed, h.Count, len(b))
	}
	c.sums = append(c.sums[:0], b[:batchSumPrefix]...)
	binary.LittleEndian.PutUint32(c.sums[40:], h.Count)
	rest := b[BatchHeaderSize:]
	for i := uint32(0); i < h.Count; i++ {
		var fh MessageHeader
		var frame []byte
		fh, frame, rest, err = NextFrame(rest)
		if err != nil {
			return h, fmt.Errorf("message %d: %w", i, err)
		}
		if sum := FrameChecksum(frame); sum != fh.Checksum {
			return h, fmt.Errorf("%w: message %d: frame says %d, computed %d", ErrInvalidMessageChecksum, i, fh.Checksum, sum)
		}
		if deltas && fh.OffsetDelta != i {
			return h, fmt.Errorf("%w: message %d has offset_delta %d, want its index %d", ErrMalformed, i, fh.OffsetDelta, i)
		}
		c.sums = binary.LittleEndian.AppendUint64(c.sums, fh.Checksum)
	}
	if len(rest) != 0 {
		return h, fmt.Errorf("%w: %d bytes after the last of %d messages", ErrMalformed, len(rest), h.Count)
	}
	if sum := xxh3.Hash(c.sums); sum != h.Checksum {
		return h, fmt.Errorf("%w: batch says %d, computed %d", ErrInvalidBatchChecksum, h.Checksum, sum)
	}
	return h, nil
}

// Stamp sets the server fields of the batch last passed to Validate and
// recomputes its checksum. b must be that same batch.
func (c *BatchChecker) Stamp(b []byte, partition, baseOffset, baseTimestamp uint64) {
	binary.LittleEndian.PutUint64(b[0:], partition)
	binary.LittleEndian.PutUint64(b[8:], baseOffset)
	binary.LittleEndian.PutUint64(b[16:], baseTimestamp)
	copy(c.sums[:24], b[:24])
	binary.LittleEndian.PutUint64(b[40:], xxh3.Hash(c.sums))
}

// RecordChecksum recomputes the checksum of a record whose frames are
// already known to be well-formed (for example, read back from storage).
func RecordChecksum(b []byte) (uint64, error) {
	h, err := DecodeBatchHeader(b)
	if err != nil {
		return 0, err
	}
	if h.Length != uint64(len(b)) {
		return 0, fmt.Errorf("%w: batch_length %d but the record is %d bytes", ErrMalformed, h.Length, len(b))
	}
	sums := make([]byte, batchSumPrefix, batchSumPrefix+8*int(min(h.Count, 1<<16)))
	copy(sums, b[:40])
	binary.LittleEndian.PutUint32(sums[40:], h.Count)
	rest := b[BatchHeaderSize:]
	for i := uint32(0); i < h.Count; i++ {
		var fh MessageHeader
		fh, _, rest, err = NextFrame(rest)
		if err != nil {
			return 0, fmt.Errorf("message %d: %w", i, err)
		}
		sums = binary.LittleEndian.AppendUint64(sums, fh.Checksum)
	}
	if len(rest) != 0 {
		return 0, fmt.Errorf("%w: %d bytes after the last of %d messages", ErrMalformed, len(rest), h.Count)
	}
	return xxh3.Hash(sums), nil
}

// AppendSlicedRecord appends to dst a record holding n frames of record,
// starting at frame index from: the header keeps its base offset, base
// timestamp and origin timestamp, and gets the slice's length, count and a
// new checksum. record must be a well-formed record.
func AppendSlicedRecord(dst, record []byte, from, n uint32) ([]byte, error) {
	h, err := DecodeBatchHeader(record)
	if err != nil {
		return dst, err
	}
	if uint64(from)+uint64(n) > uint64(h.Count) || n == 0 {
		return dst, fmt.Errorf("%w: slice [%d,+%d) of a %d-message record", ErrMalformed, from, n, h.Count)
	}
	if from == 0 && n == h.Count {
		return append(dst, record...), nil
	}
	rest := record[BatchHeaderSize:]
	var start, end int
	off := BatchHeaderSize
	for i := uint32(0); i < from+n; i++ {
		var frame []byte
		if _, frame, rest, err = NextFrame(rest); err != nil {
			return dst, fmt.Errorf("message %d: %w", i, err)
		}
		if i == from {
			start = off
		}
		off += len(frame)
	}
	end = off
	at := len(dst)
	dst = append(dst, record[:BatchHeaderSize]...)
	dst = append(dst, record[start:end]...)
	out := dst[at:]
	h.Length = uint64(len(out))
	h.Count = n
	h.putSummed(out)
	sum, err := RecordChecksum(out)
	if err != nil {
		return dst[:at], err
	}
	binary.LittleEndian.PutUint64(out[40:], sum)
	return dst, nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// AppendRecordMessages decodes every frame of one record and appends the
// messages to msgs, with absolute offsets and timestamps. Payloads and
// headers alias record. The frames' offset_delta values must be strictly
// increasing (a sliced record's first delta may be above 0); a record whose
// deltas repeat or go backwards would give two messages one offset, and is
// ErrMalformed.
func AppendRecordMessages(msgs []Message, record []byte) ([]Message, error) {
	h, err := DecodeBatchHeader(record)
	if err != nil {
		return msgs, err
	}
	if h.Length < BatchHeaderSize || h.Length > uint64(len(record)) {
		return msgs, fmt.Errorf("%w: record batch_length %d, %d bytes available", ErrMalformed, h.Length, len(record))
	}
	rest := record[BatchHeaderSize:h.Length]
	var prev uint32
	for i := uint32(0); i < h.Count; i++ {
		fh, frame, r, err := NextFrame(rest)
		if err != nil {
			return msgs, fmt.Errorf("record at offset %d, message %d: %w", h.BaseOffset, i, err)
		}
		if i > 0 && fh.OffsetDelta <= prev {
			return msgs, fmt.Errorf("%w: record at offset %d, message %d: offset_delta %d after %d (deltas must increase)",
				ErrMalformed, h.BaseOffset, i, fh.OffsetDelta, prev)
		}
		prev = fh.OffsetDelta
		rest = r
		p := frame[MessageHeaderSize : MessageHeaderSize+fh.PayloadLength]
		var hd []byte
		if fh.HeadersLength > 0 {
			hd = frame[MessageHeaderSize+fh.PayloadLength:]
		}
		msgs = append(msgs, Message{
			ID:              fh.ID,
			Offset:          h.BaseOffset + uint64(fh.OffsetDelta),
			Timestamp:       h.BaseTimestamp,
			OriginTimestamp: h.OriginTimestamp + uint64(fh.TimestampDelta),
			Checksum:        fh.Checksum,
			Headers:         hd,
			Payload:         p,
		})
	}
	if len(rest) != 0 {
		return msgs, fmt.Errorf("%w: record at offset %d has %d bytes after its %d messages", ErrMalformed, h.BaseOffset, len(rest), h.Count)
	}
	return msgs, nil
}
