package live

import (
	"encoding/hex"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
)

// Message is one message read from a topic.
type Message struct {
	// Partition and Offset say where the message is in the topic.
	Partition uint32
	Offset    uint64
	// ID is the message id (a UUID, or a u128 in little-endian order).
	ID [16]byte
	// Timestamp is when the server appended the message; OriginTimestamp
	// when the producer made it. Both have microsecond precision.
	Timestamp       time.Time
	OriginTimestamp time.Time
	// Checksum is the message's XXH3-64 checksum as the server stored it.
	Checksum uint64
	// Headers are the user headers, decoded; nil when there are none (or,
	// rarely, when the server sent a block that does not decode: the
	// message is still delivered, without them).
	Headers []header.Header
	Payload []byte

	mark *mark // nil for messages a Map hands out
}

// PayloadString returns the payload as a string.
func (m *Message) PayloadString() string { return string(m.Payload) }

// Header returns the value of the user header with the string key name.
func (m *Message) Header(name string) (header.Value, bool) { return header.Get(m.Headers, name) }

// Done marks the message processed: once every message before it in its
// partition is processed too, the Stream stores its offset as the
// group's. Done may be called from any goroutine, more than once, and in
// any order; it does not block. It does nothing for a Map's messages.
func (m *Message) Done() {
	if m.mark != nil {
		m.mark.done()
	}
}

// Batch is the messages of one poll: one partition, in offset order.
type Batch struct {
	Partition uint32
	Messages  []*Message
}

// Done marks every message of the batch processed.
func (b *Batch) Done() {
	for _, m := range b.Messages {
		m.Done()
	}
}

// fromPoll converts a polled message. With own the payload and headers
// are copied, so the message does not keep the poll's buffer alive.
func fromPoll(partition uint32, w *iggy.Message, own bool) Message {
	m := Message{
		Partition:       partition,
		Offset:          w.Offset,
		ID:              w.ID,
		Timestamp:       w.Timestamp,
		OriginTimestamp: w.OriginTimestamp,
		Checksum:        w.Checksum,
		Payload:         w.Payload,
		Headers:         w.Headers,
	}
	if own {
		m.Payload = append([]byte(nil), w.Payload...)
		m.Headers = header.Clone(w.Headers)
	}
	return m
}

// The user headers a Target puts on its messages, for the Map (or any
// other reader) on the other side:
//
//   - KeyHeader carries the key: a string value for a key declared with
//     Declare, a raw value for one declared with DeclareBytes, so the two
//     namespaces stay apart on the wire.
//   - DeletedHeader (bool true) marks a deletion; the payload is what the
//     target's DeletionValueFunc made.
//
// A Target writes one partition, named in the send, so the key does not
// also travel as a partitioning key (Iggy does not store that with the
// message).
const (
	KeyHeader     = iggy.KeyHeader
	DeletedHeader = iggy.DeletedHeader
)

// StringKey is a key function for Map: the KeyHeader of a message when it
// holds a string, as a Target's Declare sends it. Messages without one
// (including those with a binary key) are skipped.
func StringKey(m Message) (string, bool) {
	v, ok := m.Header(KeyHeader)
	if !ok || v.Kind != header.KindString {
		return "", false
	}
	return string(v.Data), true
}

// BytesKey is a key function for Map: the KeyHeader of a message when it
// holds raw bytes, as a Target's DeclareBytes sends it, returned as a Go
// string of those bytes. Messages without one (including those with a
// string key) are skipped.
func BytesKey(m Message) (string, bool) {
	v, ok := m.Header(KeyHeader)
	if !ok || v.Kind != header.KindRaw {
		return "", false
	}
	return string(v.Data), true
}

// IsDeleted is a deletion predicate for Map: true for a message with the
// DeletedHeader set to true, as a Target's deletion markers have.
func IsDeleted(m Message) bool {
	v, ok := m.Header(DeletedHeader)
	return ok && v.Bool()
}

// Key is a Target key: a string key (Declare) or a binary one
// (DeclareBytes). The two are distinct even when their bytes are equal.
type Key struct {
	// Name is the key's bytes, as a Go string.
	Name string
	// Binary is true for a key declared with DeclareBytes.
	Binary bool
}

// Bytes returns the key's bytes.
func (k Key) Bytes() []byte { return []byte(k.Name) }

// String returns the key for people: a string key as it is, a binary key
// as "0x" and hex.
func (k Key) String() string {
	if k.Binary {
		return "0x" + hex.EncodeToString([]byte(k.Name))
	}
	return k.Name
}

// header returns the KeyHeader entry that carries k.
func (k Key) header() iggy.Entry {
	if k.Binary {
		return iggy.Header(KeyHeader, iggy.RawValue([]byte(k.Name)))
	}
	return iggy.Header(KeyHeader, iggy.StringValue(k.Name))
}
