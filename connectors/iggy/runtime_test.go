package iggy

import (
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

func replicaTOML(originAddr string, batch int) string {
	return fmt.Sprintf(`type = "source"
key = "replica"
path = "iggy"
[[streams]]
stream = "copy"
topic = "t"
schema = "raw"
batch_length = %d
linger_time = "0ms"
[plugin_config]
address = %q
username = "iggy"
password = "iggy"
stream = "s"
topic = "t"
batch_size = %d
poll_interval = "10ms"
`, batch, originAddr, batch)
}

// Messages of the origin arrive in the runtime's Iggy as they were: ids,
// payloads, headers and origin timestamps.
func TestReplicatesIDsHeadersAndTimestamps(t *testing.T) {
	o := newOrigin(t)
	o.add(t, 250)
	run := connectortest.Start(t, map[string]string{"replica.toml": replicaTOML(o.addr, 100)})
	var got []iggy.Message
	connectortest.Eventually(t, "250 copies", func() bool { got = run.Messages(t, "copy", "t"); return len(got) >= 250 })
	want := run.Messages(t, "copy", "t") // the copies, read back
	r, err := o.client.PollMessages(t.Context(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("s"),
		Topic: iggy.NamedID("t"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 1000})
	require.NoError(t, err)
	require.Len(t, want, 250)
	for i, m := range r.Messages {
		c := want[i]
		require.Equal(t, m.ID, c.ID, "message %d keeps its id", i)
		require.Equal(t, string(m.Payload), string(c.Payload))
		require.True(t, m.OriginTimestamp.Equal(c.OriginTimestamp), "message %d: origin timestamp %s, copy %s", i, m.OriginTimestamp, c.OriginTimestamp)
		v, ok := header.Get(c.Headers, "n")
		require.True(t, ok)
		require.Equal(t, fmt.Sprint(i), v.String())
	}
}

// Ten kill -9 of the runtime while it replicates, into a destination that
// deduplicates by id: every message of the origin is in the destination
// once, ids compared.
func TestReplicationAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	// The figure: a million messages, fed over some fifteen
	// seconds so that the kills land while they flow.
	const n = 1_000_000
	o := newOrigin(t)
	e := connectortest.NewCrashEnv(t, map[string]string{"replica.toml": replicaTOML(o.addr, 1000)},
		brokertest.Config(func(c *broker.Config) { c.Dedup = broker.Dedup{MaxEntries: 100_000} }))
	stop := connectortest.Feed(t, 15*time.Millisecond, func(int) error {
		if o.n.Load() < n {
			o.add(t, 1000)
		}
		return nil
	})
	copied := func() int {
		d, err := e.Client.GetTopic(t.Context(), iggy.NamedID("copy"), iggy.NamedID("t"))
		if err != nil {
			return 0
		}
		return int(d.MessagesCount)
	}
	first := e.Start()
	connectortest.Eventually(t, "the first copies", func() bool { return copied() > 0 })
	final := e.KillLoop(first, 10, func() (int, int) { return copied(), int(o.n.Load()) })
	defer e.Kill(final)
	connectortest.Eventually(t, "the feed to end", func() bool { return o.n.Load() >= n })
	stop()
	total := int(o.n.Load())
	connectortest.Eventually(t, "every message copied", func() bool { return copied() >= total })
	copies := e.Topic("copy", "t")
	r := make(map[[16]byte]bool, total)
	for off := uint64(0); off < uint64(total); {
		rep, err := o.client.PollMessages(t.Context(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("s"),
			Topic: iggy.NamedID("t"), Partition: iggy.Partition(0), Strategy: iggy.AtOffset(off), Count: 1000})
		require.NoError(t, err)
		for _, m := range rep.Messages {
			r[m.ID] = true
		}
		off += uint64(len(rep.Messages))
	}
	seen := make(map[[16]byte]bool, len(copies))
	for _, c := range copies {
		require.False(t, seen[c.ID], "a duplicate in the destination: %x", c.ID)
		require.True(t, r[c.ID], "a copy of no origin message: %x", c.ID)
		seen[c.ID] = true
	}
	require.Len(t, seen, total, "every origin message once")
	t.Logf("%d messages, %d kills, %d copies", total, e.Kills, len(copies))
}
