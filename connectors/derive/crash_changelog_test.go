package derive

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

// Ten kill -9s of the runtime while it derives, from a keyed table
// (input = "changelog": updates that move keys between groups, and
// deletion markers), count, sum, min, max and latest per group: the
// changelog's last value per group, deletion markers removing groups,
// equals a reference computed from the input's final table, so no
// update was lost, applied twice or left its old contribution behind;
// a group whose keys all left is deleted; no update is in the topic
// twice.
func TestChangelogAcrossKills(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	t.Parallel()
	e := connectortest.NewCrashEnv(t, nil, brokertest.Config(func(c *broker.Config) { c.Dedup.MaxEntries = 1 << 20 }))
	cfgText, err := os.ReadFile(filepath.Join(e.Dir, "config.toml"))
	require.NoError(t, err)
	addr := string(regexp.MustCompile(`address = "([^"]+)"`).FindSubmatch(cfgText)[1])
	stateDir := filepath.Join(e.Dir, "derive-state")
	e.WriteConnector("derive.toml", fmt.Sprintf(`type = "sink"
key = "derive-table"
path = "derive"
[[streams]]
stream = "in"
topics = ["table"]
schema = "json"
batch_length = 20
poll_interval = "5ms"
consumer_group = "derive-table"
[plugin_config]
to = "out/table"
input = "changelog"
group_by = "user"
aggregates = ["count(*)", "sum(amount)", "min(amount)", "max(amount)", "latest(amount)"]
address = %q
state_dir = %q
`, addr, stateDir))
	ctx := context.Background()
	_, err = e.Client.CreateStream(ctx, "in")
	require.NoError(t, err)
	_, err = e.Client.CreateTopic(ctx, iggy.NamedID("in"), "table", 1)
	require.NoError(t, err)

	type tableRow struct{ user, amount, seq int }
	var mu sync.Mutex
	table := map[string]tableRow{}
	sent := 0
	stop := connectortest.Feed(t, 10*time.Millisecond, func(i int) error {
		var msgs []iggy.Message
		next := map[string]*tableRow{} // nil: deleted
		for k := range 5 {
			n := i*5 + k
			key := fmt.Sprintf("o%d", n*7%40) // every key once in 40 messages
			hs := []header.Header{header.New(iggy.KeyHeader, header.StringValue(key))}
			if n%9 == 4 {
				next[key] = nil
				msgs = append(msgs, iggy.Message{Payload: []byte("null"), Headers: append(hs, header.New(iggy.DeletedHeader, header.BoolValue(true)))})
				continue
			}
			users := 6
			if n >= 300 {
				users = 5 // u5 gets no new key: its keys leave it, and it is deleted
			}
			r := tableRow{user: n * 13 % users, amount: n%11 + 1, seq: n}
			next[key] = &r
			msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, `{"user":"u%d","amount":%d}`, r.user, r.amount), Headers: hs})
		}
		if _, err := e.Client.SendMessages(ctx, iggy.NamedID("in"), iggy.NamedID("table"), iggy.ToPartition(0), msgs); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for k, r := range next {
			if r == nil {
				delete(table, k)
			} else {
				table[k] = *r
			}
		}
		sent += len(msgs)
		return nil
	})
	applied := func() int {
		data, err := os.ReadFile(filepath.Join(stateDir, checkpointFile))
		if err != nil {
			return 0
		}
		var cp struct{ Next map[string]uint64 }
		if json.Unmarshal(data, &cp) != nil {
			return 0
		}
		return int(cp.Next["in/table/0"])
	}
	offered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return sent
	}
	final := e.KillLoop(nil, 10, func() (int, int) { return applied(), offered() })
	defer e.Kill(final)
	time.Sleep(300 * time.Millisecond)
	stop()

	type agg struct{ count, sum, min, max, latest int }
	want := map[string]agg{}
	latestSeq := map[string]int{}
	for _, r := range table {
		u := fmt.Sprintf("u%d", r.user)
		a, ok := want[u]
		if !ok {
			a = agg{min: r.amount, max: r.amount}
		}
		a.count++
		a.sum += r.amount
		a.min, a.max = min(a.min, r.amount), max(a.max, r.amount)
		if r.seq >= latestSeq[u] {
			a.latest, latestSeq[u] = r.amount, r.seq
		}
		want[u] = a
	}
	total := offered()
	connectortest.Eventually(t, "every message applied", func() bool { return applied() >= total })
	var got map[string]agg
	var chs []change
	// The last batch's updates go out just after its checkpoint: wait for
	// them (a bound on liveness), then compare.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		chs = readChanges(t, addr, "out", "table")
		got = map[string]agg{}
		for k, v := range latest(chs) {
			got[k] = agg{int(v["count"].(float64)), int(v["sum_amount"].(float64)), int(v["min_amount"].(float64)),
				int(v["max_amount"].(float64)), int(v["latest_amount"].(float64))}
		}
		if reflect.DeepEqual(got, want) || time.Now().After(deadline) {
			break
		}
	}
	require.Equal(t, want, got, "count, sum, min, max and latest per group of the final table")
	ids := map[[16]byte]bool{}
	u5Deleted := false
	for _, c := range chs {
		require.False(t, ids[c.ID], "update %s of %s is in the topic twice", c.Value, c.Key)
		ids[c.ID] = true
		u5Deleted = u5Deleted || (c.Key == "u5" && c.Deleted)
	}
	require.NotContains(t, want, "u5")
	require.True(t, u5Deleted, "u5's deletion marker")
	t.Logf("%d messages over %d keys (%d left), %d groups, %d updates, across %d kills", total, 40, len(table), len(want), len(chs), e.Kills)
}
