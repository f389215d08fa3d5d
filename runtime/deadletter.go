package runtime

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
)

// Dead-letter headers added to each message sent to a dead-letter topic.
// The original headers are kept; the payload and id are the original ones.
const (
	HeaderDLQStream    = "ferry.dlq.stream"
	HeaderDLQTopic     = "ferry.dlq.topic"
	HeaderDLQPartition = "ferry.dlq.partition"
	HeaderDLQOffset    = "ferry.dlq.offset"
	HeaderDLQError     = "ferry.dlq.error"
	HeaderDLQConnector = "ferry.dlq.connector"
	HeaderDLQTimestamp = "ferry.dlq.timestamp"
)

type deadLetter struct {
	client        *iggy.Client
	stream, topic string
	key           string
}

func (d *deadLetter) send(ctx context.Context, failed []failure) error {
	msgs := make([]iggy.Message, 0, len(failed))
	now := strconv.FormatInt(time.Now().UnixMicro(), 10)
	for _, f := range failed {
		m := f.msg
		ours := []wire.Entry{
			wire.Header(HeaderDLQStream, wire.StringValue(m.Stream)),
			wire.Header(HeaderDLQTopic, wire.StringValue(m.Topic)),
			wire.Header(HeaderDLQPartition, wire.Uint32Value(m.Partition)),
			wire.Header(HeaderDLQOffset, wire.Uint64Value(m.Offset)),
			wire.Header(HeaderDLQError, wire.StringValue(truncate(f.err.Error(), 255))),
			wire.Header(HeaderDLQConnector, wire.StringValue(truncate(d.key, 255))),
			wire.Header(HeaderDLQTimestamp, wire.StringValue(now)),
		}
		headers := make([]wire.Entry, 0, len(m.Headers)+len(ours))
		for _, e := range m.Headers {
			if _, dup := wire.Lookup(ours, string(e.Key.Data)); !dup || e.Key.Kind != wire.KindString {
				headers = append(headers, e)
			}
		}
		h, err := wire.EncodeTLV(append(headers, ours...))
		if err != nil {
			// The original headers cannot be re-encoded: keep only ours.
			if h, err = wire.EncodeTLV(ours); err != nil {
				return fmt.Errorf("dead-letter headers: %w", err)
			}
		}
		msgs = append(msgs, iggy.Message{ID: m.ID, Payload: m.Payload, Headers: h,
			OriginTimestamp: uint64(m.OriginTimestamp.UnixMicro())})
	}
	_, err := d.client.SendMessages(ctx, iggy.NamedID(d.stream), iggy.NamedID(d.topic), iggy.Balanced(), msgs)
	if err != nil {
		return fmt.Errorf("send to dead-letter topic %s/%s: %w", d.stream, d.topic, err)
	}
	return nil
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
