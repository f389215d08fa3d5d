package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/transform/wasm"
	"github.com/ferryhq/ferry/transform/wasm/wasmtest"
	"github.com/stretchr/testify/require"
)

// withGuest puts the test guest module (transform/wasm/testdata/goguest)
// in the connector directory as guest.wasm.
func (e *env) withGuest() {
	e.t.Helper()
	b, err := os.ReadFile(wasmtest.GoGuest(e.t))
	require.NoError(e.t, err)
	e.write(filepath.Join("connectors", "guest.wasm"), string(b))
	// Compile it now (it is cached), so the slow first compile under the
	// race detector is not within the tests' liveness bounds.
	m, err := wasm.New(context.Background(), b, wasm.Config{Function: "keep"})
	require.NoError(e.t, err)
	require.NoError(e.t, m.Close(context.Background()))
}

// TestWasmTransformsInAPipeline: a Go-built module drops messages by a
// predicate on the source, adds a field on one sink and splits each
// message into two on another.
func TestWasmTransformsInAPipeline(t *testing.T) {
	e := newEnv(t)
	e.withGuest()
	e.sources["numbers"] = &seqSource{max: 40, batch: 7}
	e.sinks["added"], e.sinks["split"] = &collectSink{}, &collectSink{}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1)+`
[transforms.wasm]
module = "guest.wasm"
function = "drop_odd"
`)
	e.connector("added", `
type = "sink"
key = "added"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
consumer_group = "added"
[transforms.wasm]
module = "guest.wasm"
function = "add_field"
[transforms.wasm.config]
key = "via"
value = "wasm"
`)
	e.connector("split", `
type = "sink"
key = "split"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
consumer_group = "split"
[transforms.wasm]
module = "guest.wasm"
function = "split"
[transforms.delete_fields]
fields = ["n"]
`)
	rt := e.start()
	var even []uint64
	for n := uint64(0); n < 40; n += 2 {
		even = append(even, n)
	}
	added, split := e.sinks["added"], e.sinks["split"]
	eventually(t, "20 messages at the add_field sink", func() bool { return len(added.messages()) >= 20 })
	require.Equal(t, even, added.ns(t), "the source's module dropped the odd numbers")
	require.Equal(t, "20", metric(rt, `ferry_transform_counter{connector_key="numbers",connector_type="source",counter="dropped",transform="wasm"}`),
		"the module's counter_add reaches /metrics")
	for _, m := range added.messages() {
		var v map[string]any
		require.NoError(t, json.Unmarshal(m.Payload, &v))
		require.Equal(t, "wasm", v["via"], "payload %s", m.Payload)
	}
	eventually(t, "40 messages at the split sink", func() bool { return len(split.messages()) >= 40 })
	var parts []string
	for _, m := range split.messages() {
		parts = append(parts, string(m.Payload))
	}
	require.Equal(t, slices.Repeat([]string{`{"part":1}`, `{"part":2}`}, 20), parts,
		"each message split in two, in order, and the transform after the module ran on both")
	for _, kind := range []connector.Kind{connector.KindSource, connector.KindSink} {
		for _, info := range rt.Connectors(kind) {
			require.Equal(t, StatusRunning, info.Status, "%s %s: %s", kind, info.Key, info.LastError)
		}
	}
}

// TestWasmModuleStoppedByItsLimitsIsDeadLettered: a module that loops
// forever, and one that allocates without bound, on the message n = 7 is
// stopped by its timeout or memory_limit; the batch it was called with
// goes to the dead-letter topic with the reason, and the rest flows on.
func TestWasmModuleStoppedByItsLimitsIsDeadLettered(t *testing.T) {
	for _, tc := range []struct{ fn, limit, reason string }{
		{"spin", `timeout = "300ms"`, "wasm module ran past its timeout (300ms); stopped"},
		{"grow", `memory_limit = "24MiB"`, "wasm module exceeded its memory limit (24 MiB); stopped"},
	} {
		t.Run(tc.fn, func(t *testing.T) {
			e := newEnv(t)
			e.withGuest()
			e.sources["numbers"] = &seqSource{max: 20, batch: 5}
			sink := &collectSink{}
			e.sinks["guarded"] = sink
			e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
			e.connector("guarded", fmt.Sprintf(`
type = "sink"
key = "guarded"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
on_error = "dead_letter"
dead_letter_topic = "dlq"
[transforms.wasm]
module = "guest.wasm"
function = "%s"
%s
[transforms.wasm.config]
trigger = '"n":7}'
`, tc.fn, tc.limit))
			rt := e.start()
			admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
			require.NoError(t, err)
			defer admin.Close()
			var dead []iggy.Message
			eventually(t, "every message at the sink or dead-lettered", func() bool {
				reply, err := admin.PollMessages(context.Background(), iggy.PollRequest{
					Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("s"), Topic: iggy.NamedID("dlq"),
					Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100,
				})
				if err != nil {
					return false
				}
				dead = reply.Messages
				return len(dead)+len(sink.messages()) >= 20
			})
			got := map[uint64]string{}
			for _, n := range sink.ns(t) {
				got[n] = "sink"
			}
			for _, m := range dead {
				var v struct{ N uint64 }
				require.NoError(t, json.Unmarshal(m.Payload, &v), "the original payload is kept")
				reason, ok := wire.Lookup(m.Headers, HeaderDLQError)
				require.True(t, ok)
				require.True(t, strings.HasPrefix(reason.String(), "transform wasm: "+tc.reason), reason.String())
				require.NotContains(t, got, v.N, "message %d both written and dead-lettered", v.N)
				got[v.N] = "dead"
			}
			require.Len(t, got, 20, "every message once")
			require.Equal(t, "dead", got[7])
			for _, info := range rt.Connectors(connector.KindSink) {
				require.Equal(t, StatusRunning, info.Status, info.LastError)
			}
		})
	}
}

// A module stopped by its limit on a source: the messages of the call go
// to the source's dead-letter topic, as polled, with the reason; the rest
// reaches the stream and the source keeps running (upstream's rule: a
// transform's error goes to the dead-letter path).
func TestWasmFailureOnASourceIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	e.withGuest()
	e.sources["numbers"] = &seqSource{max: 20, batch: 5}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1)+`
[transforms.wasm]
module = "guest.wasm"
function = "spin"
timeout = "300ms"
[transforms.wasm.config]
trigger = '"n":7}'
`)
	rt := e.start()
	var sent, dead []iggy.Message
	eventually(t, "every message in s/t or dead-lettered", func() bool {
		sent, dead = topicMessages(t, rt, "s", "t"), topicMessages(t, rt, "s", "numbers_dead_letter")
		return len(sent)+len(dead) >= 20
	})
	got := map[uint64]string{}
	for _, m := range sent {
		var v struct{ N uint64 }
		require.NoError(t, json.Unmarshal(m.Payload, &v))
		got[v.N] = "sent"
	}
	for _, m := range dead {
		var v struct{ N uint64 }
		require.NoError(t, json.Unmarshal(m.Payload, &v), "the payload as polled")
		h := headersOf(t, m)
		require.True(t, strings.HasPrefix(h[HeaderDLQError], "transform wasm: wasm module ran past its timeout (300ms)"), h[HeaderDLQError])
		require.Equal(t, "numbers", h[HeaderDLQConnector])
		require.Equal(t, "json", h[HeaderDLQSchema])
		require.NotContains(t, got, v.N, "message %d both sent and dead-lettered", v.N)
		got[v.N] = "dead"
	}
	require.Len(t, got, 20, "every message once")
	require.Equal(t, "dead", got[7])
	require.Len(t, dead, 5, "the five messages of the call the module failed")
	i := sourceStatus(rt, "numbers")
	require.Equal(t, StatusRunning, i.Status, i.LastError)
}

// With on_error = "stop", the failed call stops the source before its
// batch is sent, naming the message and the reason.
func TestWasmFailureOnASourceStopsWithOnErrorStop(t *testing.T) {
	e := newEnv(t)
	e.withGuest()
	e.sources["numbers"] = &seqSource{max: 20, batch: 5}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1)+`on_error = "stop"
[transforms.wasm]
module = "guest.wasm"
function = "spin"
timeout = "300ms"
[transforms.wasm.config]
trigger = '"n":7}'
`)
	rt := e.start()
	eventually(t, "source in Error", func() bool { return sourceStatus(rt, "numbers").Status == StatusError })
	i := sourceStatus(rt, "numbers")
	require.Contains(t, i.LastError, "cannot be sent to stream s/t: transform wasm: wasm module ran past its timeout")
	require.Empty(t, topicMessages(t, rt, "s", "numbers_dead_letter"))
}

// The keyed state of a source's wasm transform is saved with the source's
// state: a runtime started again on the same state goes on counting where
// the first one stopped (the module counts messages per key).
func TestWasmKeyedStateOfASourceIsCheckpointed(t *testing.T) {
	e := newEnv(t)
	e.withGuest()
	e.sources["numbers"] = &seqSource{max: 20, batch: 5}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1)+`
[transforms.wasm]
module = "guest.wasm"
function = "count"
`)
	counts := func(rt *Runtime, want int) []string {
		var got []iggy.Message
		eventually(t, fmt.Sprintf("%d messages in s/t", want), func() bool {
			got = topicMessages(t, rt, "s", "t")
			return len(got) >= want
		})
		var c []string
		for _, m := range got {
			c = append(c, headersOf(t, m)["count"])
		}
		return c
	}
	want := func(from, to int) []string {
		var w []string
		for i := from; i <= to; i++ {
			w = append(w, fmt.Sprint(i))
		}
		return w
	}
	rt := e.start()
	require.Equal(t, want(1, 20), counts(rt, 20))
	require.NoError(t, rt.Stop(context.Background()))

	// The registry's test source is e.sources's: a new one, which reads
	// where to go on from the saved state.
	e.sources["numbers"] = &seqSource{max: 30, batch: 5}
	e2 := &env{t: t, dir: e.dir, reg: e.reg, sources: e.sources, sinks: e.sinks}
	rt2 := e2.start()
	require.Equal(t, want(1, 30), counts(rt2, 30), "the count goes on from the saved state")
	i := sourceStatus(rt2, "numbers")
	require.Equal(t, StatusRunning, i.Status, i.LastError)
}

// The keyed state of a sink's wasm transform is saved with the offsets it
// covers: a runtime started again goes on counting where the first one
// stopped, and the messages of the first run are not read again.
func TestWasmKeyedStateOfASinkIsCheckpointed(t *testing.T) {
	e := newEnv(t)
	e.withGuest()
	e.sources["numbers"] = &seqSource{max: 20, batch: 5}
	sink := &collectSink{}
	e.sinks["counted"] = sink
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("counted", `
type = "sink"
key = "counted"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
[transforms.wasm]
module = "guest.wasm"
function = "count"
`)
	counts := func(want int) []string {
		eventually(t, fmt.Sprintf("%d messages at the sink", want), func() bool { return len(sink.messages()) >= want })
		var c []string
		for _, m := range sink.messages() {
			v, _ := m.Header("count")
			c = append(c, v.String())
		}
		return c
	}
	want := func(from, to int) []string {
		var w []string
		for i := from; i <= to; i++ {
			w = append(w, fmt.Sprint(i))
		}
		return w
	}
	rt := e.start()
	require.Equal(t, want(1, 20), counts(20))
	require.NoError(t, rt.Stop(context.Background()))

	e.sources["numbers"] = &seqSource{max: 30, batch: 5}
	e2 := &env{t: t, dir: e.dir, reg: e.reg, sources: e.sources, sinks: e.sinks}
	e2.start()
	require.Equal(t, want(1, 30), counts(30), "the count goes on from the saved state")
}

// A source's module routes the odd numbers to another topic of the
// stream: they arrive there, the even ones in the stream's own topic, each
// once, with one id; a sink's module that routes fails the message.
func TestWasmRouteOnASource(t *testing.T) {
	e := newEnv(t)
	e.withGuest()
	e.sources["numbers"] = &seqSource{max: 30, batch: 7}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1)+`
[transforms.wasm]
module = "guest.wasm"
function = "route_odd"
[transforms.wasm.config]
topic = "odd_numbers"
`)
	rt := e.start()
	ns := func(msgs []iggy.Message) []uint64 {
		var out []uint64
		for _, m := range msgs {
			var v struct{ N uint64 }
			require.NoError(t, json.Unmarshal(m.Payload, &v))
			out = append(out, v.N)
		}
		return out
	}
	var even, odd []uint64
	for i := uint64(0); i < 30; i++ {
		if i%2 == 0 {
			even = append(even, i)
		} else {
			odd = append(odd, i)
		}
	}
	eventually(t, "every message in s/t or s/odd_numbers", func() bool {
		return len(topicMessages(t, rt, "s", "t"))+len(topicMessages(t, rt, "s", "odd_numbers")) >= 30
	})
	require.Equal(t, even, ns(topicMessages(t, rt, "s", "t")))
	require.Equal(t, odd, ns(topicMessages(t, rt, "s", "odd_numbers")), "routed, in order, once")
	require.Empty(t, topicMessages(t, rt, "s", "numbers_dead_letter"))
	require.Equal(t, "30", metric(rt, `iggy_connector_messages_sent_total{connector_key="numbers",connector_type="source"}`))
	i := sourceStatus(rt, "numbers")
	require.Equal(t, StatusRunning, i.Status, i.LastError)
}

func TestWasmRouteOnASinkIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	e.withGuest()
	e.sources["numbers"] = &seqSource{max: 10, batch: 5}
	sink := &collectSink{}
	e.sinks["routing"] = sink
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("routing", `
type = "sink"
key = "routing"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
on_error = "dead_letter"
dead_letter_topic = "dlq"
[transforms.wasm]
module = "guest.wasm"
function = "route_odd"
`)
	rt := e.start()
	eventually(t, "the even ones at the sink, the odd ones dead-lettered", func() bool {
		return len(sink.messages()) >= 5 && len(topicMessages(t, rt, "s", "dlq")) >= 5
	})
	require.Equal(t, []uint64{0, 2, 4, 6, 8}, sink.ns(t))
	for _, m := range topicMessages(t, rt, "s", "dlq") {
		require.Contains(t, headersOf(t, m)[HeaderDLQError], `routed the message to topic "odd": routing is for sources`)
	}
}
