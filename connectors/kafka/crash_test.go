package kafka

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	_ "github.com/ferryhq/ferry/connectors/file" // the sink kill test's input
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
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("in Iggy: %d messages; at the output: %d distinct", len(e.Topic("bridge", "events")), read())
		}
	})
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

// Ten kill -9 of the runtime mid-stream, file → Iggy → Kafka (the sink
// alone; the Kafka source's group rejoin after a kill takes up to
// session_timeout, which the test above pays): every line reaches
// Kafka, and at most one unacknowledged batch per kill repeats.
func TestSinkEveryMessageArrivesAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const kills, batch = 10, 20
	c := startCluster(t, []string{"out"})
	addr := addrOf(c)
	in := connectortest.NewFileInput(t, "bridge", "events", batch, func(n int) string { return fmt.Sprintf(`{"n":%d}`, n) })
	e := connectortest.NewCrashEnv(t, map[string]string{"in.toml": in.TOML, "out.toml": sinkTOML(addr, "out", "", "")})
	r := newReader(t, addr, "out")
	output := func() []string {
		var out []string
		for _, rec := range r.records(t) {
			out = append(out, string(rec.Value))
		}
		return out
	}
	stop := connectortest.Feed(t, 10*time.Millisecond, func(int) error { return in.Append(5) })
	final := e.KillLoop(nil, kills, func() (int, int) { return len(output()), in.Written() })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := in.Written()
	connectortest.Eventually(t, "every line in Kafka", func() bool {
		have := map[string]bool{}
		for _, v := range output() {
			have[v] = true
		}
		return len(have) >= total
	})
	got := output()
	counts := map[string]int{}
	for _, v := range got {
		counts[v]++
	}
	for n := 0; n < total; n++ {
		require.NotZero(t, counts[fmt.Sprintf(`{"n":%d}`, n)], "line %d was lost", n)
	}
	t.Logf("%d lines, %d records in Kafka (%d repeated by %d kills)", total, len(got), len(got)-total, e.Kills)
	require.LessOrEqual(t, len(got)-total, e.Kills*batch, "more repeats than one batch per kill")
}
