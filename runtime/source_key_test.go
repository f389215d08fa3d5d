package runtime

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

func keyOf(t *testing.T, m *iggy.Message) (string, bool) {
	t.Helper()
	v, ok := m.Key()
	if !ok {
		return "", false
	}
	require.Equal(t, header.KindString, v.Kind, "a derived key is a string")
	return string(v.Data), true
}

func TestApplyKey(t *testing.T) {
	t.Parallel()
	field := func(p string) *config.StreamKey { return &config.StreamKey{KeyField: config.KeyPath(p)} }
	tmpl := func(s string) *config.StreamKey { return &config.StreamKey{KeyTemplate: config.KeyTemplate(s)} }
	for i, tc := range []struct {
		k       *config.StreamKey
		payload string
		want    string // "" for no key
	}{
		{field("id"), `{"id":"a-1"}`, "a-1"},
		{field("id"), `{"id":42}`, "42"},
		{field("id"), `{"id":1.5e3}`, "1.5e3"},
		{field("id"), `{"id":true}`, "true"},
		{field("id"), `{"id":"a","id":"b"}`, "b"},
		{field("id"), `{"id":"\u00e9\n"}`, "é\n"},
		{field("user.id"), `{"user":{"name":"x","id":"u7"},"id":"top"}`, "u7"},
		{field("user.id"), `{"user":"u7"}`, ""},
		{field("id"), `{"other":1}`, ""},
		{field("id"), `{"id":null}`, ""},
		{field("id"), `{"id":{"a":1}}`, ""},
		{field("id"), `{"id":[1]}`, ""},
		{field("id"), `{"id":""}`, ""},
		{field("id"), `[{"id":1}]`, ""},
		{field("id"), `not json`, ""},
		{tmpl("{customer}-{region}"), `{"customer":"c9","region":"eu","x":0}`, "c9-eu"},
		{tmpl("{{{a.b}}}:{n}"), `{"a":{"b":"v"},"n":3}`, "{v}:3"},
		{tmpl("{customer}-{region}"), `{"customer":"c9"}`, ""},
		{&config.StreamKey{}, `{"id":1}`, ""},
	} {
		m := iggy.Message{Payload: []byte(tc.payload)}
		require.NoError(t, applyKey(tc.k, &m), "case %d", i)
		got, ok := keyOf(t, &m)
		require.Equal(t, tc.want != "", ok, "case %d: %s", i, tc.payload)
		require.Equal(t, tc.want, got, "case %d: %s", i, tc.payload)

		// With key_required, no key is the message's rejection, naming
		// the rule.
		req := *tc.k
		req.KeyRequired = true
		m = iggy.Message{Payload: []byte(tc.payload)}
		err := applyKey(&req, &m)
		if tc.want != "" {
			require.NoError(t, err, "case %d", i)
			continue
		}
		require.ErrorContains(t, err, "key_required = true", "case %d", i)
		if req.HasKeyRule() {
			require.ErrorContains(t, err, "key_", "case %d: the error names the rule", i)
		}
	}

	// A key already there stays, whatever the payload says; the headers
	// of the source's message are not written through.
	src := []header.Header{header.New(iggy.KeyHeader, header.RawValue([]byte{1, 2})), header.New("x", header.StringValue("y"))}
	m := iggy.Message{Payload: []byte(`{"id":"other"}`), Headers: src}
	require.NoError(t, applyKey(field("id"), &m))
	v, _ := m.Key()
	require.Equal(t, []byte{1, 2}, v.Data)
	shared := make([]header.Header, 1, 4)
	shared[0] = header.New("x", header.StringValue("y"))
	m = iggy.Message{Payload: []byte(`{"id":"k"}`), Headers: shared}
	require.NoError(t, applyKey(field("id"), &m))
	require.Len(t, m.Headers, 2)
	require.Empty(t, shared[:2][1].Key.Data, "the key was appended to a copy, not into the shared array")

	// A key Iggy would refuse in a header is an error.
	m = iggy.Message{Payload: []byte(`{"id":"` + strings.Repeat("k", 256) + `"}`)}
	require.ErrorContains(t, applyKey(field("id"), &m), "256 bytes")
}

// A file source with key_field: each line's key is in the key header of
// the message sent; with key_required a line without the field goes to
// the dead-letter topic with the reason, and the others are sent.
func TestSourceKeyField(t *testing.T) {
	const lines = "{\"user\":{\"id\":\"u1\"},\"n\":0}\n{\"n\":1}\n{\"user\":{\"id\":7},\"n\":2}\n"
	e, _ := fileSourceEnv(t, lines, "key_field = \"user.id\"\n")
	rt := e.start()
	eventually(t, "three lines in s/t", func() bool { return len(topicMessages(t, rt, "s", "t")) >= 3 })
	sent := topicMessages(t, rt, "s", "t")
	require.Len(t, sent, 3)
	// The key picks the partition, so keyed and keyless messages go out in
	// sends of their own: only a key's messages keep their order.
	byLine := map[int]iggy.Message{}
	for _, m := range sent {
		var v struct{ N int }
		require.NoError(t, json.Unmarshal(m.Payload, &v))
		byLine[v.N] = m
	}
	for i, want := range []string{"u1", "", "7"} {
		m := byLine[i]
		got, ok := keyOf(t, &m)
		require.Equal(t, want != "", ok, "line %d", i)
		require.Equal(t, want, got, "line %d", i)
	}
}

func TestSourceKeyRequired(t *testing.T) {
	const lines = "{\"c\":\"a\",\"r\":\"eu\"}\n{\"c\":\"b\"}\n{\"c\":\"d\",\"r\":\"us\"}\n"
	e, _ := fileSourceEnv(t, lines, "key_template = \"{c}/{r}\"\nkey_required = true\n")
	rt := e.start()
	eventually(t, "two lines in s/t", func() bool { return len(topicMessages(t, rt, "s", "t")) >= 2 })
	var dead []iggy.Message
	eventually(t, "the keyless line dead-lettered", func() bool {
		dead = topicMessages(t, rt, "s", "files_dead_letter")
		return len(dead) > 0
	})
	sent := topicMessages(t, rt, "s", "t")
	require.Equal(t, []string{`{"c":"a","r":"eu"}`, `{"c":"d","r":"us"}`}, payloads(sent))
	for i, want := range []string{"a/eu", "d/us"} {
		got, _ := keyOf(t, &sent[i])
		require.Equal(t, want, got)
	}
	require.Len(t, dead, 1)
	require.Equal(t, `{"c":"b"}`, string(dead[0].Payload))
	reason := headersOf(t, dead[0])[HeaderDLQError]
	require.Contains(t, reason, `key_required = true: key_template "{c}/{r}": field "r": the payload has no "r"`)
}

// keyPartitioning routes each message to its key's partition, as Iggy's
// partitioning by key does; keyless messages still go out.
func TestKeyPartitioning(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := brokertest.Start(t, brokertest.InMemory())
	c, err := iggy.Dial(ctx, b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("s"), "t", 3)
	require.NoError(t, err)

	p := &config.ProducerStream{Stream: "s", Topic: "t", StreamKey: config.StreamKey{KeyField: "id"}}
	require.Len(t, keyPartitioning(p), 1)
	require.Empty(t, keyPartitioning(&config.ProducerStream{Stream: "s", Topic: "t"}), "no rule: the producer is as before")
	prod, err := iggy.NewProducer(c, iggy.NamedID("s"), iggy.NamedID("t"), keyPartitioning(p)...)
	require.NoError(t, err)
	defer prod.Close(ctx)
	var msgs []iggy.Message
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		m := iggy.Message{Payload: []byte(`{"id":"` + k + `"}`)}
		require.NoError(t, applyKey(&p.StreamKey, &m))
		msgs = append(msgs, m)
	}
	require.NoError(t, prod.Send(ctx, msgs...).Wait(ctx))
	seen := 0
	for part := uint32(0); part < 3; part++ {
		reply, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("s"), Topic: iggy.NamedID("t"), Partition: iggy.Partition(part), Strategy: iggy.First(), Count: 100})
		require.NoError(t, err)
		for _, m := range reply.Messages {
			k, _ := keyOf(t, &m)
			require.Equal(t, wire.PartitionForKey([]byte(k), 3), part, "key %s", k)
			seen++
		}
	}
	require.Equal(t, len(msgs), seen)
}

func FuzzApplyKey(f *testing.F) {
	for _, s := range []string{`{"id":"a"}`, `{"user":{"id":1}}`, `{"id":"\ud800"}`, `{`, `{"id":[`, `"x"`, `{"user":{"id":{"x":1}}}`} {
		f.Add(s)
	}
	rules := []*config.StreamKey{{KeyField: "id"}, {KeyField: "user.id", KeyRequired: true}, {KeyTemplate: "{id}-{user.id}"}}
	f.Fuzz(func(t *testing.T, payload string) {
		for _, k := range rules {
			m := iggy.Message{Payload: []byte(payload)}
			err := applyKey(k, &m)
			v, ok := m.Key()
			if err != nil && ok {
				t.Fatalf("%q: an error and a key %q", payload, v.Data)
			}
			if ok && (len(v.Data) == 0 || len(v.Data) > 255) {
				t.Fatalf("%q: a key of %d bytes", payload, len(v.Data))
			}
		}
	})
}

// BenchmarkApplyKey derives a dotted key_field from a 300-byte payload.
func BenchmarkApplyKey(b *testing.B) {
	payload := []byte(`{"event":"order.created","at":"2026-01-01T00:00:00Z","user":{"name":"Ada Lovelace","email":"ada@example.com","id":"u-123456"},` +
		`"items":[{"sku":"A1","qty":2},{"sku":"B2","qty":1}],"total":{"amount":129.5,"currency":"EUR"},"note":"leave at the door"}`)
	k := &config.StreamKey{KeyField: "user.id"}
	cpu := cpuTime()
	b.ReportAllocs()
	for b.Loop() {
		m := iggy.Message{Payload: payload}
		if err := applyKey(k, &m); err != nil || len(m.Headers) != 1 {
			b.Fatal("no key", err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/n, "cpu-µs/msg")
}
