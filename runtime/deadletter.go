package runtime

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
)

// Dead-letter headers added to each message sent to a dead-letter topic.
// The original headers are kept; the payload and id are the original ones.
// A sink's dead letter names the message's stream, topic, partition and
// offset; a source's, which never had a partition or offset, names the
// stream and topic it was for, its index in the polled batch and the
// schema of its payload, and keeps the source's HeaderSourcePosition.
const (
	HeaderDLQStream    = "ferry.dlq.stream"
	HeaderDLQTopic     = "ferry.dlq.topic"
	HeaderDLQPartition = "ferry.dlq.partition"
	HeaderDLQOffset    = "ferry.dlq.offset"
	HeaderDLQError     = "ferry.dlq.error"
	HeaderDLQConnector = "ferry.dlq.connector"
	HeaderDLQTimestamp = "ferry.dlq.timestamp"
	// HeaderDLQSourceIndex is the message's index (uint32) in the batch
	// the source's Poll returned, counting the messages the transforms
	// kept.
	HeaderDLQSourceIndex = "ferry.dlq.source_index"
	// HeaderDLQSchema is the schema of a source's dead letter's payload:
	// the polled batch's, before any conversion to the stream's.
	HeaderDLQSchema = "ferry.dlq.schema"
	// HeaderDLQEmptyPayload (bool true) marks the dead letter of a
	// message whose payload was empty: Iggy stores none, so the letter
	// carries the JSON null instead.
	HeaderDLQEmptyPayload = "ferry.dlq.empty_payload"
)

// HeaderSourcePosition is a user header a source may set on a message to
// say where in the source it came from, for people: the file source sets
// "<path> at byte <offset>". The runtime does not send it on to the
// stream; it stays on the message's dead letter and is named in the
// error when on_error = "stop" stops at the message.
const HeaderSourcePosition = "ferry.source.position"

type deadLetter struct {
	client        *iggy.Client
	stream, topic string
	key           string
	rt            *Runtime // for errors naming a missing permission
	what          string   // what the topic is, for errors: "dead-letter topic" when empty
}

func (d *deadLetter) label() string {
	if d.what == "" {
		return "dead-letter topic"
	}
	return d.what
}

func (d *deadLetter) send(ctx context.Context, failed []failure) error {
	msgs := make([]iggy.Message, 0, len(failed))
	now := dlqTimestamp()
	for _, f := range failed {
		m := f.msg
		dl, err := letter(&m, []connector.Header{
			connector.StringHeader(HeaderDLQStream, m.Stream),
			connector.StringHeader(HeaderDLQTopic, m.Topic),
			header.New(HeaderDLQPartition, header.Uint32Value(m.Partition)),
			header.New(HeaderDLQOffset, header.Uint64Value(m.Offset)),
			dlqError(f.err), d.connectorHeader(), now,
		})
		if err != nil {
			return err
		}
		msgs = append(msgs, dl)
	}
	return d.sendMessages(ctx, msgs)
}

// sendMessages sends dead letters as they are.
func (d *deadLetter) sendMessages(ctx context.Context, msgs []iggy.Message) error {
	_, err := d.client.SendMessages(ctx, iggy.NamedID(d.stream), iggy.NamedID(d.topic), iggy.Balanced(), msgs)
	if err != nil {
		return fmt.Errorf("send to %s %s/%s: %w", d.label(), d.stream, d.topic, d.rt.explainDenied(err, actSend, d.stream, d.topic))
	}
	if d.what == "" && d.rt != nil { // a dead-letter topic, not a routed one
		d.rt.events.deadLettered(d, msgs)
	}
	return nil
}

func (d *deadLetter) connectorHeader() connector.Header {
	return connector.StringHeader(HeaderDLQConnector, truncate(d.key, 255))
}

func dlqError(err error) connector.Header {
	msg := err.Error()
	if msg == "" {
		msg = fmt.Sprintf("%T with no message", err) // a header value has 1 to 255 bytes
	}
	return connector.StringHeader(HeaderDLQError, truncate(msg, 255))
}

func dlqTimestamp() connector.Header {
	return connector.StringHeader(HeaderDLQTimestamp, strconv.FormatInt(time.Now().UnixMicro(), 10))
}

// letter is m's dead letter: its id, payload and origin timestamp, its
// headers with ours added (ours replace original headers of the same
// name). When the original headers cannot be encoded with ours, or take
// Iggy's headers limit with them, it keeps only ours.
func letter(m *connector.Message, ours []connector.Header) (iggy.Message, error) {
	headers := make([]connector.Header, 0, len(m.Headers)+len(ours))
	for _, e := range m.Headers {
		if _, dup := header.Get(ours, string(e.Key.Data)); !dup || e.Key.Kind != header.KindString {
			headers = append(headers, e)
		}
	}
	headers = append(headers, ours...)
	if iggy.CheckHeaders(headers) != nil {
		if err := iggy.CheckHeaders(ours); err != nil {
			return iggy.Message{}, fmt.Errorf("dead-letter headers: %w", err)
		}
		headers = ours
	}
	return iggy.Message{ID: m.ID, Payload: m.Payload, Headers: headers, OriginTimestamp: m.OriginTimestamp}, nil
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
