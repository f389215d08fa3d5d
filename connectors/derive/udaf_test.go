package derive

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/udaf/udaftest"
	"github.com/stretchr/testify/require"
)

// The example WebAssembly aggregate (a top-3 of scores per key) through
// the derive sink gives, per key, what a Go reference computes from the
// same input, and its states survive a reopen from the checkpoint.
func TestUDAFTop3MatchesGoReference(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module")
	}
	t.Parallel()
	wasm := udaftest.Top3(t)
	b := dedupBroker(t)
	dir := t.TempDir()
	pc := map[string]any{"udaf": wasm, "aggregates": []any{"count(*)"}}
	s := newSink(t, b.Addr(), dir, pc)
	type entry struct {
		ID    string  `json:"id"`
		Score float64 `json:"score"`
	}
	ref := map[string][]entry{}
	off := uint64(0)
	for round := range 4 {
		if round == 2 {
			closeSink(t, s)
			s = newSink(t, b.Addr(), dir, pc)
		}
		var msgs []msgT
		for i := range 50 {
			n := round*50 + i
			key := fmt.Sprintf("k%d", n%6)
			e := entry{ID: fmt.Sprintf("id%03d", n), Score: float64((n * 37) % 101)}
			ref[key] = append(ref[key], e)
			msgs = append(msgs, msg(off, key, jsonf(`{"id":%q,"score":%v}`, e.ID, e.Score)))
			off++
		}
		require.NoError(t, consume(t, s, batch(msgs...)))
	}
	for key, es := range ref {
		sort.Slice(es, func(i, j int) bool {
			if es[i].Score != es[j].Score {
				return es[i].Score > es[j].Score
			}
			return es[i].ID < es[j].ID
		})
		want, _ := json.Marshal(es[:3])
		v, ok := s.View(key)
		require.True(t, ok, key)
		var got struct {
			Count int             `json:"count"`
			UDAF  json.RawMessage `json:"udaf"`
		}
		require.NoError(t, json.Unmarshal(v, &got))
		require.Equal(t, len(es), got.Count, key)
		require.JSONEq(t, string(want), string(got.UDAF), key)
	}
	closeSink(t, s)
	last := latest(readChanges(t, b.Addr(), "out", "changes"))
	require.Len(t, last, 6)
}

type msgT = connector.Message
