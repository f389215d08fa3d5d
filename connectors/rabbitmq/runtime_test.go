package rabbitmq

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/amqptest"
	"github.com/ferryhq/ferry/runtime"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// upstreamSinkTOML is upstream's example connector file for the RabbitMQ
// sink (core/connectors/sinks/rabbitmq_sink/config.toml), adapted only
// in the server address, the exchange name and the dead-letter policy.
func upstreamSinkTOML(url, exchange, extra string) string {
	return fmt.Sprintf(`type = "sink"
key = "rabbitmq"
enabled = true
version = 0
name = "RabbitMQ sink"
path = "../../target/release/libiggy_connector_rabbitmq_sink"
verbose = true

[[streams]]
stream = "test_stream"
topics = ["test_topic"]
schema = "json"
batch_length = 100
poll_interval = "5ms"
consumer_group = "rabbitmq_sink_connector"
%s
[plugin_config]
amqp_url = %q
exchange = %q
exchange_type = "topic"
routing_key = "iggy.messages"
durable_exchange = true
delivery_mode = "persistent"
include_metadata = true
verbose_logging = false
max_retries = 3
retry_delay_secs = 1
max_retry_delay_secs = 5
max_message_size = "1MiB"
`, extra, url, exchange)
}

func sendJSON(t *testing.T, rt interface{ IggyAddress() string }, stream, topic string, payloads ...string) {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var msgs []iggy.Message
	for _, p := range payloads {
		msgs = append(msgs, iggy.Message{Payload: []byte(p)})
	}
	_, err = admin.SendMessages(context.Background(), iggy.NamedID(stream), iggy.NamedID(topic), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
}

// collect reads q until it has n messages (acknowledging them).
func collect(t *testing.T, ch *amqp.Channel, q string, n int) []string {
	t.Helper()
	var got []string
	connectortest.Eventually(t, fmt.Sprintf("%d messages in %s", n, q), func() bool {
		for _, d := range drain(t, ch, q) {
			got = append(got, string(d.Body))
		}
		return len(got) >= n
	})
	return got
}

// Upstream's connector file runs unchanged (but for addresses); a
// message over the server's limit is dead-lettered with the reason and
// the others are published.
func TestUpstreamSinkFileRunsAndDeadLettersARefusedMessage(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	exchange := amqptest.Name(t, "x")
	ch, q := queueOn(t, url, exchange, "iggy.messages")
	run := connectortest.Start(t, map[string]string{"rabbitmq.toml": upstreamSinkTOML(url, exchange,
		"on_error = \"dead_letter\"\ndead_letter_topic = \"dlq\"\nretry_backoff = \"5ms\"")})
	big := `{"big":"` + strings.Repeat("x", 1100<<10) + `"}`
	sendJSON(t, run.Runtime, "test_stream", "test_topic", `{"n":0}`, big, `{"n":2}`)
	got := collect(t, ch, q, 2)
	require.Equal(t, []string{`{"n":0}`, `{"n":2}`}, got)

	admin, err := iggy.Dial(context.Background(), run.Runtime.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var dead []iggy.Message
	connectortest.Eventually(t, "a dead letter", func() bool {
		r, err := admin.PollMessages(context.Background(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("test_stream"), Topic: iggy.NamedID("dlq"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
		if err != nil {
			return false
		}
		dead = r.Messages
		return len(dead) == 1
	})
	v, ok := header.Get(dead[0].Headers, runtime.HeaderDLQError)
	require.True(t, ok, "the dead letter carries its reason")
	require.Contains(t, v.String(), "above max_message_size")
}

// RabbitMQ → Iggy → RabbitMQ through the runtime: every message arrives,
// with its headers.
func TestSourceToSinkThroughIggy(t *testing.T) {
	t.Parallel()
	url := amqptest.URL(t)
	in := amqptest.Name(t, "in")
	out := amqptest.Name(t, "x")
	ch, q := queueOn(t, url, out, "iggy.messages")
	run := connectortest.Start(t, map[string]string{
		"in.toml": fmt.Sprintf(`type = "source"
key = "from_rabbit"
path = "rabbitmq"
[[streams]]
stream = "test_stream"
topic = "test_topic"
schema = "json"
[plugin_config]
amqp_url = %q
queue = %q
batch_size = 20
batch_wait = "10ms"
`, url, in),
		"out.toml": upstreamSinkTOML(url, out, ""),
	})
	// The source declares the queue when it opens.
	var published []string
	connectortest.Eventually(t, "the source's queue", func() bool {
		conn, err := amqp.Dial(url)
		if err != nil {
			return false
		}
		defer conn.Close()
		c, err := conn.Channel()
		if err != nil {
			return false
		}
		_, err = c.QueueDeclarePassive(in, true, false, false, false, nil)
		return err == nil
	})
	published = publish(t, url, in, 0, 250)
	t.Cleanup(func() {
		if t.Failed() {
			for _, k := range []connector.Kind{connector.KindSource, connector.KindSink} {
				for _, info := range run.Runtime.Connectors(k) {
					t.Logf("%s %s: %s %s", k, info.Key, info.Status, info.LastError)
				}
			}
		}
	})
	got := collect(t, ch, q, 250)
	sort.Strings(got)
	sort.Strings(published)
	require.Equal(t, published, got)
}

// A RabbitMQ that is down for a while: the sink restarts with backoff and
// nothing sent to Iggy meanwhile is lost.
func TestSinkSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops a RabbitMQ of its own")
	}
	t.Parallel()
	srv := amqptest.Private(t)
	// The default exchange, to a durable queue named by the routing key.
	// What is declared seconds before a SIGKILL (a queue, a binding) may
	// not survive RabbitMQ's restart: the sink's messages were then
	// confirmed and routed nowhere (mandatory = false), and the test
	// failed under load although the sink did its part (seen as
	// StoredOffset = CurrentOffset, then 312 NO_ROUTE; another time 404
	// no queue). So the sink reaches the server through a proxy that
	// refuses it until the test declared the queue again after the restart.
	const exchange, q = "", "iggy.messages"
	ch := durableQueue(t, srv.URL, q)
	gate, proxied := newStallProxy(t, srv.URL, 0, 0) // class 0: forwards all
	run := connectortest.Start(t, map[string]string{"rabbitmq.toml": upstreamSinkTOML(proxied, exchange, "retry_backoff = \"5ms\"")})
	sendJSON(t, run.Runtime, "test_stream", "test_topic", `{"n":0}`, `{"n":1}`)
	require.Len(t, collect(t, ch, q, 2), 2)

	gate.refuse.Store(true)
	srv.Halt()
	var during []string
	for i := 2; i < 12; i++ {
		during = append(during, fmt.Sprintf(`{"n":%d}`, i))
	}
	sendJSON(t, run.Runtime, "test_stream", "test_topic", during...)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	ch2, _ := reopen(t, srv.URL, q)
	_, err := ch2.QueueDeclare(q, true, false, false, false, nil)
	require.NoError(t, err)
	gate.refuse.Store(false)
	// The runtime restarts a sink with backoff of up to a minute, so its
	// next try may come that long after the server is back: wait longer
	// than that (a liveness bound).
	var got []string
	deadline := time.Now().Add(3 * time.Minute)
	for len(got) < len(during) {
		if time.Now().After(deadline) {
			for _, info := range run.Runtime.Connectors(connector.KindSink) {
				t.Logf("sink %s: %s, %d restarts, last error %q", info.Key, info.Status, info.Restarts, info.LastError)
			}
			logGroup(t, run.Runtime, "test_stream", "test_topic", "rabbitmq_sink_connector")
			logRoute(t, srv.URL, exchange, "iggy.messages", q)
			buf := make([]byte, 1<<20)
			t.Logf("goroutines:\n%s", buf[:goruntime.Stack(buf, true)])
			t.Fatalf("after the outage %d of %d messages arrived: %q", len(got), len(during), got)
		}
		for _, d := range drain(t, ch2, q) {
			got = append(got, string(d.Body))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range during {
		require.Contains(t, got, want, "nothing sent during the outage is lost")
	}
	_ = ch
}

// durableQueue declares the durable queue q and returns a channel.
func durableQueue(t *testing.T, url, q string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare(q, true, false, false, false, nil)
	require.NoError(t, err)
	return ch
}

// reopen returns a channel on a restarted server; q is durable, so it
// survived the restart with its binding.
func reopen(t *testing.T, url, q string) (*amqp.Channel, string) {
	t.Helper()
	var ch *amqp.Channel
	connectortest.Eventually(t, "a connection to the restarted server", func() bool {
		conn, err := amqp.Dial(url)
		if err != nil {
			return false
		}
		t.Cleanup(func() { conn.Close() })
		ch, err = conn.Channel()
		return err == nil
	})
	return ch, q
}

// logGroup logs a consumer group's members, their partitions and its
// stored offset on partition 0: why a sink reads nothing.
func logGroup(t *testing.T, rt interface{ IggyAddress() string }, stream, topic, group string) {
	t.Helper()
	ctx := context.Background()
	admin, err := iggy.Dial(ctx, rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	if err != nil {
		t.Logf("group %s: %v", group, err)
		return
	}
	defer admin.Close()
	g, err := admin.GetConsumerGroup(ctx, iggy.NamedID(stream), iggy.NamedID(topic), iggy.NamedID(group))
	if err != nil {
		t.Logf("group %s: %v", group, err)
	} else {
		t.Logf("group %s: %+v", group, *g)
	}
	o, err := admin.GetConsumerOffset(ctx, iggy.ConsumerGroup(iggy.NamedID(group)), iggy.NamedID(stream), iggy.NamedID(topic), iggy.Partition(0))
	t.Logf("group %s offset on partition 0: %+v %v", group, o, err)
}

// logRoute logs whether a message published to exchange with key reaches
// a queue (a binding the server lost in a crash routes it nowhere), and
// how many messages q holds.
func logRoute(t *testing.T, url, exchange, key, q string) {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Logf("route probe: %v", err)
		return
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Logf("route probe: %v", err)
		return
	}
	qi, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
	if err != nil {
		t.Logf("queue %s: %v", q, err)
		return
	}
	t.Logf("queue %s: %d messages, %d consumers", q, qi.Messages, qi.Consumers)
	if err := ch.Confirm(false); err != nil {
		t.Logf("route probe: %v", err)
		return
	}
	back := ch.NotifyReturn(make(chan amqp.Return, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, amqp.Publishing{Body: []byte(`{"probe":true}`)})
	if err != nil {
		t.Logf("route probe: %v", err)
		return
	}
	ok, err := dc.WaitContext(ctx)
	select {
	case r := <-back:
		t.Logf("route probe: exchange %s key %s routes to no queue: %d %s", exchange, key, r.ReplyCode, r.ReplyText)
	default:
		t.Logf("route probe: exchange %s key %s routes to a queue (confirmed %v, %v)", exchange, key, ok, err)
	}
}
