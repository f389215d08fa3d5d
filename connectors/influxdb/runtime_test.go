package influxdb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/influxtest"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
)

// upstreamSinkTOML is upstream's README example for the InfluxDB sink
// ("Full Configuration Example"), adapted only in the address and the
// bucket (a 1.8 database), plus extra stream keys and plugin keys.
func upstreamSinkTOML(url, bucket, streamExtra, pluginExtra string) string {
	return fmt.Sprintf(`type = "sink"
key = "influxdb"
enabled = true
version = 0
name = "InfluxDB sink"
path = "target/release/libiggy_connector_influxdb_sink"

[[streams]]
stream = "metrics"
topics = ["cpu"]
schema = "json"
batch_length = 100
poll_interval = "10ms"
consumer_group = "influxdb_sink"
%s
[plugin_config]
version    = "v2"
url        = %q
org        = "acme"
bucket     = %q
token      = "my-secret-token"
measurement = "cpu_metrics"
batch_size  = 200
precision   = "ms"
include_stream_tag = true
include_topic_tag  = true
circuit_breaker_threshold = 3
circuit_breaker_cool_down = "15s"
%s`, streamExtra, url, bucket, pluginExtra)
}

func send(t *testing.T, addr, stream, topic string, payloads ...string) {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), addr, iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var msgs []iggy.Message
	for _, p := range payloads {
		msgs = append(msgs, iggy.Message{Payload: []byte(p)})
	}
	_, err = admin.SendMessages(context.Background(), iggy.NamedID(stream), iggy.NamedID(topic), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
}

func count(t testing.TB, url, db, field string) int {
	t.Helper()
	return len(column(selectAll(t, url, db, field), field))
}

func TestUpstreamSinkFileRuns(t *testing.T) {
	t.Parallel()
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	run := connectortest.Start(t, map[string]string{"influx.toml": upstreamSinkTOML(url, db, "", "")})
	var want []string
	for i := range 50 {
		want = append(want, fmt.Sprintf(`{"host":"h%d","usage":%d}`, i%3, i))
	}
	send(t, run.Runtime.IggyAddress(), "metrics", "cpu", want...)
	connectortest.Eventually(t, "50 points", func() bool { return count(t, url, db, "payload_json") == 50 })
	ss := selectAll(t, url, db, "*")
	require.Len(t, ss, 1)
	require.Equal(t, "cpu_metrics", ss[0].Name)
	require.ElementsMatch(t, want, column(ss, "payload_json"))
	require.Equal(t, []string{"metrics"}, unique(column(ss, "stream")))
	require.Equal(t, []string{"cpu"}, unique(column(ss, "topic")))
}

func unique(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// A point InfluxDB refuses (a field type conflict) is dead-lettered with
// InfluxDB's reason, and its neighbours are written.
func TestRefusedPointIsDeadLettered(t *testing.T) {
	t.Parallel()
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	run := connectortest.Start(t, map[string]string{"influx.toml": upstreamSinkTOML(url, db,
		"on_error = \"dead_letter\"\ndead_letter_topic = \"dlq\"\nretry_backoff = \"5ms\"", "fields = [\"usage\"]\n")})
	var payloads []string
	for i := range 10 {
		p := fmt.Sprintf(`{"usage":%d}`, i)
		if i == 6 {
			p = `{"usage":"high"}`
		}
		payloads = append(payloads, p)
	}
	send(t, run.Runtime.IggyAddress(), "metrics", "cpu", payloads...)
	connectortest.Eventually(t, "9 points", func() bool { return count(t, url, db, "payload_json") == 9 })
	admin, err := iggy.Dial(context.Background(), run.Runtime.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var dead []iggy.Message
	connectortest.Eventually(t, "a dead letter", func() bool {
		r, err := admin.PollMessages(context.Background(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("metrics"), Topic: iggy.NamedID("dlq"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
		if err != nil {
			return false
		}
		dead = r.Messages
		return len(dead) == 1
	})
	require.Equal(t, `{"usage":"high"}`, string(dead[0].Payload))
	v, ok := header.Get(dead[0].Headers, runtime.HeaderDLQError)
	require.True(t, ok)
	require.Contains(t, v.String(), "field type conflict", "InfluxDB's own reason")
}

// An InfluxDB killed and started again: the sink restarts with backoff
// and nothing sent to Iggy meanwhile is lost.
func TestSinkSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts an InfluxDB of its own")
	}
	t.Parallel()
	srv := influxtest.Private(t)
	db := influxtest.Database(t, srv.URL)
	run := connectortest.Start(t, map[string]string{"influx.toml": upstreamSinkTOML(srv.URL, db, "retry_backoff = \"5ms\"",
		"max_retries = 2\nretry_delay = \"10ms\"\nmax_open_retries = 1\n")})
	send(t, run.Runtime.IggyAddress(), "metrics", "cpu", `{"n":0}`, `{"n":1}`)
	connectortest.Eventually(t, "2 points", func() bool { return count(t, srv.URL, db, "payload_json") == 2 })

	srv.Halt()
	var during []string
	for i := 2; i < 12; i++ {
		during = append(during, fmt.Sprintf(`{"n":%d}`, i))
	}
	send(t, run.Runtime.IggyAddress(), "metrics", "cpu", during...)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Runtime.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	srv.Resume(t)
	// The runtime restarts a sink with backoff of up to a minute (and the
	// breaker cools down for 15 s): wait longer than that.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		got := column(selectAll(t, srv.URL, db, "payload_json"), "payload_json")
		if len(got) == 12 {
			for _, want := range during {
				require.Contains(t, got, want, "nothing sent during the outage is lost")
			}
			return
		}
		if time.Now().After(deadline) {
			for _, info := range run.Runtime.Connectors(connector.KindSink) {
				t.Logf("sink %s: %s, %d restarts, last error %q", info.Key, info.Status, info.Restarts, info.LastError)
			}
			t.Fatalf("after the outage %d of 12 points: %q", len(got), strings.Join(got, " "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readTopic returns the payloads of stream/topic partition 0.
func readTopic(t *testing.T, addr, stream, topic string) []string {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), addr, iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var out []string
	for {
		r, err := admin.PollMessages(context.Background(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID(stream), Topic: iggy.NamedID(topic), Partition: iggy.Partition(0),
			Strategy: iggy.AtOffset(uint64(len(out))), Count: 1000})
		if err != nil || len(r.Messages) == 0 {
			return out
		}
		for _, m := range r.Messages {
			out = append(out, string(m.Payload))
		}
	}
}
