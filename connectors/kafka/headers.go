package kafka

import (
	"unicode/utf8"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/twmb/franz-go/pkg/kgo"
)

// keyHeader is the Iggy user header that carries a message's key (as
// `ferry message send --key` and package live write it).
const keyHeader = iggy.KeyHeader

// kafkaHeaders turns Iggy user headers into Kafka headers and the key:
// the `key` header (a string or raw value) is the record key and not
// repeated as a header; string and raw values go as their bytes, other
// kinds as their decimal text. Binary header keys go as their bytes.
func kafkaHeaders(hs []connector.Header) (key []byte, out []kgo.RecordHeader) {
	for _, h := range hs {
		if h.Key.Is(keyHeader) && key == nil && (h.Value.Kind == header.KindString || h.Value.Kind == header.KindRaw) {
			key = append([]byte{}, h.Value.Data...)
			continue
		}
		var v []byte
		if h.Value.Kind == header.KindString || h.Value.Kind == header.KindRaw {
			v = h.Value.Data
		} else {
			v = []byte(h.Value.String())
		}
		out = append(out, kgo.RecordHeader{Key: string(h.Key.Data), Value: v})
	}
	return key, out
}

// iggyValue is a Kafka key or header value as an Iggy header value: a
// string when it is UTF-8, else raw bytes.
func iggyValue(b []byte) connector.HeaderValue {
	if utf8.Valid(b) {
		return header.StringValue(string(b))
	}
	return header.RawValue(append([]byte(nil), b...))
}

// fitsIggy reports whether a header key and value fit Iggy's limits:
// 1..255 bytes each.
func fitsIggy(key string, value []byte) bool {
	return len(key) >= 1 && len(key) <= 255 && len(value) >= 1 && len(value) <= 255
}
