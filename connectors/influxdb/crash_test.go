package influxdb

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/influxtest"
	"github.com/stretchr/testify/require"

	_ "github.com/ferryhq/ferry/connectors/file" // the file source and sink, for the crash tests' child runtime
)

// TestRuntimeChild is the runtime process the crash tests kill.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9 of the runtime mid-stream, file source → Iggy → InfluxDB:
// every record arrives, and each Iggy message is one point however often
// it was written, since a batch written again overwrites its own points
// (same offset tag, same Iggy timestamp).
func TestSinkEveryRecordOnceAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	in := connectortest.NewFileInput(t, "metrics", "cpu", 50, func(n int) string { return fmt.Sprintf(`{"n":%d}`, n) })
	sink := strings.Replace(upstreamSinkTOML(url, db, "", ""), "batch_length = 100", "batch_length = 50", 1)
	e := connectortest.NewCrashEnv(t, map[string]string{
		"influx.toml": sink,
		"in.toml":     in.TOML,
	})
	write := func(int) error { return in.Append(10) }
	points := func() []string {
		return column(selectAll(t, url, db, "payload_json"), "payload_json")
	}
	stop := connectortest.Feed(t, 15*time.Millisecond, write)
	final := e.KillLoop(nil, 10, func() (int, int) { return len(unique(points())), in.Written() })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	total := in.Written()
	connectortest.Eventually(t, "every record in InfluxDB", func() bool { return len(unique(points())) >= total })
	got := points()
	seen := map[string]int{}
	for _, p := range got {
		seen[p]++
	}
	for i := range total {
		require.NotZero(t, seen[fmt.Sprintf(`{"n":%d}`, i)], "record %d was lost", i)
	}
	// The file source may send a record to Iggy again after a kill (at
	// least once); the sink writes each Iggy message once: as many
	// points as messages in the topic.
	inIggy := e.Topic("metrics", "cpu")
	require.Len(t, got, len(inIggy), "one point per Iggy message")
	t.Logf("%d records, %d Iggy messages, %d points, %d kills", total, len(inIggy), len(got), e.Kills)
}

// Ten kill -9 of the runtime mid-stream, InfluxDB → source → Iggy, with
// three points at every time: every point reaches Iggy; a repeat is only
// a batch whose state was not saved before a kill, and carries the same
// message id. Queries run while points are written, so they meet
// InfluxDB's reads that are not snapshots (see the package doc): a query
// that sees h1 at a time without h0, written before it.
func TestSourceEveryPointArrivesAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	const batch = 20
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	src := strings.Replace(upstreamSourceTOML(url, db), "batch_size      = 500", fmt.Sprintf("batch_size = %d", batch), 1)
	e := connectortest.NewCrashEnv(t, map[string]string{"influx.toml": src})
	f := &feed{url: url, db: db}
	base := time.Unix(1_700_000_000, 0)
	stop := connectortest.Feed(t, 15*time.Millisecond, func(int) error {
		// One point a request, in time and host order: the order the
		// source needs (a point written after a later one may be
		// missed; see the package doc).
		for range 6 {
			f.add(t, 1, func(i int) time.Time { return base.Add(time.Duration(i/3) * time.Millisecond) },
				func(i int) string { return fmt.Sprintf("h%d", i%3) })
		}
		return nil
	})
	distinct := func() map[string]map[[16]byte]bool {
		ids := map[string]map[[16]byte]bool{}
		for _, m := range e.Topic("metrics", "cpu") {
			v := value(connector.Message{Payload: m.Payload})
			if ids[v] == nil {
				ids[v] = map[[16]byte]bool{}
			}
			ids[v][m.ID] = true
		}
		return ids
	}
	final := e.KillLoop(nil, 10, func() (int, int) { f.mu.Lock(); defer f.mu.Unlock(); return len(distinct()), f.n })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	f.mu.Lock()
	total := f.n
	f.mu.Unlock()
	deadline := time.Now().Add(time.Minute)
	for len(distinct()) < total {
		if time.Now().After(deadline) {
			ids := distinct()
			var missing []string
			for i := range total {
				if ids[fmt.Sprintf("u%d", i)] == nil {
					missing = append(missing, fmt.Sprintf("u%d", i))
				}
			}
			t.Fatalf("%d of %d points never reached Iggy (%q); state %s", len(missing), total, missing, e.State())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ids := distinct()
	for i := range total {
		v := fmt.Sprintf("u%d", i)
		require.Len(t, ids[v], 1, "point %s: once, or repeated with one id", v)
	}
	copies := len(e.Topic("metrics", "cpu"))
	t.Logf("%d points, %d messages in Iggy (%d repeated by %d kills)", total, copies, copies-total, e.Kills)
	require.LessOrEqual(t, copies-total, e.Kills*2*batch, "more repeats than the unsaved batches at the kills")
}
