package derive

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// Counts and sums per key, without a window: one update per changed key
// per batch, and a batch delivered again (a crash before the runtime
// committed its offset) changes nothing, neither the state nor the topic.
func TestCountAndSumPerKeyOnceAcrossReplay(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	dir := t.TempDir()
	pc := map[string]any{"aggregates": []any{"count(*)", "sum(amount)", "avg(amount)", "max(amount)", "distinct_count(user)", "latest(status)"}}
	s := newSink(t, b.Addr(), dir, pc)
	b1 := batch(msg(0, "a", `{"amount":10,"user":"u1","status":"new"}`), msg(1, "b", `{"amount":1,"user":"u1"}`),
		msg(2, "a", `{"amount":5.5,"user":"u2","status":"paid"}`))
	require.NoError(t, consume(t, s, b1))
	require.NoError(t, consume(t, s, b1), "the same batch again")
	closeSink(t, s)

	s = newSink(t, b.Addr(), dir, pc) // reopened: sends the last batch's updates again
	require.NoError(t, consume(t, s, b1))
	require.NoError(t, consume(t, s, batch(msg(2, "a", `{"amount":5.5}`), msg(3, "b", `{"amount":"2","user":"u1"}`))))
	v, ok := s.View("a")
	require.True(t, ok)
	require.JSONEq(t, `{"key":"a","count":2,"sum_amount":15.5,"avg_amount":7.75,"max_amount":10,"distinct_count_user":2,"latest_status":"paid"}`, string(v))
	_, ok = s.View("zz")
	require.False(t, ok)
	closeSink(t, s)

	chs := readChanges(t, b.Addr(), "out", "changes")
	require.Len(t, chs, 3, "a and b after the first batch, b after the second; nothing twice: %+v", chs)
	got := latest(chs)
	require.Equal(t, float64(2), got["a"]["count"])
	require.Equal(t, 15.5, got["a"]["sum_amount"])
	require.Equal(t, float64(2), got["b"]["count"])
	require.Equal(t, float64(3), got["b"]["sum_amount"])
	require.Equal(t, float64(1), got["b"]["distinct_count_user"])
	require.NotEqual(t, chs[1].ID, chs[2].ID, "b's two versions have two ids")
}

// Tumbling windows on an event-time field with allowed lateness: a late
// event within the lateness updates its window, a later one is reported
// for the dead-letter path (late = "dead_letter") and not counted, and
// again when its batch comes again; retract deletes a closed window's
// group.
func TestWindowsLatenessAndRetract(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	s := newSink(t, b.Addr(), t.TempDir(), map[string]any{"group_by": "user", "aggregates": []any{"count(*)", "sum(n)"},
		"window": "1m", "allowed_lateness": "30s", "event_time": "ts", "late": "dead_letter", "retract": true})
	ev := func(off uint64, user string, sec, n int) connector.Message {
		return msg(off, "", jsonf(`{"user":%q,"ts":%d,"n":%d}`, user, sec*1000, n))
	}
	require.NoError(t, consume(t, s, batch(ev(0, "u", 10, 1), ev(1, "u", 50, 2), ev(2, "u", 70, 4))))
	// The watermark is 70s: window [0,60s) is open until 90s.
	require.NoError(t, consume(t, s, batch(ev(3, "u", 20, 8))))
	require.NoError(t, consume(t, s, batch(ev(4, "u", 95, 16))))
	// Watermark 95s: [0,60s) closed (a deletion marker); an event at 30s
	// is too late.
	lateBatch := batch(ev(5, "u", 30, 32), ev(6, "u", 100, 64))
	err := consume(t, s, lateBatch)
	var me connector.MessageErrors
	require.ErrorAs(t, err, &me)
	require.Len(t, me, 1)
	require.True(t, connector.IsPermanent(me[0]))
	require.Contains(t, me[0].Error(), "late")
	err = consume(t, s, lateBatch)
	require.ErrorAs(t, err, &me, "the same batch again reports the late event again")
	require.Len(t, me, 1)
	require.Equal(t, uint64(1), s.Stats().Late)
	v, ok := s.View("u")
	require.True(t, ok)
	require.JSONEq(t, `[{"key":"u","window_start":"1970-01-01T00:01:00.000Z","window_end":"1970-01-01T00:02:00.000Z","count":3,"sum_n":84}]`, string(v))
	closeSink(t, s)

	chs := readChanges(t, b.Addr(), "out", "changes")
	w0 := "u@1970-01-01T00:00:00.000Z"
	var w0Updates []change
	for _, c := range chs {
		if c.Key == w0 {
			w0Updates = append(w0Updates, c)
		}
	}
	require.Len(t, w0Updates, 3, "window 0: two updates, then its deletion marker: %+v", chs)
	require.Equal(t, float64(11), w0Updates[1].Value["sum_n"], "the late event within the lateness counted: 1+2+8")
	require.True(t, w0Updates[2].Deleted)
	got := latest(chs)
	require.NotContains(t, got, w0)
	require.Equal(t, float64(84), got["u@1970-01-01T00:01:00.000Z"]["sum_n"])
}

// Hopping windows: an event counts in every window that holds it.
func TestHoppingWindows(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	s := newSink(t, b.Addr(), t.TempDir(), map[string]any{"window": "1m", "hop": "30s", "event_time": "ts"})
	require.NoError(t, consume(t, s, batch(msg(0, "k", `{"ts":"1970-01-01T00:00:45Z"}`))))
	v, ok := s.View("k")
	require.True(t, ok)
	require.JSONEq(t, `[{"key":"k","window_start":"1970-01-01T00:00:00.000Z","window_end":"1970-01-01T00:01:00.000Z","count":1},
		{"key":"k","window_start":"1970-01-01T00:00:30.000Z","window_end":"1970-01-01T00:01:30.000Z","count":1}]`, string(v))
	closeSink(t, s)
}

// A filter keeps matching messages only; a deletion marker on the input
// deletes its key's group, which then starts again from zero with later
// versions; unreadable messages are Permanent errors.
func TestFilterDeletionAndBadInput(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	s := newSink(t, b.Addr(), t.TempDir(), map[string]any{"aggregates": []any{"sum(amount)"}, "filter": `status = "paid" and not (amount < 10)`})
	require.NoError(t, consume(t, s, batch(msg(0, "a", `{"status":"paid","amount":10}`), msg(1, "a", `{"status":"new","amount":100}`),
		msg(2, "a", `{"status":"paid","amount":5}`))))
	del := msg(3, "a", `{}`)
	del.SetHeader("deleted", connector.HeaderValue{Kind: 3, Data: []byte{1}})
	require.NoError(t, consume(t, s, batch(del)))
	_, ok := s.View("a")
	require.False(t, ok, "deleted")
	err := consume(t, s, batch(msg(4, "a", `{"status":"paid","amount":20}`), msg(5, "a", `not json`), msg(6, "", `{"status":"paid","amount":20}`),
		msg(7, "a", `{"status":"paid","amount":"x"}`)))
	var me connector.MessageErrors
	require.ErrorAs(t, err, &me)
	require.Len(t, me, 3)
	require.Contains(t, me[1].Error(), "not JSON")
	require.Contains(t, me[2].Error(), "no \"key\" header")
	require.Contains(t, me[3].Error(), "want a number")
	closeSink(t, s)
	chs := readChanges(t, b.Addr(), "out", "changes")
	require.Len(t, chs, 3)
	require.Equal(t, float64(10), chs[0].Value["sum_amount"])
	require.True(t, chs[1].Deleted)
	require.Equal(t, float64(20), chs[2].Value["sum_amount"])
	require.NotEqual(t, chs[0].ID, chs[2].ID, "a group started again goes on counting versions")
}

// Configuration errors name the key and what is wrong.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pc   map[string]any
		want string
	}{
		{map[string]any{"to": "nostream"}, "to"},
		{map[string]any{"to": "a/b", "aggregates": []any{"median(x)"}}, "unknown function"},
		{map[string]any{"to": "a/b", "aggregates": []any{"sum(*)"}}, "only count and latest"},
		{map[string]any{"to": "a/b", "aggregates": []any{"count(*)", "count(*)"}}, "repeats"},
		{map[string]any{"to": "a/b", "filter": `amount >`}, "filter"},
		{map[string]any{"to": "a/b", "hop": "10s"}, "hop"},
		{map[string]any{"to": "a/b", "window": "1m", "hop": "25s"}, "multiple"},
		{map[string]any{"to": "a/b", "allowed_lateness": "1m"}, "need a window"},
		{map[string]any{"to": "a/b", "window": "1h", "hop": "1s"}, "at most 100"},
		{map[string]any{"to": "a/b", "group_by": "a..b"}, "group_by"},
	} {
		_, err := New(connector.Config{Key: "d", Plugin: connector.PluginConfig{Values: c.pc, Source: "test"}})
		require.ErrorContains(t, err, c.want, "%v", c.pc)
	}
}

// A checkpoint that cannot be saved stops the sink (Unavailable, and
// again at every Consume) until it is reopened, which applies the batch
// again from the saved state: counted once.
func TestFailedCheckpointNeedsReopen(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	dir := filepath.Join(t.TempDir(), "state")
	s := newSink(t, b.Addr(), dir, nil)
	require.NoError(t, consume(t, s, batch(msg(0, "a", `{}`))))
	require.NoError(t, os.Rename(dir, dir+".away"))
	require.NoError(t, os.WriteFile(dir, []byte("not a directory"), 0o600))
	b2 := batch(msg(1, "a", `{}`), msg(2, "a", `{}`))
	err := consume(t, s, b2)
	require.True(t, connector.IsUnavailable(err), "%v", err)
	require.ErrorContains(t, consume(t, s, b2), "needs a restart")
	closeSink(t, s)
	require.NoError(t, os.Remove(dir))
	require.NoError(t, os.Rename(dir+".away", dir))
	s = newSink(t, b.Addr(), dir, nil)
	require.NoError(t, consume(t, s, b2))
	v, ok := s.View("a")
	require.True(t, ok)
	require.JSONEq(t, `{"key":"a","count":3}`, string(v))
	closeSink(t, s)
	chs := readChanges(t, b.Addr(), "out", "changes")
	require.Len(t, chs, 2)
	require.Equal(t, float64(3), chs[1].Value["count"])
}
