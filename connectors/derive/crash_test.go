package derive

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

// TestRuntimeChild is the runtime process the crash tests kill.
func TestRuntimeChild(t *testing.T) { connectortest.RuntimeChild(t) }

// Ten kill -9s of the runtime while it derives counts and sums per key
// and per one-second window from a keyed JSON topic, with events late
// within the allowed lateness and later: the changelog's last value of
// every (key, window) equals a reference computed from the input, so no
// event was lost or counted twice, and no update is in the topic twice.
func TestCountsAndSumsAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	e := connectortest.NewCrashEnv(t, nil, brokertest.Config(func(c *broker.Config) { c.Dedup.MaxEntries = 1 << 20 }))
	cfgText, err := os.ReadFile(filepath.Join(e.Dir, "config.toml"))
	require.NoError(t, err)
	addr := string(regexp.MustCompile(`address = "([^"]+)"`).FindSubmatch(cfgText)[1])
	e.WriteConnector("derive.toml", fmt.Sprintf(`type = "sink"
key = "derive-agg"
path = "derive"
[[streams]]
stream = "in"
topics = ["events"]
schema = "json"
batch_length = 20
poll_interval = "5ms"
consumer_group = "derive-agg"
[plugin_config]
to = "out/agg"
aggregates = ["count(*)", "sum(amount)"]
window = "1s"
allowed_lateness = "2s"
event_time = "ts"
address = %q
state_dir = %q
`, addr, filepath.Join(e.Dir, "derive-state")))
	ctx := context.Background()
	_, err = e.Client.CreateStream(ctx, "in")
	require.NoError(t, err)
	_, err = e.Client.CreateTopic(ctx, iggy.NamedID("in"), "events", 1)
	require.NoError(t, err)

	ref := newReference(time.Second, 2*time.Second)
	var offered atomic.Int64
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		var msgs []iggy.Message
		var evs []refEvent
		for k := range 5 {
			n := i*5 + k
			ts := int64(n) * 20
			switch {
			case n%20 == 7:
				ts -= 1500 // late, within the lateness
			case n%20 == 13 && n > 200:
				ts -= 10_000 // too late: dropped
			}
			ev := refEvent{key: fmt.Sprintf("k%d", n%5), ts: ts, amount: int64(n%7 + 1)}
			evs = append(evs, ev)
			msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, `{"ts":%d,"amount":%d}`, ev.ts, ev.amount),
				Headers: []header.Header{header.New(iggy.KeyHeader, header.StringValue(ev.key))}})
		}
		if _, err := e.Client.SendMessages(ctx, iggy.NamedID("in"), iggy.NamedID("events"), iggy.ToPartition(0), msgs); err != nil {
			return err
		}
		ref.add(evs...)
		offered.Add(int64(len(msgs)))
		return nil
	})
	counted := func() int {
		n := 0
		for _, v := range latest(readChanges(t, addr, "out", "agg")) {
			n += int(v["count"].(float64))
		}
		return n
	}
	final := e.KillLoop(nil, 10, func() (int, int) { return counted(), ref.applied() })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()
	want := ref.result()
	connectortest.Eventually(t, "every event counted", func() bool { return counted() >= ref.applied() })
	chs := readChanges(t, addr, "out", "agg")
	ids := map[[16]byte]bool{}
	for _, c := range chs {
		require.False(t, ids[c.ID], "update %s of %s is in the topic twice", c.Value, c.Key)
		ids[c.ID] = true
	}
	got := map[string][2]int64{}
	for k, v := range latest(chs) {
		got[k] = [2]int64{int64(v["count"].(float64)), int64(v["sum_amount"].(float64))}
	}
	require.Equal(t, want, got, "count and sum per key and window")
	require.Positive(t, ref.lateDropped, "some events were too late")
	t.Logf("%d events (%d too late), %d groups, %d updates, across %d kills", offered.Load(), ref.lateDropped, len(want), len(chs), e.Kills)
}

// reference computes the derive sink's result from the input, in the
// order it was sent, by the rules of the package doc.
type reference struct {
	mu             sync.Mutex
	size, late     int64
	watermark      int64
	groups         map[string][2]int64
	n, lateDropped int
}

type refEvent struct {
	key        string
	ts, amount int64
}

func newReference(size, late time.Duration) *reference {
	return &reference{size: size.Milliseconds(), late: late.Milliseconds(), groups: map[string][2]int64{}}
}

func (r *reference) add(evs ...refEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range evs {
		start := ev.ts - mod(ev.ts, r.size)
		if start+r.size+r.late <= r.watermark {
			r.lateDropped++
			continue
		}
		id := groupID(ev.key, start, start+r.size)
		g := r.groups[id]
		r.groups[id] = [2]int64{g[0] + 1, g[1] + ev.amount}
		r.n++
		r.watermark = max(r.watermark, ev.ts)
	}
}

func (r *reference) applied() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *reference) result() map[string][2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][2]int64, len(r.groups))
	for k, v := range r.groups {
		out[k] = v
	}
	return out
}
