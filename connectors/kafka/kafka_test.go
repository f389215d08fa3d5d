package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	topic := "out"
	c := startCluster(t, []string{topic})
	r := newReader(t, addrOf(c), topic)
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink {
			s, err := NewSink(cfg(map[string]any{"brokers": []any{addrOf(c)}, "topic": topic, "max_message_bytes": "64KiB"}))
			require.NoError(t, err)
			return s
		},
		Read: func(t *testing.T) []string {
			var out []string
			for _, rec := range r.all(t, addrOf(c), topic) {
				out = append(out, string(rec.Value))
			}
			return out
		},
		// Over max_message_bytes: the client refuses it, alone.
		Poison: []byte(`{"big":"` + strings.Repeat("x", 100<<10) + `"}`),
	})
}

// A record the broker itself refuses (over its message.max.bytes) is
// dead-lettered alone with the broker's reason; its batch neighbours are
// written.
func TestSinkBrokerRefusalIsPermanentForThatRecordOnly(t *testing.T) {
	t.Parallel()
	c := startCluster(t, []string{"out"}, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "20000"}))
	s, err := NewSink(cfg(map[string]any{"brokers": []any{addrOf(c)}, "topic": "out"}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	defer s.Close(ctx)
	b := &connector.SinkBatch{Stream: "s", Topic: "t", Messages: []connector.Message{
		{Payload: []byte(`{"n":0}`)}, {Payload: incompressible(50000)}, {Payload: []byte(`{"n":2}`)}}}
	err = s.Consume(ctx, b)
	per, ok := err.(connector.MessageErrors)
	require.True(t, ok, "a MessageErrors, got %v", err)
	require.Len(t, per, 1)
	require.True(t, connector.IsPermanent(per[1]), "%v", per[1])
	require.Contains(t, per[1].Error(), "MESSAGE_TOO_LARGE")
	vals := newReader(t, addrOf(c), "out").values(t, 2)
	require.Contains(t, vals, `{"n":0}`)
	require.Contains(t, vals, `{"n":2}`)
}

// Key, headers and metadata: the `key` header is the record key, the
// other headers Kafka headers, and the topic template takes sanitized
// Iggy names.
func TestSinkKeyHeadersAndTopicTemplate(t *testing.T) {
	t.Parallel()
	c := startCluster(t, []string{"iggy.shop_1_.orders__"})
	s, err := NewSink(cfg(map[string]any{"brokers": []any{addrOf(c)}, "topic": "iggy.{stream}.{topic}"}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	defer s.Close(ctx)
	id := uuid.New()
	m := connector.Message{ID: id, Payload: []byte(`{"n":1}`), Offset: 42, OriginTimestamp: time.UnixMilli(1_700_000_000_000)}
	m.SetHeader("key", header.StringValue("customer-7"))
	m.SetHeader("tenant", header.StringValue("acme"))
	m.SetHeader("count", header.Uint32Value(12))
	require.NoError(t, s.Consume(ctx, &connector.SinkBatch{Stream: "shop 1/", Topic: "orders\n'", Partition: 3,
		Messages: []connector.Message{m}}))
	recs := newReader(t, addrOf(c), "iggy.shop_1_.orders__")
	var got []string
	connectortest.Eventually(t, "the record", func() bool { return len(recs.records(t)) == 1 })
	rec := recs.records(t)[0]
	require.Equal(t, "customer-7", string(rec.Key))
	require.Equal(t, int64(1_700_000_000_000), rec.Timestamp.UnixMilli())
	hs := map[string]string{}
	for _, h := range rec.Headers {
		hs[h.Key] = string(h.Value)
		got = append(got, h.Key)
	}
	require.NotContains(t, got, "key", "the key is the record key, not a header")
	require.Equal(t, map[string]string{"tenant": "acme", "count": "12", "iggy_stream": "shop 1/", "iggy_topic": "orders\n'",
		"iggy_partition_id": "3", "iggy_offset": "42", "iggy_message_id": id.String()}, hs)
}

// A template that makes an illegal topic name is a permanent error
// naming it, not a panic or a request.
func TestSinkIllegalTopicFromTemplate(t *testing.T) {
	t.Parallel()
	c := startCluster(t, []string{"x"})
	s, err := NewSink(cfg(map[string]any{"brokers": []any{addrOf(c)}, "topic": "{topic}"}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	defer s.Close(ctx)
	for _, tn := range []string{".", "..", strings.Repeat("a", 300)} {
		err := s.Consume(ctx, &connector.SinkBatch{Stream: "s", Topic: tn, Messages: []connector.Message{{Payload: []byte("{}")}}})
		require.True(t, connector.IsPermanent(err), "%q: %v", tn, err)
		require.Contains(t, err.Error(), "topic")
	}
}

func TestBadConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{"topic": "t"}, "brokers"},
		{map[string]any{"brokers": []any{"nohost"}, "topic": "t"}, "brokers"},
		{map[string]any{"brokers": []any{"h:99999"}, "topic": "t"}, "brokers"},
		{map[string]any{"brokers": []any{"h:9092"}, "topic": "bad topic"}, "topic"},
		{map[string]any{"brokers": []any{"h:9092"}}, "topic"},
		{map[string]any{"brokers": []any{"h:9092"}, "topic": "t", "sasl_mechanism": "PLAIN"}, "sasl_username"},
		{map[string]any{"brokers": []any{"h:9092"}, "topic": "t", "sasl_mechanism": "GSSAPI"}, "sasl_mechanism"},
		{map[string]any{"brokers": []any{"h:9092"}, "topic": "t", "tls_ca_file": "/x"}, "tls_ca_file"},
		{map[string]any{"brokers": []any{"h:9092"}, "topic": "t", "tls": true, "tls_ca_file": "/nonexistent/ca.pem"}, "tls_ca_file"},
		{map[string]any{"brokers": []any{"h:9092"}, "topic": "t", "compression": "brotli"}, "compression"},
	}
	for i, c := range cases {
		_, err := NewSink(cfg(c.values))
		require.Error(t, err, "case %d", i)
		require.Contains(t, err.Error(), c.key, "case %d", i)
	}
	for i, c := range []struct {
		values map[string]any
		key    string
	}{
		{map[string]any{"brokers": []any{"h:9092"}, "consumer_group": "g"}, "topics"},
		{map[string]any{"brokers": []any{"h:9092"}, "topics": []any{"t"}}, "consumer_group"},
		{map[string]any{"brokers": []any{"h:9092"}, "topics": []any{"a/b"}, "consumer_group": "g"}, "topics"},
		{map[string]any{"brokers": []any{"h:9092"}, "topics": []any{"t"}, "consumer_group": "g", "start_offset": "middle"}, "start_offset"},
		{map[string]any{"brokers": []any{"h:9092"}, "topics": []any{"t"}, "consumer_group": "g", "batch_size": int64(0)}, "batch_size"},
	} {
		_, err := NewSource(cfg(c.values))
		require.Error(t, err, "source case %d", i)
		require.Contains(t, err.Error(), c.key, "source case %d", i)
	}
}

// The password is a secret: never in the parsed settings' log form.
func TestSASLPasswordIsSecretAndLogsIn(t *testing.T) {
	t.Parallel()
	c := startCluster(t, []string{"out"}, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "ferry", "s3cret-pw"))
	values := map[string]any{"brokers": []any{addrOf(c)}, "topic": "out", "sasl_mechanism": "scram-sha-256",
		"sasl_username": "ferry", "sasl_password": "s3cret-pw"}
	set, err := SinkSpec.Parse(cfg(values).Plugin)
	require.NoError(t, err)
	require.NotContains(t, set.LogValue().String(), "s3cret-pw")
	s, err := NewSink(cfg(values))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	require.NoError(t, s.Consume(ctx, &connector.SinkBatch{Stream: "s", Topic: "t", Messages: []connector.Message{{Payload: []byte(`{"a":1}`)}}}))
	require.NoError(t, s.Close(ctx))

	values["sasl_password"] = "wrong"
	bad, err := NewSink(cfg(values))
	require.NoError(t, err)
	err = bad.Open(ctx)
	require.Error(t, err, "a wrong password is refused")
	require.NotContains(t, err.Error(), "wrong")
}

func TestSourceConformance(t *testing.T) {
	t.Parallel()
	topic := "in"
	c := startCluster(t, []string{topic}, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	var mu sync.Mutex
	n := 0
	connectortest.Source(t, connectortest.SourceSuite{
		New: func(t *testing.T) connector.Source {
			s, err := NewSource(cfg(map[string]any{"brokers": []any{addrOf(c)}, "topics": []any{topic}, "consumer_group": "g",
				"batch_size": int64(5), "fetch_max_wait": "50ms", "session_timeout": "6s"}))
			require.NoError(t, err)
			return s
		},
		Add: func(t *testing.T, k int) []string {
			mu.Lock()
			defer mu.Unlock()
			vals := produce(t, addrOf(c), topic, n, k)
			n += k
			return vals
		},
		StableIDs:     true,
		AckedPosition: true,
	})
}

func incompressible(n int) []byte {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return []byte(hex.EncodeToString(b))
}
