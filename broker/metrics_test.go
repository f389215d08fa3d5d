package broker_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// scrape reads the broker's /metrics over its metrics listener and returns
// every sample by series (name and labels as exposed).
func scrape(t *testing.T, b *broker.Broker) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + b.MetricsAddr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	return out
}

// TestMetrics: the counts follow sends, polls, connections and deletes.
func TestMetrics(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.Config(func(c *broker.Config) { c.MetricsAddr = "127.0.0.1:0" }))
	c := login(t, b)
	dial(t, b) // connected, not logged in
	s, tp := setup(t, c, 2)

	m := scrape(t, b)
	require.Equal(t, 1.0, m[`iggy_broker_connections{state="logged_in"}`])
	require.Equal(t, 1.0, m[`iggy_broker_connections{state="not_logged_in"}`])
	require.Equal(t, 2.0, m[`iggy_broker_clients`])
	require.Equal(t, 1.0, m[`iggy_broker_streams`])
	require.Equal(t, 1.0, m[`iggy_broker_topics`])
	require.Equal(t, 2.0, m[`iggy_broker_partitions`])
	require.Equal(t, 0.0, m[`iggy_broker_messages`])
	require.Contains(t, m, `iggy_broker_messages_in_total{stream="s",topic="t"}`)
	require.Zero(t, m[`iggy_broker_messages_in_total{stream="s",topic="t"}`])

	body := sendBody(t, s, tp, wire.ToPartition(1), "one", "two")
	ok(t, do(t, c, wire.CmdSendMessages, body))
	got := poll(t, c, wire.PollMessages{Consumer: single(0), Stream: s, Topic: tp, Partition: wire.Partition(1), Strategy: wire.First(), Count: 1})
	require.Len(t, got.Messages, 1)

	m = scrape(t, b)
	batch := float64(wire.BatchHeaderSize + 2*48 + len("one") + len("two"))
	require.Equal(t, 2.0, m[`iggy_broker_messages_in_total{stream="s",topic="t"}`])
	require.Equal(t, batch, m[`iggy_broker_bytes_in_total{stream="s",topic="t"}`], "the batch record's bytes")
	require.Equal(t, 1.0, m[`iggy_broker_messages_out_total{stream="s",topic="t"}`])
	require.Greater(t, m[`iggy_broker_bytes_out_total{stream="s",topic="t"}`], 0.0)
	require.Equal(t, 2.0, m[`iggy_broker_partition_messages{partition="1",stream="s",topic="t"}`])
	require.Equal(t, 0.0, m[`iggy_broker_partition_messages{partition="0",stream="s",topic="t"}`])
	require.Equal(t, batch, m[`iggy_broker_partition_size_bytes{partition="1",stream="s",topic="t"}`])
	require.Equal(t, 2.0, m[`iggy_broker_messages`])

	ok(t, do(t, c, wire.CmdDeleteTopic, &wire.TopicRef{Stream: s, Topic: tp}))
	m = scrape(t, b)
	require.NotContains(t, m, `iggy_broker_messages_in_total{stream="s",topic="t"}`, "a deleted topic's series go")
	require.NotContains(t, m, `iggy_broker_partition_messages{partition="1",stream="s",topic="t"}`)
	require.Equal(t, 0.0, m[`iggy_broker_topics`])
}

// TestMetricsListenerOff: without Config.MetricsAddr there is no listener,
// and a taken address fails Start.
func TestMetricsListenerOff(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	require.Empty(t, b.MetricsAddr())
	on := brokertest.Start(t, brokertest.Config(func(c *broker.Config) { c.MetricsAddr = "127.0.0.1:0" }))
	_, err := broker.Start(t.Context(), broker.Config{Addr: "127.0.0.1:0", MetricsAddr: on.MetricsAddr()})
	require.ErrorContains(t, err, "listen for metrics")
}
