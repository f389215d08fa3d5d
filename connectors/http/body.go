package httpsink

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ferryhq/ferry/connector"
	"github.com/google/uuid"
)

// request is one HTTP request body, the messages it carries (indexes
// into the batch) and its id (see requestID).
type request struct {
	body []byte
	msgs []int
	id   string
}

// build turns a batch into request bodies. Messages that cannot be
// encoded, or are alone over the body limit, are returned as permanent
// failures and are in no request.
func (s *Sink) build(b *connector.SinkBatch) ([]request, map[int]error) {
	failed := map[int]error{}
	perMessage := s.set.mode == ModeIndividual || s.set.mode == ModeRaw
	var reqs []request
	var cur request
	flush := func() {
		if len(cur.msgs) == 0 {
			return
		}
		if s.set.mode == ModeJSONArray {
			cur.body = append(cur.body, ']')
		}
		cur.id = requestID(s.key, b, cur.msgs)
		reqs = append(reqs, cur)
		cur = request{}
	}
	for i := range b.Messages {
		item, err := s.encode(b, &b.Messages[i])
		if err != nil {
			failed[i] = connector.Permanent(err)
			continue
		}
		if perMessage {
			if s.over(len(item)) {
				failed[i] = connector.Permanent(fmt.Errorf("request body is %d bytes, over max_payload_size_bytes (%d)", len(item), s.set.maxBody))
				continue
			}
			reqs = append(reqs, request{body: item, msgs: []int{i}, id: requestID(s.key, b, []int{i})})
			continue
		}
		// ndjson: item + "\n"; json_array: "[" or "," + item, and "]" at the end.
		extra := 1
		if s.set.mode == ModeJSONArray {
			extra = 2
		}
		if s.over(len(item) + extra) {
			failed[i] = connector.Permanent(fmt.Errorf("message is %d bytes encoded, over max_payload_size_bytes (%d)", len(item), s.set.maxBody))
			continue
		}
		if len(cur.msgs) > 0 && s.over(len(cur.body)+len(item)+extra) {
			flush()
		}
		switch s.set.mode {
		case ModeNDJSON:
			cur.body = append(append(cur.body, item...), '\n')
		default:
			sep := byte(',')
			if len(cur.msgs) == 0 {
				sep = '['
			}
			cur.body = append(append(cur.body, sep), item...)
		}
		cur.msgs = append(cur.msgs, i)
	}
	flush()
	return reqs, failed
}

func (s *Sink) over(n int) bool { return s.set.maxBody > 0 && uint64(n) > s.set.maxBody }

// metadata is the envelope's metadata object, in upstream's field names.
type metadata struct {
	ID              string  `json:"iggy_id"`
	Offset          uint64  `json:"iggy_offset"`
	Timestamp       int64   `json:"iggy_timestamp"`
	Stream          string  `json:"iggy_stream"`
	Topic           string  `json:"iggy_topic"`
	PartitionID     uint32  `json:"iggy_partition_id"`
	Checksum        *uint64 `json:"iggy_checksum,omitempty"`
	OriginTimestamp *int64  `json:"iggy_origin_timestamp,omitempty"`
}

// encode returns one message as the mode sends it: the payload as it is
// for raw, else the envelope or the JSON payload alone.
func (s *Sink) encode(b *connector.SinkBatch, m *connector.Message) ([]byte, error) {
	if s.set.mode == ModeRaw {
		return m.Payload, nil
	}
	payload, err := payloadJSON(b.Schema, m.Payload)
	if err != nil {
		return nil, err
	}
	if !s.set.metadata {
		return payload, nil
	}
	md := metadata{ID: uuid.UUID(m.ID).String(), Offset: m.Offset, Timestamp: m.Timestamp.UnixMicro(),
		Stream: b.Stream, Topic: b.Topic, PartitionID: b.Partition}
	if s.set.checksum {
		md.Checksum = &m.Checksum
	}
	if s.set.originTS {
		ts := m.OriginTimestamp.UnixMicro()
		md.OriginTimestamp = &ts
	}
	head, err := json.Marshal(md)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	out := make([]byte, 0, len(head)+len(payload)+26)
	out = append(out, `{"metadata":`...)
	out = append(out, head...)
	out = append(out, `,"payload":`...)
	out = append(out, payload...)
	return append(out, '}'), nil
}

// payloadJSON is the payload as one line of JSON: JSON compacted, text as
// a JSON string, anything else base64 in an object that says so.
func payloadJSON(schema connector.Schema, p []byte) ([]byte, error) {
	switch schema {
	case connector.SchemaJSON, "":
		var buf bytes.Buffer
		buf.Grow(len(p))
		if err := json.Compact(&buf, p); err != nil {
			return nil, errors.New("payload is not valid JSON (use a raw schema or batch_mode = \"raw\")")
		}
		return buf.Bytes(), nil
	case connector.SchemaText:
		return json.Marshal(string(p))
	default:
		return json.Marshal(struct {
			Data     string `json:"data"`
			Encoding string `json:"iggy_payload_encoding"`
		}{base64.StdEncoding.EncodeToString(p), "base64"})
	}
}

// contentType is the mode's Content-Type.
func (s *Sink) contentType() string {
	switch s.set.mode {
	case ModeNDJSON:
		return "application/x-ndjson"
	case ModeRaw:
		return "application/octet-stream"
	}
	return "application/json"
}
