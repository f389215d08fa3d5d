package iggy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

// tomlString quotes s as a TOML basic string: quotes, backslashes and
// control characters escaped, everything else as it is.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// hostileNames is one replication: the origin's stream, topic and
// consumer group, and the destination's stream and topic.
type hostileNames struct {
	stream, topic, group, destStream, destTopic string
}

var hostileCases = []hostileNames{
	{ // quotes, TOML's and paths' special characters, unicode, a tab
		stream: `orders "EU" 'x' #1 [a.b] = {c} \ / ..`, topic: "naïve café 日本語 🚀 Ω",
		group: "group with spaces\tand a tab", destStream: `copy "A" ✓ \n`, destTopic: "t/../../etc",
	},
	{ // 255 bytes each, the longest names Iggy takes, in multi-byte runes too
		stream: strings.Repeat("é", 127) + "x", topic: strings.Repeat("t", 255), group: strings.Repeat("g", 255),
		destStream: strings.Repeat("ß", 127) + "d", destTopic: strings.Repeat("🚀", 63) + "abc",
	},
	{ // digits that are a name (not numeric id 7), spaces around, invisible runes, a line break
		stream: "007", topic: "  spaces around  ", group: "0x10",
		destStream: "\u00a0nbsp\u200bzero-width\ufeff", destTopic: "line\nbreak\r",
	},
}

func (h hostileNames) toml(key, originAddr string) string {
	return fmt.Sprintf(`type = "source"
key = %q
path = "iggy"
[[streams]]
stream = %s
topic = %s
schema = "raw"
batch_length = 5
linger_time = "0ms"
[plugin_config]
address = %q
username = "iggy"
password = "iggy"
stream = %s
topic = %s
consumer_group = %s
batch_size = 5
poll_interval = "10ms"
`, key, tomlString(h.destStream), tomlString(h.destTopic), originAddr, tomlString(h.stream), tomlString(h.topic), tomlString(h.group))
}

// hostileMessages are messages that Iggy takes and a careless copier
// would change: binary and NUL payloads, invalid UTF-8, a megabyte of
// noise; odd ids (a zero id, which the send gives a UUID); header keys
// with spaces, quotes, unicode, binary and 255 bytes; binary values,
// every kind, NaN, the same key twice, headers near Iggy's 100,000-byte
// limit, and Ferry's own key and deleted headers; origin timestamps at
// the edges: the first microsecond after the epoch (0 means "now") and
// the farthest one batch can hold from it, MaxUint32 µs later.
func hostileMessages(c byte) []iggy.Message {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	noise := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(uint64(c), 1))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	long := make([]byte, 255)
	for i := range long {
		long[i] = byte(255 - i)
	}
	var many []header.Header
	for i := range 190 { // 190 × (10 + 255 + 255) = 98,800 bytes encoded
		many = append(many, header.Header{Key: header.StringKey(fmt.Sprintf("%03d", i) + strings.Repeat("k", 252)), Value: header.RawValue(long)})
	}
	id := func(b ...byte) [16]byte {
		var v [16]byte
		copy(v[:], b)
		v[15] = c
		return v
	}
	var ff [16]byte
	for i := range ff {
		ff[i] = 0xff
	}
	ff[15] = c
	return []iggy.Message{
		{ID: id(1), Payload: []byte{0}, OriginTimestamp: time.UnixMicro(1)},
		{ID: ff, Payload: all, OriginTimestamp: time.UnixMicro(1 + math.MaxUint32)},
		{ID: id(0, 0, 0, 0, 0, 0, 0, 1), Payload: []byte("\xff\xfe invalid UTF-8 \xc3\x28 and NUL \x00 inside\x00"),
			Headers: []header.Header{
				header.New(`key "with" spaces, 'quotes' = ✓ 日本`, header.StringValue("ünïcödé \"v\" \\")),
				header.New(strings.Repeat("é", 127)+"k", header.RawValue(long)),
				{Key: header.BinaryKey([]byte{0, 1, 0xff, 0}), Value: header.RawValue([]byte{0, 0, 0})},
				header.New("dup", header.StringValue("first")),
				header.New("dup", header.StringValue("second")),
				header.New(iggy.KeyHeader, header.RawValue([]byte{0, 0xff})),
				header.New(iggy.DeletedHeader, header.BoolValue(true)),
				header.New("nan", header.Float64Value(math.NaN())),
				header.New("inf", header.Float64Value(math.Inf(-1))),
				header.New("i64", header.Int64Value(math.MinInt64)),
				header.New("u64", header.Uint64Value(math.MaxUint64)),
				header.New("u32", header.Uint32Value(0)),
				header.New("u8", header.Uint8Value(255)),
				header.New("false", header.BoolValue(false)),
			},
			OriginTimestamp: time.UnixMicro(123_456)},
		{Payload: []byte(`{"not": "json"`), OriginTimestamp: time.UnixMicro(math.MaxUint32)}, // zero id: the send picks one
		{ID: id(2), Payload: noise, Headers: many, OriginTimestamp: time.UnixMicro(42)},
		{ID: id(3), Payload: make([]byte, 1000), OriginTimestamp: time.UnixMicro(43)}, // all NUL
	}
}

// Hostile names (quotes, TOML and path characters, unicode, control and
// invisible runes, 255 bytes, digits) for the origin's stream, topic and
// consumer group and for the destination's, and hostile messages: every
// message arrives byte for byte, with its id, headers and origin
// timestamp, once.
func TestHostileNamesAndPayloads(t *testing.T) {
	b := brokertest.Start(t, brokertest.InMemory())
	oc, err := iggy.Dial(t.Context(), b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	t.Cleanup(func() { oc.Close() })
	files := map[string]string{}
	for i, h := range hostileCases {
		_, err := oc.CreateStream(t.Context(), h.stream)
		require.NoError(t, err, "case %d", i)
		_, err = oc.CreateTopic(t.Context(), iggy.NamedID(h.stream), h.topic, 1)
		require.NoError(t, err, "case %d", i)
		_, err = oc.SendMessages(t.Context(), iggy.NamedID(h.stream), iggy.NamedID(h.topic), iggy.ToPartition(0), hostileMessages(byte(i)))
		require.NoError(t, err, "case %d", i)
		files[fmt.Sprintf("replica%d.toml", i)] = h.toml(fmt.Sprintf("replica%d", i), b.Addr())
	}
	run := connectortest.Start(t, files)
	dc, err := iggy.Dial(t.Context(), run.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	t.Cleanup(func() { dc.Close() })
	for i, h := range hostileCases {
		want := readTopic(t, oc, h.stream, h.topic)
		require.Len(t, want, len(hostileMessages(0)))
		connectortest.Eventually(t, fmt.Sprintf("case %d: the copies", i), func() bool {
			d, err := dc.GetTopic(t.Context(), iggy.NamedID(h.destStream), iggy.NamedID(h.destTopic))
			return err == nil && int(d.MessagesCount) >= len(want)
		})
		got := readTopic(t, dc, h.destStream, h.destTopic)
		require.Len(t, got, len(want), "case %d: each message once", i)
		for k := range want {
			requireSameMessage(t, want[k], got[k], fmt.Sprintf("case %d, message %d", i, k))
		}
		// The group the config names is the one the offsets went to.
		g, err := oc.GetConsumerGroup(t.Context(), iggy.NamedID(h.stream), iggy.NamedID(h.topic), iggy.NamedID(h.group))
		require.NoError(t, err, "case %d: consumer group %q", i, h.group)
		require.Equal(t, h.group, g.Name)
	}
}

// A name Iggy cannot take is refused when the configuration is read, and
// the error names the key.
func TestBadNamesNameTheKey(t *testing.T) {
	long := strings.Repeat("n", 256)
	for _, c := range []struct {
		key    string
		values map[string]any
		want   string
	}{
		{"k", map[string]any{"stream": "", "topic": "t"}, "plugin_config.stream: "},
		{"k", map[string]any{"stream": long, "topic": "t"}, "plugin_config.stream: "},
		{"k", map[string]any{"stream": "s", "topic": ""}, "plugin_config.topic: "},
		{"k", map[string]any{"stream": "s", "topic": strings.Repeat("é", 128)}, "plugin_config.topic: "},
		{"k", map[string]any{"stream": "s\xff", "topic": "t"}, "plugin_config.stream: "},
		{"k", map[string]any{"stream": "s", "topic": "t", "consumer_group": long}, "plugin_config.consumer_group: "},
		{"k", map[string]any{"stream": "s", "topic": "t", "consumer_group": "g\xc3"}, "plugin_config.consumer_group: "},
		{strings.Repeat("k", 250), map[string]any{"stream": "s", "topic": "t"}, "plugin_config.consumer_group: "},
	} {
		c.values["address"] = "x:1"
		_, err := NewSource(connector.Config{Key: c.key, Plugin: connector.PluginConfig{Values: c.values}})
		require.ErrorContains(t, err, c.want, "%q", c.values)
	}
	// The longest names are fine.
	_, err := NewSource(connector.Config{Key: "k", Plugin: connector.PluginConfig{Values: map[string]any{"address": "x:1",
		"stream": long[:255], "topic": strings.Repeat("é", 127) + "x", "consumer_group": long[:255]}}})
	require.NoError(t, err)
}

// Messages sent to the origin two hours apart, each with its origin
// timestamp (as any producer's messages are when it sends them over an
// afternoon): both are replicated, timestamps kept.
//
// Iggy's batch gives each message's origin timestamp as a 32-bit µs delta
// from the batch's earliest (about 71.6 minutes): iggy.Client.SendMessages
// sends messages further apart than that as several batches.
func TestOriginTimestampsHoursApart(t *testing.T) {
	o := newOrigin(t)
	first := time.UnixMicro(1_700_000_000_000_000)
	for _, ts := range []time.Time{first, first.Add(2 * time.Hour)} {
		_, err := o.client.SendMessages(t.Context(), iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0),
			[]iggy.Message{{Payload: []byte(ts.String()), OriginTimestamp: ts}})
		require.NoError(t, err)
	}
	run := connectortest.Start(t, map[string]string{"replica.toml": replicaTOML(o.addr, 100)})
	var got []iggy.Message
	connectortest.Eventually(t, "both copies", func() bool { got = run.Messages(t, "copy", "t"); return len(got) >= 2 })
	want := readTopic(t, o.client, "s", "t")
	require.Len(t, got, 2)
	for i := range want {
		requireSameMessage(t, want[i], got[i], fmt.Sprintf("message %d", i))
	}
}
