package sysevents

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/iggy/wire"
)

// Where events go and how they are labelled.
const (
	// Stream is the system stream. Iggy allows '.' in names; the name is
	// Ferry's, so no user stream is expected to carry it. The embedded
	// broker creates it (with ReservedStreamID) and a topic per type.
	Stream = "ferry.events"
	// ReservedStreamID is the id the embedded broker gives the system
	// stream when it creates it: the highest u32, which the lowest-free
	// ids users' streams get never reach, so user stream ids stay 0, 1,
	// 2, ... whether events are on or not.
	ReservedStreamID = ^uint32(0)

	// SpecVersion is the CloudEvents version of the envelope.
	SpecVersion = "1.0"
	// ContentType is the envelope's datacontenttype: data is JSON.
	ContentType = "application/json"

	// SourceBroker and SourceRuntime are the CloudEvents sources.
	SourceBroker  = "/ferry/broker"
	SourceRuntime = "/ferry/runtime"

	// HeaderType is the Iggy user header (string) carrying the event type
	// on every message, so a consumer of several topics can pick a type
	// without decoding the payload. HeaderID carries the event id.
	HeaderType = "ce_type"
	HeaderID   = "ce_id"
)

// Retention of the system topics the broker creates (the runtime uses the
// same when it creates its topics on another server): whole segments of
// SegmentSize are dropped when older than DefaultMessageExpiry or while a
// topic holds more than DefaultMaxTopicSize.
const (
	SegmentSize          = 1 << 20
	DefaultMaxTopicSize  = 8 << 20
	DefaultMessageExpiry = 7 * 24 * time.Hour
)

// Event is a CloudEvents 1.0 event in its JSON format. Required
// attributes: specversion, id, source, type; Ferry always sets time,
// subject, datacontenttype and data too.
type Event struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            Type            `json:"type"`
	Time            time.Time       `json:"time,omitzero"`
	Subject         string          `json:"subject,omitempty"`
	DataContentType string          `json:"datacontenttype,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
}

// New builds an event. key names the occurrence: the same source, type
// and key give the same id, so an event published twice (a retried send)
// is recognisably one. Publishers use natural keys where one exists (a
// topic's never-reused uid with a segment's offset range, a dead letter's
// partition and offset) and an instance-and-sequence key otherwise. data
// is marshalled as JSON.
func New(typ Type, source, subject, key string, at time.Time, data any) (Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("sysevents: encode %s data: %w", typ, err)
	}
	id := MessageID(source, typ, key)
	return Event{
		SpecVersion: SpecVersion, ID: formatID(id), Source: source, Type: typ, Time: at.UTC(),
		Subject: subject, DataContentType: ContentType, Data: raw,
	}, nil
}

// MessageID derives the 16-byte Iggy message id of an event: the first
// 16 bytes of SHA-256(source NUL type NUL key), marked as a UUID version
// 8 (custom) of the RFC 9562 variant. The event's id is its UUID text.
func MessageID(source string, typ Type, key string) [16]byte {
	h := sha256.New()
	h.Write([]byte(source))
	h.Write([]byte{0})
	h.Write([]byte(typ))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var id [16]byte
	copy(id[:], h.Sum(nil))
	id[6] = id[6]&0x0f | 0x80
	id[8] = id[8]&0x3f | 0x80
	return id
}

func formatID(id [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], id[10:16])
	return string(b[:])
}

// ParseID reads an id as formatID writes it (a UUID's text).
func ParseID(s string) ([16]byte, error) {
	var id [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("sysevents: id %q is not a UUID", s)
	}
	compact := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(id[:], []byte(compact)); err != nil {
		return id, fmt.Errorf("sysevents: id %q is not a UUID: %w", s, err)
	}
	return id, nil
}

// Encode marshals e as CloudEvents JSON.
func (e *Event) Encode() ([]byte, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("sysevents: encode %s event: %w", e.Type, err)
	}
	return b, nil
}

// Headers are the Iggy user headers of e's message.
func (e *Event) Headers() []header.Header {
	return []header.Header{
		header.New(HeaderType, header.StringValue(string(e.Type))),
		header.New(HeaderID, header.StringValue(e.ID)),
	}
}

// Message encodes e as the Iggy message the broker appends: id from the
// event id, the ce_type and ce_id headers (TLV-encoded), the JSON
// payload, the event time as origin timestamp.
func (e *Event) Message() (wire.Message, error) {
	payload, err := e.Encode()
	if err != nil {
		return wire.Message{}, err
	}
	id, err := ParseID(e.ID)
	if err != nil {
		return wire.Message{}, err
	}
	return wire.Message{
		ID: id, Payload: payload, Headers: wire.AppendTLV(nil, e.Headers()),
		OriginTimestamp: uint64(e.Time.UnixMicro()),
	}, nil
}

// MaxEventSize bounds what Decode reads: events are small (data of a few
// hundred bytes); anything larger is not one of ours.
const MaxEventSize = 1 << 20

// ErrInvalid is wrapped by every Decode error.
var ErrInvalid = errors.New("sysevents: invalid event")

// Decode parses a CloudEvents JSON event and checks its required
// attributes: specversion "1.0", non-empty id, source and type, a time
// when present, datacontenttype application/json when data is present.
// Types outside the catalog are accepted (Type.Known tells); unknown
// attributes (extensions) are ignored.
func Decode(b []byte) (Event, error) {
	var e Event
	if len(b) > MaxEventSize {
		return e, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, len(b), MaxEventSize)
	}
	if !utf8.Valid(b) {
		return e, fmt.Errorf("%w: not UTF-8", ErrInvalid)
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return e, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	for _, attr := range []string{"specversion", "id", "source", "type"} {
		v, ok := probe[attr]
		if !ok || bytes.Equal(v, []byte("null")) {
			return e, fmt.Errorf("%w: required attribute %q is missing", ErrInvalid, attr)
		}
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	switch {
	case e.SpecVersion != SpecVersion:
		return Event{}, fmt.Errorf("%w: specversion %q, want %q", ErrInvalid, e.SpecVersion, SpecVersion)
	case e.ID == "":
		return Event{}, fmt.Errorf("%w: id is empty", ErrInvalid)
	case e.Source == "":
		return Event{}, fmt.Errorf("%w: source is empty", ErrInvalid)
	case e.Type == "":
		return Event{}, fmt.Errorf("%w: type is empty", ErrInvalid)
	case len(e.Data) > 0 && e.DataContentType != "" && e.DataContentType != ContentType:
		return Event{}, fmt.Errorf("%w: datacontenttype %q, want %q", ErrInvalid, e.DataContentType, ContentType)
	}
	if _, ok := probe["time"]; ok && e.Time.IsZero() {
		return Event{}, fmt.Errorf("%w: time is the zero time", ErrInvalid)
	}
	return e, nil
}

// DecodeData unmarshals e's data into v (a *StreamData, *SegmentData,
// ...), naming the type in the error.
func (e *Event) DecodeData(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("sysevents: %s event %s: data: %w", e.Type, e.ID, err)
	}
	return nil
}
