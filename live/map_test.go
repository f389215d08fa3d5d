package live_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/live"
)

// ev is an event in a form tests can compare.
type ev struct {
	kind    live.EventKind
	key     string
	payload string
	catchUp bool
}

func nextEvents(t *testing.T, m *live.Map, n int) []ev {
	t.Helper()
	ctx := testCtx(t)
	var out []ev
	for range n {
		e, err := m.Next(ctx)
		require.NoError(t, err)
		out = append(out, ev{e.Kind, e.Key, e.Message.PayloadString(), e.CatchUp})
	}
	return out
}

func contents(m *live.Map) map[string]string {
	out := map[string]string{}
	for k, msg := range m.All() {
		out[k] = msg.PayloadString()
	}
	return out
}

// TestMapCatchUpCompactsThenGoesLive: the partition as it was at the start
// is presented compacted (latest per key, deletions gone, messages
// without a key skipped), then every change.
func TestMapCatchUpCompactsThenGoesLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	ctx := testCtx(t)
	e.sendKeyed(t, 0, "other", "partition 0 is not read", false)
	for _, m := range []struct {
		key, payload string
		deleted      bool
	}{
		{"a", "a1", false}, {"b", "b1", false}, {"", "no key", false}, {"a", "a2", false},
		{"c", "c1", false}, {"b", "gone", true}, {"d", "d1", false}, {"c", "c2", false},
	} {
		e.sendKeyed(t, 1, m.key, m.payload, m.deleted)
	}

	m, err := e.h.Map(ctx, e.stream, e.topic, live.StringKey, live.WithDeletion(live.IsDeleted),
		live.WithPartition(1), live.WithBatchLength(3))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close(ctx)) }()
	require.False(t, closed(m.Ready()))

	got := nextEvents(t, m, 2)
	require.False(t, closed(m.Ready()), "ready before the last catch-up event")
	require.Equal(t, map[string]string{"a": "a2", "c": "c2", "d": "d1"}, contents(m),
		"the whole caught-up state is readable during the catch-up events")
	got = append(got, nextEvents(t, m, 1)...)
	require.True(t, closed(m.Ready()), "ready with the last catch-up event")
	require.Equal(t, []ev{
		{live.Upsert, "a", "a2", true},
		{live.Upsert, "d", "d1", true},
		{live.Upsert, "c", "c2", true},
	}, got, "one event per live key, in the order of their latest messages")

	e.sendKeyed(t, 1, "e", "e1", false)
	e.sendKeyed(t, 1, "a", "a3", false)
	e.sendKeyed(t, 1, "d", "x", true)
	e.sendKeyed(t, 1, "zz", "absent", true) // deleting what is not there: no event
	e.sendKeyed(t, 1, "", "no key", false)
	e.sendKeyed(t, 1, "f", "f1", false)
	require.Equal(t, []ev{
		{live.Upsert, "e", "e1", false},
		{live.Upsert, "a", "a3", false},
		{live.Delete, "d", "x", false},
		{live.Upsert, "f", "f1", false},
	}, nextEvents(t, m, 4))
	require.Equal(t, map[string]string{"a": "a3", "c": "c2", "e": "e1", "f": "f1"}, contents(m))
	require.Equal(t, 4, m.Len())
	msg, ok := m.Get("a")
	require.True(t, ok)
	require.Equal(t, uint32(1), msg.Partition)
	require.Equal(t, uint64(9), msg.Offset)
	_, ok = m.Get("d")
	require.False(t, ok)
}

// TestMapLiveAfterStart: what arrives after the start is live, even when
// it comes in the same poll as the catch-up.
func TestMapLiveAfterStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	e.sendKeyed(t, 0, "a", "a1", false)
	e.sendKeyed(t, 0, "b", "b1", false)
	m, err := e.h.Map(ctx, e.stream, e.topic, live.StringKey)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close(ctx)) }()
	e.sendKeyed(t, 0, "a", "a2", false)
	require.Equal(t, []ev{
		{live.Upsert, "a", "a1", true},
		{live.Upsert, "b", "b1", true},
		{live.Upsert, "a", "a2", false},
	}, nextEvents(t, m, 3))
}

func TestMapEmptyPartitionReadyAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	m, err := e.h.Map(ctx, e.stream, e.topic, live.StringKey)
	require.NoError(t, err)
	require.True(t, closed(m.Ready()))
	require.Zero(t, m.Len())
	e.sendKeyed(t, 0, "k", "v", false)
	var got []ev
	for e, err := range m.Events(ctx) {
		require.NoError(t, err)
		got = append(got, ev{e.Kind, e.Key, e.Message.PayloadString(), e.CatchUp})
		break
	}
	require.Equal(t, []ev{{live.Upsert, "k", "v", false}}, got)
	require.NoError(t, m.Close(ctx))
	require.NoError(t, m.Close(ctx), "Close is idempotent")
	_, err = m.Next(ctx)
	require.ErrorIs(t, err, iggy.ErrClosed)
	require.Equal(t, 1, m.Len(), "the contents stay readable after Close")
}

// TestMapKeyFunc: the key function decides; without a deletion predicate
// nothing deletes.
func TestMapKeyFunc(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	e.send(t, 0, "x=1", "y=1", "junk", "x=2")
	e.sendKeyed(t, 0, "y", "y=deleted?", true)
	byPrefix := func(m live.Message) (string, bool) {
		p := m.PayloadString()
		if len(p) < 2 || p[1] != '=' {
			return "", false
		}
		return p[:1], true
	}
	m, err := e.h.Map(ctx, e.stream, e.topic, byPrefix)
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close(ctx)) }()
	nextEvents(t, m, 2)
	require.Equal(t, map[string]string{"x": "x=2", "y": "y=deleted?"}, contents(m))
}

func TestMapOptionErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	ctx := testCtx(t)
	_, err := e.h.Map(ctx, e.stream, e.topic, nil)
	require.ErrorIs(t, err, live.ErrInvalidOption)
	require.ErrorContains(t, err, "key function")
	_, err = e.h.Map(ctx, e.stream, e.topic, live.StringKey, live.WithPartition(7))
	require.ErrorIs(t, err, iggy.ErrPartitionNotFound)
	require.ErrorContains(t, err, "no partition 7")
	_, err = e.h.Map(ctx, e.stream, e.topic, live.StringKey, live.WithBatchLength(-1))
	require.ErrorIs(t, err, live.ErrInvalidOption)
	_, err = e.h.Map(ctx, e.stream, iggy.NamedID("nope"), live.StringKey)
	require.ErrorIs(t, err, iggy.ErrTopicNotFound)
}

// TestMapBytesKeys: StringKey and BytesKey read the two key namespaces a
// Target writes, apart.
func TestMapBytesKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	for i, hs := range [][]iggy.Entry{
		{iggy.Header(live.KeyHeader, iggy.StringValue("k"))},
		{iggy.Header(live.KeyHeader, iggy.RawValue([]byte("k")))},
		{iggy.Header(live.KeyHeader, iggy.RawValue([]byte{0, 0xff}))},
		{iggy.Header(live.KeyHeader, iggy.Uint32Value(7))},
	} {
		msg := iggy.Message{Payload: fmt.Appendf(nil, "v%d", i), Headers: hs}
		_, err := e.admin.SendMessages(ctx, e.stream, e.topic, iggy.ToPartition(0), []iggy.Message{msg})
		require.NoError(t, err)
	}
	strs, err := e.h.Map(ctx, e.stream, e.topic, live.StringKey)
	require.NoError(t, err)
	nextEvents(t, strs, 1)
	require.Equal(t, map[string]string{"k": "v0"}, contents(strs))
	bins, err := e.h.Map(ctx, e.stream, e.topic, live.BytesKey)
	require.NoError(t, err)
	nextEvents(t, bins, 2)
	require.Equal(t, map[string]string{"k": "v1", "\x00\xff": "v2"}, contents(bins))
	require.NoError(t, strs.Close(ctx))
	require.NoError(t, bins.Close(ctx))
	require.Equal(t, []string{"\x00\xff", "k"}, collectKeys(bins))
}

func collectKeys(m *live.Map) []string {
	var keys []string
	for k := range m.All() {
		keys = append(keys, k)
	}
	return keys
}
