package mqtt

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/mqtttest"
	"github.com/stretchr/testify/require"
)

// The conformance suite at each QoS: what Consume acknowledged is at the
// subscriber, in order; a message above max_message_size is the one
// MessageErrors names.
func TestSinkConformance(t *testing.T) {
	t.Parallel()
	for _, qos := range []int64{0, 1, 2} {
		t.Run(fmt.Sprintf("qos %d", qos), func(t *testing.T) {
			t.Parallel()
			url := mqtttest.URL(t)
			base := mqtttest.Name(t, "conf")
			sub := subscribe(t, url, base+"/#")
			topic := base + "/conformance/t"
			connectortest.Sink(t, connectortest.SinkSuite{
				New: func(t *testing.T) connector.Sink {
					return newSink(t, map[string]any{"urls": []any{url}, "topic": base + "/{stream}/{topic}", "qos": qos,
						"max_message_size": "1KiB"})
				},
				Read: func(t *testing.T) []string {
					if qos == 0 {
						// QoS 0 has no acknowledgement: a message the sink wrote
						// to its socket may reach mosquitto after the marker
						// another connection sends. Wait for the marker, then
						// until nothing more arrives.
						return sub.settleQuiet(t, topic)
					}
					return sub.settle(t, topic)
				},
				Poison: []byte(`{"big":"` + strings.Repeat("x", 2048) + `"}`),
			})
		})
	}
}

// Bad configurations fail with the key named.
func TestSinkConfigErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{"topic": "a"}, "urls"},
		{map[string]any{"urls": []any{"http://x:1883"}, "topic": "a"}, "urls"},
		{map[string]any{"urls": []any{"tcp://x:1883"}}, "topic"},
		{map[string]any{"urls": []any{"tcp://x:1883"}, "topic": "a/+/b"}, "topic"},
		{map[string]any{"urls": []any{"tcp://x:1883"}, "topic": "a/#"}, "topic"},
		{map[string]any{"urls": []any{"tcp://x:1883"}, "topic": "a\x00b"}, "topic"},
		{map[string]any{"urls": []any{"tcp://x:1883"}, "topic": "$SYS/x"}, "topic"},
		{map[string]any{"urls": []any{"tcp://x:1883"}, "topic": "a/{offset}"}, "topic"},
		{map[string]any{"urls": []any{"tcp://x:1883"}, "topic": "a/{stream"}, "topic"},
		{map[string]any{"urls": []any{"tcp://x:1883"}, "topic": "a", "qos": int64(3)}, "qos"},
	} {
		_, err := NewSink(cfg(c.values))
		require.Error(t, err, "%v", c.values)
		require.Contains(t, err.Error(), c.key, "%v", c.values)
	}
	_, err := NewSink(cfg(map[string]any{"urls": []any{"tcp://u:secret@x:1883"}, "topic": "a/+"}))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret")
}

// Stream and topic names that would make a topic no broker takes (a
// wildcard, NUL, a control character, invalid UTF-8, $ at the start) are
// refused per message, permanently, before anything is sent; the
// connection stays usable, and hostile payloads are carried as bytes.
func TestSinkHostileTopicsAndPayloads(t *testing.T) {
	t.Parallel()
	url := mqtttest.URL(t)
	base := mqtttest.Name(t, "hostile")
	sub := subscribe(t, url, base+"/#")
	s := newSink(t, map[string]any{"urls": []any{url}, "topic": base + "/{stream}/{topic}"})
	open(t, s)
	ctx := context.Background()
	for _, name := range []string{"a+b", "#", "nul\x00", "bell\a", "\xff\xfe", "c1\u0085", "x\uffff"} {
		b := &connector.SinkBatch{Stream: name, Topic: "t", Messages: []connector.Message{{Payload: []byte(`{}`)}, {Payload: []byte(`{}`)}}}
		err := s.Consume(ctx, b)
		var per connector.MessageErrors
		require.True(t, errors.As(err, &per), "stream %q: %v", name, err)
		require.Len(t, per, 2)
		require.True(t, connector.IsPermanent(per[0]), "stream %q: %v", name, per[0])
	}
	// A template whose rendering starts with $.
	dollar := newSink(t, map[string]any{"urls": []any{url}, "topic": "{stream}/x"})
	open(t, dollar)
	err := dollar.Consume(ctx, &connector.SinkBatch{Stream: "$SYS", Topic: "t", Messages: []connector.Message{{Payload: []byte(`{}`)}}})
	var per connector.MessageErrors
	require.True(t, errors.As(err, &per) && connector.IsPermanent(per[0]), "%v", err)

	payloads := []string{"", "\x00\x01\xff", strings.Repeat("é", 300), `{"topic":"#/+"}`}
	b := &connector.SinkBatch{Stream: "ok stream", Topic: "ünïcode/levels"}
	for _, p := range payloads {
		b.Messages = append(b.Messages, connector.Message{Payload: []byte(p)})
	}
	require.NoError(t, s.Consume(ctx, b), "the connection survived the refusals")
	require.Equal(t, payloads, sub.settle(t, base+"/ok stream/ünïcode/levels"))
}
