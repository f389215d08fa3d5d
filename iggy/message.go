package iggy

import (
	"fmt"
	"sync"
	"time"

	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/iggy/wire"
)

// KeyHeader is the user header that carries a message's key, by the
// convention package live's Target writes and its Map reads: a string
// value for a string key, a raw value for a binary one. Iggy stores no
// key with a message (a send's partitioning key only picks the
// partition), so a key that must travel goes in this header.
const KeyHeader = "key"

// DeletedHeader marks a deletion marker (a tombstone): a message whose
// DeletedHeader is the bool true says its key no longer has a value.
// live's Target writes them, live's Map and compacted topics read them.
const DeletedHeader = "deleted"

// DeletedPayload is the payload of a deletion marker that has none of its
// own: Iggy refuses an empty payload, so a marker carries the JSON null.
const DeletedPayload = "null"

// Message is one message: what a producer sends and a poll returns.
type Message struct {
	// ID is 16 opaque bytes, a UUID or a u128 in little-endian order. A
	// zero ID is given a UUID v7 when the message is sent.
	ID [16]byte
	// Payload is the body, 1..MaxPayloadSize bytes.
	Payload []byte
	// Headers are the user headers, at most 100,000 bytes encoded; every
	// key and value holds 1..255 bytes.
	Headers []header.Header
	// OriginTimestamp is when the producer made the message; zero (or
	// the Unix epoch, Iggy's 0) means when it is sent. Iggy keeps
	// microseconds.
	OriginTimestamp time.Time

	// The fields below are set on messages a poll returns; a send sets
	// Checksum too.

	// Offset is the message's offset in its partition.
	Offset uint64
	// Timestamp is when the server appended the message, to the µs.
	Timestamp time.Time
	// Checksum is the frame's XXH3-64 checksum.
	Checksum uint64
	// HeadersErr says why the user headers of a polled message do not
	// decode (a server stores what other clients send); Headers is nil
	// then, and the rest of the message is as stored.
	HeadersErr error
}

// Key returns the message's key: the value of its KeyHeader when that is
// a string or raw bytes.
func (m *Message) Key() (header.Value, bool) {
	v, ok := header.Get(m.Headers, KeyHeader)
	if !ok || (v.Kind != header.KindString && v.Kind != header.KindRaw) {
		return header.Value{}, false
	}
	return v, true
}

// PollReply is what PollMessages returns.
type PollReply struct {
	// PartitionID is the partition read; wire.PollResync (0xFFFFFFFF)
	// when a group consumer polled a partition it does not own.
	PartitionID uint32
	// CurrentOffset is the partition's last offset.
	CurrentOffset uint64
	Messages      []Message
}

// headersSize is the encoded size of hs.
func headersSize(hs []header.Header) int {
	n := 0
	for i := range hs {
		n += 10 + len(hs[i].Key.Data) + len(hs[i].Value.Data)
	}
	return n
}

// FrameSize returns the bytes m takes in a batch: a 48-byte frame header,
// the payload and the encoded headers.
func (m *Message) FrameSize() int {
	return wire.MessageHeaderSize + len(m.Payload) + headersSize(m.Headers)
}

// CheckHeaders reports whether a send accepts hs as a message's user
// headers: at most 100,000 bytes encoded, every kind non-zero, every key
// and value 1..255 bytes and of its kind's size.
func CheckHeaders(hs []header.Header) error {
	if n := headersSize(hs); n > wire.MaxUserHeadersSize {
		return fmt.Errorf("user headers are %d bytes, limit %d: %w", n, wire.MaxUserHeadersSize, ErrTooBigUserHeaders)
	}
	for i := range hs {
		if err := wire.CheckValue(wire.Value(hs[i].Key)); err != nil {
			return fmt.Errorf("user headers: header %d key: %w", i, err)
		}
		if err := wire.CheckValue(hs[i].Value); err != nil {
			return fmt.Errorf("user headers: header %d value: %w", i, err)
		}
	}
	return nil
}

// wireMessages lends out frame slices for sends and polls, which convert
// at the edge and drop them once encoded or decoded.
var wireMessages sync.Pool

func getWire(n int) []wire.Message {
	if p, _ := wireMessages.Get().(*[]wire.Message); p != nil && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]wire.Message, n)
}

func putWire(w []wire.Message) {
	clear(w) // drop the payloads they alias
	w = w[:0]
	wireMessages.Put(&w)
}

// toWire converts msgs, prepared, to frames in w (len(msgs) long). Their
// headers are encoded into one new buffer.
func toWire(w []wire.Message, msgs []Message) {
	size := 0
	for i := range msgs {
		size += headersSize(msgs[i].Headers)
	}
	var buf []byte
	if size > 0 {
		buf = make([]byte, 0, size)
	}
	for i := range msgs {
		m := &msgs[i]
		w[i] = wire.Message{ID: m.ID, Payload: m.Payload, OriginTimestamp: uint64(m.OriginTimestamp.UnixMicro())}
		if len(m.Headers) > 0 {
			start := len(buf)
			buf = wire.AppendTLV(buf, m.Headers)
			w[i].Headers = buf[start:len(buf):len(buf)]
		}
	}
}

// fromWire converts a polled frame; payload and headers alias its buffer.
func fromWire(w *wire.Message) Message {
	m := Message{
		ID: w.ID, Payload: w.Payload, Offset: w.Offset, Checksum: w.Checksum,
		Timestamp:       time.UnixMicro(int64(w.Timestamp)),
		OriginTimestamp: time.UnixMicro(int64(w.OriginTimestamp)),
	}
	if len(w.Headers) > 0 {
		h, err := wire.ParseTLV(w.Headers)
		if err != nil {
			m.HeadersErr = fmt.Errorf("user headers: %w", err)
		} else {
			m.Headers = h
		}
	}
	return m
}
