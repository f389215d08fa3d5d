package influxdb

import (
	"fmt"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/influxtest"
	"github.com/stretchr/testify/require"
)

// answer is a query's rows as InfluxDB 1.8 gives them for fluxQuery
// without drop(): "t<i>/h<j>" is host hj at base+i ms, valued "u" and
// the pair; _start and _stop are the query's range, which moves.
func answer(start string, points ...string) []row {
	base := time.Unix(1_700_000_000, 0)
	var rows []row
	for _, p := range points {
		var i, j int
		if _, err := fmt.Sscanf(p, "t%d/h%d", &i, &j); err != nil {
			panic(err)
		}
		rows = append(rows, row{"result": "_result", "table": "0", "_start": start, "_stop": time.Now().Format(time.RFC3339Nano),
			"_time": base.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano), "_value": "u" + p,
			"_measurement": "cpu", "_field": "usage", "host": fmt.Sprintf("h%d", j)})
	}
	return rows
}

func values(t *testing.T, s *Source, rows []row) (got []string, ids [][16]byte, state []byte) {
	t.Helper()
	b, _, err := s.batch(rows)
	require.NoError(t, err)
	for _, m := range b.Messages {
		got = append(got, value(m))
		ids = append(ids, m.ID)
	}
	return got, ids, b.State
}

func openAt(t *testing.T, url string, state []byte) *Source {
	t.Helper()
	src, err := NewSource(cfg(sourceValues(url, "db", nil)))
	require.NoError(t, err)
	s := src.(*Source)
	require.NoError(t, s.Open(t.Context(), state), "state %s", state)
	return s
}

// The reads InfluxDB 1.8 gave while one writer wrote t0/h0, t0/h1, ...
// one point a request (a query reads h0's series first): a query that
// saw t1/h1 and t1/h2 but not t1/h0, written before them, must not move
// the cursor past t1, or t1/h0 is never read.
func TestAQueryThatMissedAnEarlierPoint(t *testing.T) {
	t.Parallel()
	s := openAt(t, influxtest.URL(t), nil)
	// The first query only sets the horizon: no earlier query vouches
	// for what it saw.
	got, _, _ := values(t, s, answer("a", "t0/h0", "t0/h1"))
	require.Empty(t, got)
	got, _, _ = values(t, s, answer("b", "t0/h0", "t0/h1", "t0/h2", "t1/h1", "t1/h2"))
	require.Equal(t, []string{"ut0/h0", "ut0/h1", "ut0/h2"}, got, "up to the horizon, t0")
	got, _, _ = values(t, s, answer("c", "t0/h0", "t0/h1", "t0/h2", "t1/h0", "t1/h1", "t1/h2", "t2/h1"))
	require.Equal(t, []string{"ut1/h0", "ut1/h1", "ut1/h2"}, got, "t1/h0 read once visible; t2 past the horizon")
}

// Rows at the cursor's time are skipped by what they hold: a row of that
// time seen for the first time sorts before one already emitted (written
// later, by another writer). A replay from the state carries the same
// ids, and a count-only state (upstream's) skips by place once.
func TestRowsAtTheCursorTimeByIdentity(t *testing.T) {
	t.Parallel()
	url := influxtest.URL(t)
	s := openAt(t, url, nil)
	values(t, s, answer("a", "t1/h1"))
	got, _, st := values(t, s, answer("b", "t1/h1"))
	require.Equal(t, []string{"ut1/h1"}, got)
	got, ids, _ := values(t, s, answer("c", "t1/h0", "t1/h1", "t2/h0"))
	require.Equal(t, []string{"ut1/h0"}, got, "t1/h0 is new; t1/h1 was emitted; t2 is past the horizon")
	got, _, _ = values(t, s, answer("d", "t1/h0", "t1/h1", "t2/h0"))
	require.Equal(t, []string{"ut2/h0"}, got)

	r := openAt(t, url, st)
	values(t, r, answer("e", "t1/h0", "t1/h1", "t2/h0"))
	again, againIDs, _ := values(t, r, answer("f", "t1/h0", "t1/h1", "t2/h0"))
	require.Equal(t, []string{"ut1/h0", "ut2/h0"}, again)
	require.Equal(t, ids[0], againIDs[0], "a replayed row's id")

	legacy := []byte(`{"version":"v2","last_timestamp":"2023-11-14T22:13:20.001Z","processed_rows":1,"cursor_row_count":1}`)
	l := openAt(t, url, legacy)
	values(t, l, answer("g", "t1/h0", "t1/h1"))
	got, _, _ = values(t, l, answer("h", "t1/h0", "t1/h1"))
	require.Equal(t, []string{"ut1/h1"}, got, "upstream's count skips the first row of the time")
	got, _, _ = values(t, l, answer("i", "t1/h0", "t1/h1", "t1/h2"))
	require.Equal(t, []string{"ut1/h2"}, got, "the row skipped by place stays skipped")
}
