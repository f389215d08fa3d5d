package nats

import (
	"sort"
	"strings"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/nats-io/nats.go"
)

// natsHeaderKey reports whether k can be a NATS header key as Ferry
// writes it: printable ASCII without ':' or spaces (the header block is
// text, "Key: value\r\n"), and not a reserved Nats-* header, which would
// change what JetStream does with the message (Nats-Msg-Id,
// Nats-Expected-*, Nats-Rollup ...).
func natsHeaderKey(k string) bool {
	if k == "" || len(k) > 255 || strings.HasPrefix(strings.ToLower(k), "nats-") {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return false
		}
	}
	return true
}

// natsHeaderValue reports whether v can be a header value: no CR, LF or
// other control characters but tab.
func natsHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// toNATS copies Iggy headers into h: string values as they are, other
// kinds as their text (header.Value.String). Headers NATS cannot carry
// are left out and counted.
func toNATS(h nats.Header, hs []connector.Header) (dropped int) {
	for _, x := range hs {
		k, v := x.Key.String(), x.Value.String()
		if x.Key.Kind != header.KindString || !natsHeaderKey(k) || !natsHeaderValue(v) {
			dropped++
			continue
		}
		h[k] = []string{v} // as given: nats.Header.Set would canonicalize it
	}
	return dropped
}

// fromNATS is the Iggy headers for NATS headers, sorted by key: each a
// string, its values joined by ", "; those outside Iggy's limits (1..255
// bytes for key and value) are left out and counted.
func fromNATS(h nats.Header) (out []connector.Header, dropped int) {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.Join(h[k], ", ")
		if !fitsIggy(k, v) {
			dropped++
			continue
		}
		out = append(out, connector.StringHeader(k, v))
	}
	return out, dropped
}

// fitsIggy reports whether a header key and value fit Iggy's limits.
func fitsIggy(key, value string) bool {
	return len(key) >= 1 && len(key) <= 255 && len(value) >= 1 && len(value) <= 255
}
