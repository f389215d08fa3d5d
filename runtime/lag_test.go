package runtime

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/connector"
)

const lagSinkTOML = `
type = "sink"
key = "%s"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
consumer_group = "%s-group"
max_retries = 1
retry_backoff = "5ms"
`

// A sink that cannot write shows every message as lag, read from the
// server while it is in Error; a sink that keeps up shows none. Both in
// /stats's Lag and in ferry_sink_lag_messages.
func TestLagPerSinkAndPartition(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 25, batch: 5}
	e.sinks["down"] = &collectSink{failFirst: 1 << 30}
	e.sinks["up"] = &collectSink{}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("down", strings.ReplaceAll(lagSinkTOML, "%s", "down"))
	e.connector("up", strings.ReplaceAll(lagSinkTOML, "%s", "up"))
	rt := e.start()
	eventually(t, "25 messages at the sink that keeps up", func() bool { return len(e.sinks["up"].messages()) >= 25 })
	eventually(t, "the failing sink in Error", func() bool {
		i, _ := rt.Connector(connector.KindSink, "down")
		return i.Status == StatusError
	})
	ctx := context.Background()
	var down, up []PartitionLag
	eventually(t, "the lag read from the server", func() bool {
		var err error
		down, err = rt.Lag(ctx, "down")
		require.NoError(t, err)
		up, err = rt.Lag(ctx, "up")
		require.NoError(t, err)
		return len(up) == 1 && up[0].Lag == 0 && up[0].Committed != nil
	})
	require.Len(t, down, 1)
	require.Equal(t, PartitionLag{Stream: "s", Topic: "t", ConsumerGroup: "down-group", Partition: 0,
		End: 24, Messages: 25, Lag: 25}, down[0], "nothing committed: all 25 are lag")
	require.Equal(t, uint64(24), *up[0].Committed)
	require.Equal(t, "up-group", up[0].ConsumerGroup)

	time.Sleep(lagFresh) // the next scrape reads the server again
	families, err := rt.Metrics().Registry().Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "ferry_sink_lag_messages" {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(labels, ",")] = m.GetGauge().GetValue()
		}
	}
	require.Equal(t, map[string]float64{
		"connector_key=down,consumer_group=down-group,partition=0,stream=s,topic=t": 25,
		"connector_key=up,consumer_group=up-group,partition=0,stream=s,topic=t":     0,
	}, got)

	_, err = rt.Lag(ctx, "nope")
	require.ErrorIs(t, err, ErrNotFound)
}
