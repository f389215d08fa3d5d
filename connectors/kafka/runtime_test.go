package kafka

import (
	"context"
	"fmt"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/runtime"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

func sourceTOML(addr, topic, group, extra string) string {
	return fmt.Sprintf(`type = "source"
key = "from_kafka"
path = "kafka"
[[streams]]
stream = "bridge"
topic = "events"
schema = "json"
linger_time = "0ms"
[plugin_config]
brokers = [%q]
topics = [%q]
consumer_group = %q
batch_size = 20
fetch_max_wait = "20ms"
session_timeout = "6s"
rebalance_timeout = "6s"
%s`, addr, topic, group, extra)
}

func sinkTOML(addr, topic, extra, streamExtra string) string {
	return fmt.Sprintf(`type = "sink"
key = "to_kafka"
path = "kafka"
[[streams]]
stream = "bridge"
topics = ["events"]
schema = "json"
batch_length = 20
poll_interval = "5ms"
consumer_group = "to_kafka"
%s
[plugin_config]
brokers = [%q]
topic = %q
%s`, streamExtra, addr, topic, extra)
}

func sendJSON(t *testing.T, addr, stream, topic string, msgs ...iggy.Message) {
	t.Helper()
	admin, err := iggy.Dial(context.Background(), addr, iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.SendMessages(context.Background(), iggy.NamedID(stream), iggy.NamedID(topic), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
}

// Kafka → Iggy → Kafka through the runtime: every record arrives, with
// its key and headers, and the Iggy side carries the key in `key`.
func TestSourceToSinkThroughIggy(t *testing.T) {
	t.Parallel()
	c := startCluster(t, []string{"in", "out"}, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	run := connectortest.Start(t, map[string]string{
		"in.toml":  sourceTOML(addrOf(c), "in", "ferry", ""),
		"out.toml": sinkTOML(addrOf(c), "out", "", ""),
	})
	want := produce(t, addrOf(c), "in", 0, 250)
	recs := newReader(t, addrOf(c), "out")
	got := recs.values(t, 250)
	sort.Strings(got)
	sort.Strings(want)
	require.Equal(t, want, got)
	rec := recs.records(t)[0]
	require.Regexp(t, `^k\d+$`, string(rec.Key))
	hs := map[string]string{}
	for _, h := range rec.Headers {
		hs[h.Key] = string(h.Value)
	}
	require.Equal(t, "v", hs["h"])
	require.Equal(t, "in", hs["kafka_topic"], "the source's metadata headers travel on")

	msgs := run.Messages(t, "bridge", "events")
	require.NotEmpty(t, msgs)
	k, ok := header.Get(msgs[0].Headers, "key")
	require.True(t, ok)
	require.Equal(t, "k0", k.String())
}

// A record the broker refuses goes to the dead-letter topic with the
// broker's reason; its neighbours reach Kafka.
func TestSinkDeadLettersARefusedRecordThroughTheRuntime(t *testing.T) {
	t.Parallel()
	c := startCluster(t, []string{"out"}, kfake.BrokerConfigs(map[string]string{"message.max.bytes": "20000"}))
	run := connectortest.Start(t, map[string]string{"out.toml": sinkTOML(addrOf(c), "out", "",
		"on_error = \"dead_letter\"\ndead_letter_topic = \"dlq\"\nretry_backoff = \"5ms\"")})
	sendJSON(t, run.IggyAddress(), "bridge", "events", iggy.Message{Payload: []byte(`{"n":0}`)},
		iggy.Message{Payload: []byte(`{"big":"` + string(incompressible(40000)) + `"}`)}, iggy.Message{Payload: []byte(`{"n":2}`)})
	got := newReader(t, addrOf(c), "out").values(t, 2)
	require.Equal(t, []string{`{"n":0}`, `{"n":2}`}, got)
	var dead []iggy.Message
	connectortest.Eventually(t, "a dead letter", func() bool {
		dead = run.Messages(t, "bridge", "dlq")
		return len(dead) == 1
	})
	v, ok := header.Get(dead[0].Headers, runtime.HeaderDLQError)
	require.True(t, ok, "the dead letter carries its reason")
	require.Contains(t, v.String(), "MESSAGE_TOO_LARGE")
}

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The cluster goes away mid-stream (kfake closed) and comes back on the
// same port with its data (kfake's DataDir): the sink restarts with
// backoff and nothing sent to Iggy meanwhile is lost; the source resumes
// from its group's committed offsets.
func TestClusterOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts a cluster")
	}
	t.Parallel()
	port, dir := freePort(t), t.TempDir()
	opts := []kfake.Opt{kfake.Ports(port), kfake.DataDir(dir), kfake.GroupMinSessionTimeout(100 * time.Millisecond)}
	c := startCluster(t, []string{"in", "out"}, opts...)
	addr := addrOf(c)
	run := connectortest.Start(t, map[string]string{
		"in.toml":  sourceTOML(addr, "in", "ferry", "timeout = \"2s\"\n"),
		"out.toml": sinkTOML(addr, "out", "timeout = \"2s\"\n", "retry_backoff = \"5ms\""),
	})
	produce(t, addr, "in", 0, 10)
	require.Len(t, newReader(t, addr, "out").values(t, 10), 10)

	c.Close()
	var during []iggy.Message
	for i := 100; i < 110; i++ {
		during = append(during, iggy.Message{Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	sendJSON(t, run.IggyAddress(), "bridge", "events", during...)
	connectortest.Eventually(t, "the sink to notice the outage", func() bool {
		for _, info := range run.Connectors(connector.KindSink) {
			if info.LastError != "" {
				return true
			}
		}
		return false
	})
	c2, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c2.Close)
	produce(t, addr, "in", 10, 10)

	// The runtime restarts a sink with backoff of up to a minute: wait
	// longer than that (a liveness bound).
	r := newReader(t, addr, "out")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		have := map[string]bool{}
		for _, rec := range r.records(t) {
			have[string(rec.Value)] = true
		}
		missing := []string{}
		for i := 0; i < 20; i++ {
			if v := fmt.Sprintf(`{"n":%d}`, i); !have[v] {
				missing = append(missing, v)
			}
		}
		for _, m := range during {
			if !have[string(m.Payload)] {
				missing = append(missing, string(m.Payload))
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, k := range []connector.Kind{connector.KindSource, connector.KindSink} {
				for _, info := range run.Connectors(k) {
					t.Logf("%s %s: %s, %d restarts, last error %q", k, info.Key, info.Status, info.Restarts, info.LastError)
				}
			}
			t.Fatalf("after the outage these never arrived: %q", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
