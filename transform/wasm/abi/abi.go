// Package abi is the layout of Ferry's WebAssembly transform ABI: the
// batch the host writes into a module's memory, and the verdicts the
// module returns (docs/wasm.md is the guide). It depends on the standard
// library only, so the host (package wasm) and guests written in Go
// (package guest) share it.
package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// Version is the version of the batch and verdict layouts, the first
// four bytes of each. A guest that sees another version in a batch must
// fail the call; the host refuses verdicts of another version.
const Version = 1

// Header is one message header as the ABI carries it: a typed key and a
// typed value, with Iggy's kind numbers (1 raw, 2 string, 3 bool, 4-8
// int8..int128, 9-13 uint8..uint128, 14 float32, 15 float64).
type Header struct {
	KeyKind   uint8
	Key       []byte
	ValueKind uint8
	Value     []byte
}

// Message is one message of a batch: its payload, its key (the bytes of
// its "key" header; empty for none), its origin timestamp in
// microseconds since the Unix epoch (0 for none) and its other headers.
type Message struct {
	Payload   []byte
	Key       []byte
	Timestamp int64
	Headers   []Header
}

// Action is what a verdict does with its message.
type Action uint8

// Actions, as the verdict layout numbers them.
const (
	// Keep passes the message on unchanged.
	Keep Action = 0
	// Drop filters the message out.
	Drop Action = 1
	// Replace passes one new message on in its place.
	Replace Action = 2
	// Split passes zero or more new messages on in its place, in order.
	Split Action = 3
	// Route passes the message on unchanged to another topic of the same
	// stream.
	Route Action = 4
	// Fail sends the message to the dead-letter path with a reason.
	Fail Action = 5
)

var actionNames = [...]string{"keep", "drop", "replace", "split", "route", "fail"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("action %d", uint8(a))
}

// Verdict is what the module decided for one message of a batch.
type Verdict struct {
	Action Action
	// Messages are the messages of a Replace (one) or a Split (any).
	Messages []Message
	// Topic is a Route's topic; Reason is a Fail's reason.
	Topic, Reason string
}

// Limits of what a verdict may hold. They bound what an untrusted module
// can make the host allocate, beyond the bytes it returns.
const (
	// MaxSplit is the most messages one Split may make.
	MaxSplit = 1 << 16
	// MaxText is the longest Route topic and Fail reason.
	MaxText = 1 << 10
)

// ErrLayout is the error of bytes that do not follow the layout.
var ErrLayout = errors.New("bad layout")

// AppendBatch appends the batch layout of msgs to dst:
//
//	u32 version (1), u32 count, then count messages
//
// where a message is
//
//	u32 len, payload bytes
//	u32 len, key bytes
//	i64 timestamp (µs since the Unix epoch; 0 = none)
//	u32 header count, then per header:
//	  u8 key kind, u32 len, key bytes, u8 value kind, u32 len, value bytes
//
// Integers are little-endian.
func AppendBatch(dst []byte, msgs []Message) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, Version)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(msgs)))
	for i := range msgs {
		dst = AppendMessage(dst, &msgs[i])
	}
	return dst
}

// AppendMessage appends one message in the batch layout to dst.
func AppendMessage(dst []byte, m *Message) []byte {
	dst = appendBytes(dst, m.Payload)
	dst = appendBytes(dst, m.Key)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(m.Timestamp))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(m.Headers)))
	for _, h := range m.Headers {
		dst = append(dst, h.KeyKind)
		dst = appendBytes(dst, h.Key)
		dst = append(dst, h.ValueKind)
		dst = appendBytes(dst, h.Value)
	}
	return dst
}

// BatchSize is the length of AppendBatch's output for msgs.
func BatchSize(msgs []Message) int {
	n := 8
	for i := range msgs {
		m := &msgs[i]
		n += 4 + len(m.Payload) + 4 + len(m.Key) + 8 + 4
		for _, h := range m.Headers {
			n += 1 + 4 + len(h.Key) + 1 + 4 + len(h.Value)
		}
	}
	return n
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// AppendVerdicts appends the verdict layout of vs to dst:
//
//	u32 version (1), u32 count (the batch's message count), then per message:
//	u8 action, and after it
//	  keep (0), drop (1): nothing
//	  replace (2):        one message in the batch layout
//	  split (3):          u32 n, n messages in the batch layout
//	  route (4):          u32 len, topic (UTF-8)
//	  fail (5):           u32 len, reason (UTF-8)
//
// It is what a guest returns; the host has it for tests and for guests
// written in Go.
func AppendVerdicts(dst []byte, vs []Verdict) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, Version)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(vs)))
	for i := range vs {
		v := &vs[i]
		dst = append(dst, byte(v.Action))
		switch v.Action {
		case Replace:
			var m Message
			if len(v.Messages) > 0 {
				m = v.Messages[0]
			}
			dst = AppendMessage(dst, &m)
		case Split:
			dst = binary.LittleEndian.AppendUint32(dst, uint32(len(v.Messages)))
			for j := range v.Messages {
				dst = AppendMessage(dst, &v.Messages[j])
			}
		case Route:
			dst = appendBytes(dst, []byte(v.Topic))
		case Fail:
			dst = appendBytes(dst, []byte(v.Reason))
		}
	}
	return dst
}

// reader reads the layouts from untrusted bytes: every read checks the
// length first, and byte slices alias b.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w at byte %d: %s", ErrLayout, r.off, fmt.Sprintf(format, args...))
	}
}

func (r *reader) u8(what string) uint8 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 1 {
		r.fail("%s: want 1 byte, %d left", what, len(r.b)-r.off)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u32(what string) uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 4 {
		r.fail("%s: want 4 bytes, %d left", what, len(r.b)-r.off)
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64(what string) uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 8 {
		r.fail("%s: want 8 bytes, %d left", what, len(r.b)-r.off)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// bytes reads a u32 length and that many bytes (nil for 0).
func (r *reader) bytes(what string) []byte {
	n := r.u32(what + " length")
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.fail("%s: length %d, %d bytes left", what, n, len(r.b)-r.off)
		return nil
	}
	if n == 0 {
		return nil
	}
	v := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return v
}

func (r *reader) text(what string) string {
	b := r.bytes(what)
	if r.err != nil {
		return ""
	}
	if len(b) > MaxText {
		r.fail("%s: %d bytes, at most %d", what, len(b), MaxText)
		return ""
	}
	if !utf8.Valid(b) {
		r.fail("%s: not valid UTF-8", what)
		return ""
	}
	return string(b)
}

func (r *reader) version(what string) {
	if v := r.u32(what + " version"); r.err == nil && v != Version {
		r.fail("%s version %d, want %d", what, v, Version)
	}
}

// count reads a u32 count of items of at least min bytes each, and checks
// that the bytes left can hold them (so a count never sizes an allocation
// beyond what the input backs).
func (r *reader) count(what string, min int) int {
	n := r.u32(what)
	if r.err != nil {
		return 0
	}
	if uint64(n)*uint64(min) > uint64(len(r.b)-r.off) {
		r.fail("%s %d: %d bytes left cannot hold them", what, n, len(r.b)-r.off)
		return 0
	}
	return int(n)
}

// minMessage is the size of a message with nothing in it.
const minMessage = 4 + 4 + 8 + 4

func (r *reader) message() Message {
	var m Message
	m.Payload = r.bytes("payload")
	m.Key = r.bytes("key")
	m.Timestamp = int64(r.u64("timestamp"))
	n := r.count("header count", 1+4+1+4)
	if n > 0 {
		m.Headers = make([]Header, 0, n)
	}
	for range n {
		var h Header
		h.KeyKind = r.u8("header key kind")
		h.Key = r.bytes("header key")
		h.ValueKind = r.u8("header value kind")
		h.Value = r.bytes("header value")
		if r.err != nil {
			return Message{}
		}
		m.Headers = append(m.Headers, h)
	}
	return m
}

// DecodeBatch reads the batch layout. The messages alias b.
func DecodeBatch(b []byte) ([]Message, error) {
	r := &reader{b: b}
	r.version("batch")
	n := r.count("message count", minMessage)
	msgs := make([]Message, 0, n)
	for range n {
		m := r.message()
		if r.err != nil {
			break
		}
		msgs = append(msgs, m)
	}
	if r.err == nil && r.off != len(b) {
		r.fail("%d bytes after the last message", len(b)-r.off)
	}
	if r.err != nil {
		return nil, r.err
	}
	return msgs, nil
}

// DecodeVerdicts reads the verdict layout of a batch of want messages.
// b comes from the module and is not trusted: any layout error, a count
// other than want, an unknown action, a split of more than MaxSplit
// messages or bytes left over is an error, and nothing is read out of
// bounds. The verdicts alias b.
func DecodeVerdicts(b []byte, want int) ([]Verdict, error) {
	r := &reader{b: b}
	r.version("verdicts")
	n := r.count("verdict count", 1)
	if r.err == nil && n != want {
		r.fail("%d verdicts for a batch of %d messages", n, want)
	}
	if r.err != nil {
		return nil, r.err
	}
	vs := make([]Verdict, n)
	for i := range vs {
		v := &vs[i]
		v.Action = Action(r.u8("action"))
		switch v.Action {
		case Keep, Drop:
		case Replace:
			v.Messages = []Message{r.message()}
		case Split:
			k := r.count("split count", minMessage)
			if r.err == nil && k > MaxSplit {
				r.fail("a split into %d messages, at most %d", k, MaxSplit)
			}
			if k > 0 && r.err == nil {
				v.Messages = make([]Message, 0, k)
			}
			for range k {
				m := r.message()
				if r.err != nil {
					break
				}
				v.Messages = append(v.Messages, m)
			}
		case Route:
			v.Topic = r.text("route topic")
			if r.err == nil && v.Topic == "" {
				r.fail("route to an empty topic")
			}
		case Fail:
			v.Reason = r.text("fail reason")
		default:
			r.fail("unknown action %d", uint8(v.Action))
		}
		if r.err != nil {
			return nil, fmt.Errorf("verdict %d: %w", i, r.err)
		}
	}
	if r.off != len(b) {
		r.fail("%d bytes after the last verdict", len(b)-r.off)
		return nil, r.err
	}
	return vs, nil
}

// Pack is a transform function's i64 result: the verdicts' address in
// the module's memory in the high 32 bits, their length in the low.
func Pack(ptr, n uint32) uint64 { return uint64(ptr)<<32 | uint64(n) }

// Unpack splits a transform function's result into address and length.
func Unpack(v uint64) (ptr, n uint32) { return uint32(v >> 32), uint32(v & math.MaxUint32) }
