package derive

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

// deletion is a deletion marker for key at offset off.
func deletion(off uint64, key string) connector.Message {
	m := msg(off, key, `null`)
	m.Headers = append(m.Headers, header.New(iggy.DeletedHeader, header.BoolValue(true)))
	return m
}

// The audit's probe: two values of input key o1 in group u count once
// (the second replaces the first), and o1's deletion marker empties u,
// which the output gets as a deletion marker.
func TestChangelogKeyCountsOnceAndItsDeletionDeletesTheGroup(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	s := newSink(t, b.Addr(), t.TempDir(), map[string]any{"input": "changelog", "group_by": "user"})
	require.NoError(t, consume(t, s, batch(msg(0, "o1", `{"user":"u"}`), msg(1, "o1", `{"user":"u"}`))))
	v, ok := s.View("u")
	require.True(t, ok)
	require.JSONEq(t, `{"key":"u","count":1}`, string(v))
	require.NoError(t, consume(t, s, batch(deletion(2, "o1"))))
	_, ok = s.View("u")
	require.False(t, ok, "u has no row left")
	require.NoError(t, consume(t, s, batch(msg(3, "o2", `{"user":"u"}`), deletion(4, "o2"), msg(5, "o3", `{"user":"w"}`), deletion(6, "o3"))),
		"u again and w, both emptied in the batch: no output")
	closeSink(t, s)
	chs := readChanges(t, b.Addr(), "out", "changes")
	require.Len(t, chs, 2, "%+v", chs)
	require.Equal(t, "u", chs[0].Key)
	require.Equal(t, float64(1), chs[0].Value["count"])
	require.Equal(t, "u", chs[1].Key)
	require.True(t, chs[1].Deleted, "the deletion marker for u")
	require.Empty(t, latest(chs))
}

// A key's new value in another group retracts it from the old one
// (every aggregate) and adds it to the new one; the group it left last
// is deleted on the output; a value the filter drops, a value that
// cannot be read and a deletion marker all take the key out; a message
// without a key is refused. A reopen rebuilds the same state from the
// checkpoint.
func TestChangelogKeyMovesBetweenGroups(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	dir := t.TempDir()
	pc := map[string]any{"input": "changelog", "group_by": "user", "filter": `status != "void"`,
		"aggregates": []any{"count(*)", "sum(amount)", "min(amount)", "max(amount)", "latest(sku)"}}
	s := newSink(t, b.Addr(), dir, pc)
	view := func(key string) string {
		v, ok := s.View(key)
		if !ok {
			return "absent"
		}
		return string(v)
	}
	require.NoError(t, consume(t, s, batch(msg(0, "o1", `{"user":"a","amount":5,"sku":"x"}`), msg(1, "o2", `{"user":"a","amount":7,"sku":"y"}`))))
	require.JSONEq(t, `{"key":"a","count":2,"sum_amount":12,"min_amount":5,"max_amount":7,"latest_sku":"y"}`, view("a"))
	require.NoError(t, consume(t, s, batch(msg(2, "o2", `{"user":"b","amount":1,"sku":"z"}`))))
	require.JSONEq(t, `{"key":"a","count":1,"sum_amount":5,"min_amount":5,"max_amount":5,"latest_sku":"x"}`, view("a"))
	require.JSONEq(t, `{"key":"b","count":1,"sum_amount":1,"min_amount":1,"max_amount":1,"latest_sku":"z"}`, view("b"))
	closeSink(t, s)
	s = newSink(t, b.Addr(), dir, pc)
	require.JSONEq(t, `{"key":"a","count":1,"sum_amount":5,"min_amount":5,"max_amount":5,"latest_sku":"x"}`, view("a"), "after a reopen")
	require.NoError(t, consume(t, s, batch(msg(3, "o1", `{"user":"b","amount":9}`))))
	require.Equal(t, "absent", view("a"), "a's last key moved to b")
	require.JSONEq(t, `{"key":"b","count":2,"sum_amount":10,"min_amount":1,"max_amount":9,"latest_sku":"z"}`, view("b"))

	require.NoError(t, consume(t, s, batch(msg(4, "o1", `{"user":"b","amount":9,"status":"void"}`))))
	require.JSONEq(t, `{"key":"b","count":1,"sum_amount":1,"min_amount":1,"max_amount":1,"latest_sku":"z"}`, view("b"), "o1 filtered out")
	err := consume(t, s, batch(msg(5, "o2", `{"user":"b","amount":"lots"}`), msg(6, "", `{"user":"c"}`), msg(7, "o3", `{"user":"c","amount":2}`)))
	var me connector.MessageErrors
	require.ErrorAs(t, err, &me)
	require.Len(t, me, 2)
	require.Contains(t, me[0].Error(), "want a number")
	require.Contains(t, me[1].Error(), `no "key" header`)
	require.Equal(t, "absent", view("b"), "o2's value is unreadable: o2 counts nowhere")
	require.JSONEq(t, `{"key":"c","count":1,"sum_amount":2,"min_amount":2,"max_amount":2,"latest_sku":null}`, view("c"))
	require.NoError(t, consume(t, s, batch(deletion(8, "o3"), deletion(9, "nobody"))))
	closeSink(t, s)

	chs := readChanges(t, b.Addr(), "out", "changes")
	var keys []string
	for _, c := range chs {
		k := c.Key
		if c.Deleted {
			k += " deleted"
		}
		keys = append(keys, k)
	}
	require.Equal(t, []string{"a", "a", "b", "a deleted", "b", "b", "b deleted", "c", "c deleted"}, keys)
	require.Empty(t, latest(chs))
}

// input = "changelog" takes no window and no udaf; a state_dir made in
// one input mode is refused in the other.
func TestChangelogConfigErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pc   map[string]any
		want string
	}{
		{map[string]any{"input": "changelog", "window": "1m"}, `window: 1m0s: input = "changelog" takes no window`},
		{map[string]any{"input": "changelog", "udaf": "/x/top3.wasm"}, `udaf: input = "changelog" takes no udaf`},
		{map[string]any{"input": "table"}, "input"},
	} {
		c.pc["to"] = "a/b"
		_, err := New(connector.Config{Key: "d", Plugin: connector.PluginConfig{Values: c.pc, Source: "test"}})
		require.ErrorContains(t, err, c.want, "%v", c.pc)
	}
	b := dedupBroker(t)
	dir := t.TempDir()
	s := newSink(t, b.Addr(), dir, nil)
	require.NoError(t, consume(t, s, batch(msg(0, "a", `{}`))))
	closeSink(t, s)
	c, err := New(connector.Config{Key: "d1", Plugin: connector.PluginConfig{Values: map[string]any{
		"to": "out/changes", "address": b.Addr(), "state_dir": dir, "input": "changelog"}, Source: "test"}})
	require.NoError(t, err)
	err = c.Open(t.Context())
	require.ErrorContains(t, err, `made with input = "events": a changed input needs a new state_dir`)
	require.True(t, connector.IsPermanent(err))
}

// refRow is one key's latest value in the brute-force reference.
type refRow struct {
	user    string
	amount  *float64
	sku     *string
	payload string
	seq     int
}

// refGroups is every aggregate of every group, computed from the table
// alone, as the derive sink's View shows them.
func refGroups(table map[string]refRow) map[string]map[string]any {
	byUser := map[string][]refRow{}
	for _, r := range table {
		byUser[r.user] = append(byUser[r.user], r)
	}
	out := map[string]map[string]any{}
	for u, rs := range byUser {
		sort.Slice(rs, func(i, j int) bool { return rs[i].seq < rs[j].seq })
		var n, sum float64
		var lo, hi, latestSku any
		skus := map[string]bool{}
		for _, r := range rs {
			if r.amount != nil {
				a := *r.amount
				n++
				sum += a
				if lo == nil || a < lo.(float64) {
					lo = a
				}
				if hi == nil || a > hi.(float64) {
					hi = a
				}
			}
			if r.sku != nil {
				skus[*r.sku] = true
				latestSku = *r.sku
			}
		}
		var avg any
		if n > 0 {
			avg = sum / n
		}
		var payload any
		if err := json.Unmarshal([]byte(rs[len(rs)-1].payload), &payload); err != nil {
			panic(err)
		}
		out[u] = map[string]any{"key": u, "count": float64(len(rs)), "count_amount": n, "sum_amount": sum, "avg_amount": avg,
			"min_amount": lo, "max_amount": hi, "distinct_count_sku": float64(len(skus)), "latest_sku": latestSku, "latest": payload}
	}
	return out
}

// Every aggregate under retraction, against a brute force over the
// table: seeded random updates (keys moving between groups, fields
// present or not, values the filter drops) and deletion markers, in random batches, with reopens
// from the checkpoint; after each batch every group's value equals the
// reference, and at the end the output changelog's last value per key
// (deletion markers removing keys) equals it too.
func TestChangelogAggregatesMatchBruteForce(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 17))
			dir := t.TempDir()
			to := fmt.Sprintf("out/brute%d", seed)
			pc := map[string]any{"input": "changelog", "group_by": "user", "to": to, "filter": `status != "void"`, "aggregates": []any{"count(*)", "count(amount)",
				"sum(amount)", "avg(amount)", "min(amount)", "max(amount)", "distinct_count(sku)", "latest(sku)", "latest(*)"}}
			s := newSink(t, b.Addr(), dir, pc)
			table := map[string]refRow{}
			users := []string{"u0", "u1", "u2", "u3", "u4"}
			off, seq, deletes, moves, filtered := uint64(0), 0, 0, 0, 0
			for round := range 60 {
				if round%20 == 19 {
					closeSink(t, s)
					s = newSink(t, b.Addr(), dir, pc)
				}
				var msgs []connector.Message
				for range 1 + rng.IntN(12) {
					key := fmt.Sprintf("k%d", rng.IntN(25))
					if rng.IntN(5) == 0 {
						if _, ok := table[key]; ok {
							deletes++
						}
						delete(table, key)
						msgs = append(msgs, deletion(off, key))
						off++
						continue
					}
					seq++
					r := refRow{user: users[rng.IntN(len(users))], seq: seq}
					if old, ok := table[key]; ok && old.user != r.user {
						moves++
					}
					doc := map[string]any{"user": r.user, "n": seq}
					if rng.IntN(4) > 0 {
						a := float64(rng.IntN(41)-20) / 2 // halves: sums are exact
						r.amount = &a
						doc["amount"] = a
					}
					if rng.IntN(3) > 0 {
						sku := fmt.Sprintf("s%d", rng.IntN(6))
						r.sku = &sku
						doc["sku"] = sku
					}
					void := rng.IntN(8) == 0
					if void {
						doc["status"] = "void" // filtered out: the key leaves the table
					}
					p, err := json.Marshal(doc)
					require.NoError(t, err)
					r.payload = string(p)
					if void {
						if _, ok := table[key]; ok {
							filtered++
						}
						delete(table, key)
					} else {
						table[key] = r
					}
					msgs = append(msgs, msg(off, key, r.payload))
					off++
				}
				require.NoError(t, consume(t, s, batch(msgs...)))
				want := refGroups(table)
				for _, u := range users {
					v, ok := s.View(u)
					if want[u] == nil {
						require.False(t, ok, "round %d: %s has no row, the sink shows %s", round, u, v)
						continue
					}
					require.True(t, ok, "round %d: %s", round, u)
					var got map[string]any
					require.NoError(t, json.Unmarshal(v, &got))
					require.Equal(t, want[u], got, "round %d: group %s", round, u)
				}
			}
			closeSink(t, s)
			got := latest(readChanges(t, b.Addr(), "out", to[len("out/"):]))
			require.Equal(t, refGroups(table), got, "the output changelog")
			require.Positive(t, deletes)
			require.Positive(t, moves)
			require.Positive(t, filtered)
		})
	}
}

// A group key that is not UTF-8 (a binary key header) is refused in
// both modes: the checkpoint's JSON would change it, and with it the
// group's output ids after a restart. A binary key that is UTF-8 text
// groups as that text.
func TestGroupKeyNotUTF8IsRefused(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	for _, input := range []string{"events", "changelog"} {
		s := newSink(t, b.Addr(), t.TempDir(), map[string]any{"input": input, "to": "out/" + input})
		bin := func(off uint64, key string) connector.Message {
			m := msg(off, "", `{}`)
			m.Headers = []connector.Header{header.New(iggy.KeyHeader, header.RawValue([]byte(key)))}
			return m
		}
		err := consume(t, s, batch(bin(0, "\xff\xfe"), bin(1, "bin")))
		var me connector.MessageErrors
		require.ErrorAs(t, err, &me, input)
		require.Len(t, me, 1, input)
		require.Contains(t, me[0].Error(), "not UTF-8", input)
		v, ok := s.View("bin")
		require.True(t, ok, input)
		require.JSONEq(t, `{"key":"bin","count":1}`, string(v), input)
		closeSink(t, s)
	}
}

// A key is a row of its input topic: the same key in two topics is two
// rows, and so are a string key and a binary key of the same bytes;
// each deletion marker deletes its own.
func TestChangelogRowIsTopicAndKey(t *testing.T) {
	t.Parallel()
	b := dedupBroker(t)
	s := newSink(t, b.Addr(), t.TempDir(), map[string]any{"input": "changelog", "group_by": "user", "aggregates": []any{"count(*)", "sum(n)"}})
	other := func(msgs ...connector.Message) *connector.SinkBatch {
		bt := batch(msgs...)
		bt.Topic = "other"
		return bt
	}
	binary := msg(1, "", `{"user":"u","n":4}`)
	binary.Headers = []connector.Header{header.New(iggy.KeyHeader, header.RawValue([]byte("o1")))}
	require.NoError(t, consume(t, s, batch(msg(0, "o1", `{"user":"u","n":1}`), binary)))
	require.NoError(t, consume(t, s, other(msg(0, "o1", `{"user":"u","n":2}`))))
	v, ok := s.View("u")
	require.True(t, ok)
	require.JSONEq(t, `{"key":"u","count":3,"sum_n":7}`, string(v))
	require.NoError(t, consume(t, s, other(deletion(1, "o1"))))
	v, _ = s.View("u")
	require.JSONEq(t, `{"key":"u","count":2,"sum_n":5}`, string(v), "other's o1 deleted, in/events' o1 stays")
	require.NoError(t, consume(t, s, batch(deletion(2, "o1"))))
	v, _ = s.View("u")
	require.JSONEq(t, `{"key":"u","count":1,"sum_n":4}`, string(v), "the string key o1 deleted, the binary one stays")
	closeSink(t, s)
}
