package derive

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

// Under the real runtime, with late = "dead_letter" and the stream's
// on_error = "dead_letter": an event past the allowed lateness lands in
// the dead-letter topic and is not counted; one within it is counted in
// its window.
func TestLateEventsAreDeadLetteredByTheRuntime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a runtime process")
	}
	t.Parallel()
	e := connectortest.NewCrashEnv(t, nil, brokertest.Config(func(c *broker.Config) { c.Dedup.MaxEntries = 1 << 16 }))
	cfgText, err := os.ReadFile(filepath.Join(e.Dir, "config.toml"))
	require.NoError(t, err)
	addr := string(regexp.MustCompile(`address = "([^"]+)"`).FindSubmatch(cfgText)[1])
	e.WriteConnector("derive.toml", fmt.Sprintf(`type = "sink"
key = "derive-late"
path = "derive"
[[streams]]
stream = "in"
topics = ["events"]
schema = "json"
poll_interval = "5ms"
on_error = "dead_letter"
[plugin_config]
to = "out/late"
aggregates = ["count(*)", "sum(n)"]
window = "10s"
allowed_lateness = "5s"
event_time = "ts"
late = "dead_letter"
address = %q
state_dir = %q
`, addr, filepath.Join(e.Dir, "derive-state")))
	ctx := context.Background()
	_, err = e.Client.CreateStream(ctx, "in")
	require.NoError(t, err)
	_, err = e.Client.CreateTopic(ctx, iggy.NamedID("in"), "events", 1)
	require.NoError(t, err)
	var msgs []iggy.Message
	for _, ev := range []struct{ ts, n int }{{1_000, 1}, {12_000, 2}, {14_000, 4}, {8_000, 8} /* within */, {21_000, 16}, {5_000, 32} /* too late */} {
		msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, `{"ts":%d,"n":%d}`, ev.ts, ev.n),
			Headers: []header.Header{header.New(iggy.KeyHeader, header.StringValue("k"))}})
	}
	_, err = e.Client.SendMessages(ctx, iggy.NamedID("in"), iggy.NamedID("events"), iggy.ToPartition(0), msgs)
	require.NoError(t, err)
	cmd := e.Start()
	defer e.Kill(cmd)
	connectortest.Eventually(t, "the late event dead-lettered", func() bool { return len(e.Topic("in", "derive-late_dead_letter")) > 0 })
	dead := e.Topic("in", "derive-late_dead_letter")
	require.Len(t, dead, 1)
	require.Contains(t, string(dead[0].Payload), `"n":32`)
	connectortest.Eventually(t, "every window's last update", func() bool {
		got := latest(readChanges(t, addr, "out", "late"))
		return len(got) == 3 && got["k@1970-01-01T00:00:00.000Z"]["sum_n"] == float64(9)
	})
	got := latest(readChanges(t, addr, "out", "late"))
	require.Equal(t, float64(6), got["k@1970-01-01T00:00:10.000Z"]["sum_n"])
	require.Equal(t, float64(16), got["k@1970-01-01T00:00:20.000Z"]["sum_n"])
}
