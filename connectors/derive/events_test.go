package derive

import (
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// min and max per key in the default input mode: negative numbers,
// numbers in strings, absent and null fields skipped.
func TestEventsMinAndMax(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	s := newSink(t, b.Addr(), t.TempDir(), map[string]any{"aggregates": []any{"min(amount)", "max(amount)", "count(amount)"}})
	require.NoError(t, consume(t, s, batch(msg(0, "a", `{"amount":5}`), msg(1, "a", `{"amount":-2.5}`), msg(2, "b", `{"amount":"7"}`))))
	require.NoError(t, consume(t, s, batch(msg(3, "a", `{"amount":3}`), msg(4, "a", `{}`), msg(5, "a", `{"amount":null}`), msg(6, "b", `{"amount":"-1e1"}`))))
	v, ok := s.View("a")
	require.True(t, ok)
	require.JSONEq(t, `{"key":"a","min_amount":-2.5,"max_amount":5,"count_amount":3}`, string(v))
	v, ok = s.View("b")
	require.True(t, ok)
	require.JSONEq(t, `{"key":"b","min_amount":-10,"max_amount":7,"count_amount":2}`, string(v))
	closeSink(t, s)
	got := latest(readChanges(t, b.Addr(), "out", "changes"))
	require.Equal(t, -2.5, got["a"]["min_amount"])
	require.Equal(t, float64(-10), got["b"]["min_amount"])
}

// A tumbling window without event_time, as `ferry derive create ...
// --window 1m` makes it: the event time is the message's origin
// timestamp (the append timestamp when it has none), the watermark
// follows it, and an event whose window closed is late.
func TestEventsTumblingWindowOnOriginTimestamp(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	s := newSink(t, b.Addr(), t.TempDir(), map[string]any{"window": "1m", "aggregates": []any{"count(*)", "sum(n)"}})
	base := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	at := func(off uint64, sec int, n int) connector.Message {
		m := msg(off, "k", jsonf(`{"n":%d}`, n))
		m.OriginTimestamp = base.Add(time.Duration(sec) * time.Second)
		m.Timestamp = base.Add(time.Hour) // the append time, which must not count
		return m
	}
	noOrigin := msg(3, "k", `{"n":8}`)
	noOrigin.Timestamp = base.Add(100 * time.Second)
	require.NoError(t, consume(t, s, batch(at(0, 10, 1), at(1, 50, 2), at(2, 70, 4), noOrigin)))
	v, ok := s.View("k")
	require.True(t, ok)
	// The watermark is 100s: [0, 1m) is closed (no allowed lateness), so
	// only its last update on the output shows it.
	require.JSONEq(t, `[{"key":"k","window_start":"2026-12-02T10:01:00.000Z","window_end":"2026-12-02T10:02:00.000Z","count":2,"sum_n":12}]`, string(v))
	require.NoError(t, consume(t, s, batch(at(4, 130, 16), at(5, 20, 32))))
	require.Equal(t, uint64(1), s.Stats().Late, "the event at 20s came after the watermark passed its window's end")
	closeSink(t, s)
	got := latest(readChanges(t, b.Addr(), "out", "changes"))
	require.Len(t, got, 3)
	require.Equal(t, float64(3), got["k@2026-12-02T10:00:00.000Z"]["sum_n"])
	require.Equal(t, float64(12), got["k@2026-12-02T10:01:00.000Z"]["sum_n"])
	require.Equal(t, float64(16), got["k@2026-12-02T10:02:00.000Z"]["sum_n"])
}
