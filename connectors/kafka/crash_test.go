package kafka

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestRuntimeChild is the runtime process the crash test kills.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9 of the runtime mid-stream, Kafka → Iggy → Kafka: every
// record produced to the input topic reaches the output topic. The fake
// cluster lives in this (the parent) process, so it outlives the kills;
// the connector files name its address. Both connectors are
// at-least-once, so a kill may repeat at most what was in flight: the
// source's polled, uncommitted records (batch_size, one batch read ahead)
// and the sink's unacknowledged batch (batch_length).
func TestEveryRecordArrivesAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const kills, batch = 10, 20
	c := startCluster(t, []string{"in", "out"}, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	addr := addrOf(c)
	e := connectortest.NewCrashEnv(t, map[string]string{
		"in.toml":  sourceTOML(addr, "in", "ferry", ""),
		"out.toml": sinkTOML(addr, "out", "", ""),
	})
	r := newReader(t, addr, "out")
	var mu sync.Mutex
	seen := map[int]int{}
	read := func() int {
		mu.Lock()
		defer mu.Unlock()
		clear(seen)
		for _, rec := range r.records(t) {
			var v struct{ N int }
			require.NoError(t, json.Unmarshal(rec.Value, &v), "%s", rec.Value)
			seen[v.N]++
		}
		return len(seen)
	}
	produced := 0
	stop := connectortest.Feed(t, 10*time.Millisecond, func(int) error {
		produce(t, addr, "in", produced, 5)
		mu.Lock()
		produced += 5
		mu.Unlock()
		return nil
	})
	final := e.KillLoop(nil, kills, func() (int, int) {
		n := read()
		mu.Lock()
		defer mu.Unlock()
		return n, produced
	})
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	mu.Lock()
	total := produced
	mu.Unlock()
	connectortest.Eventually(t, "every record at the output", func() bool { return read() >= total })
	mu.Lock()
	defer mu.Unlock()
	copies := 0
	for n := 0; n < total; n++ {
		require.NotZero(t, seen[n], "record %d was lost", n)
		copies += seen[n]
	}
	t.Logf("%d records, %d at the output (%d repeated by %d kills)", total, copies, copies-total, e.Kills)
	require.LessOrEqual(t, copies-total, e.Kills*(2*batch+batch), "more repeats than what was in flight at the kills")
}
