package influxdb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/influxtest"
	"github.com/stretchr/testify/require"
)

// fluxQuery is upstream's sample query for db, with the open range's
// _start and _stop (the query's own time) dropped so that a row reads
// the same each time.
func fluxQuery(db string) string {
	return fmt.Sprintf(`from(bucket: "%s/autogen")
  |> range(start: time(v: "$cursor"))
  |> filter(fn: (r) => r._measurement == "cpu" and r._field == "usage")
  |> group(columns: [])
  |> sort(columns: ["_time", "host"])
  |> limit(n: $limit)
  |> drop(columns: ["_start", "_stop"])`, db)
}

func sourceValues(url, db string, extra map[string]any) map[string]any {
	v := map[string]any{"url": url, "org": "ferry", "token": "ferry:secret", "query": fluxQuery(db),
		"poll_interval": "20ms", "batch_size": int64(5), "max_retries": int64(1)}
	for k, x := range extra {
		v[k] = x
	}
	return v
}

// feed writes cpu points to db: usage fields "u<n>", hosts from host,
// times from at.
type feed struct {
	mu  sync.Mutex
	url string
	db  string
	n   int
}

func (f *feed) add(t testing.TB, n int, at func(i int) time.Time, host func(i int) string) []string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	var added []string
	for range n {
		fmt.Fprintf(&b, "cpu,host=%s usage=\"u%d\" %d\n", host(f.n), f.n, at(f.n).UnixNano())
		added = append(added, fmt.Sprintf("u%d", f.n))
		f.n++
	}
	require.NoError(t, influxtest.Write(f.url, f.db, b.String()))
	return added
}

// value is the envelope's value: what feed.add returns.
func value(m connector.Message) string {
	var env struct{ Value any }
	if err := json.Unmarshal(m.Payload, &env); err != nil {
		return "not an envelope: " + string(m.Payload)
	}
	return fmt.Sprint(env.Value)
}

func TestSourceConformance(t *testing.T) {
	t.Parallel()
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	f := &feed{url: url, db: db}
	base := time.Unix(1_700_000_000, 0)
	connectortest.Source(t, connectortest.SourceSuite{
		New: func(t *testing.T) connector.Source {
			s, err := NewSource(cfg(sourceValues(url, db, nil)))
			require.NoError(t, err)
			return s
		},
		// Three points a second, apart by host: ties at every time.
		Add: func(t *testing.T, n int) []string {
			return f.add(t, n, func(i int) time.Time { return base.Add(time.Duration(i/3) * time.Second) },
				func(i int) string { return fmt.Sprintf("h%d", i%3) })
		},
		Text:      value,
		StableIDs: true,
	})
}

// Rows sharing one time are neither skipped nor repeated across batch
// boundaries, nor across a restart from any batch's state.
func TestSameTimeRowsAcrossBatches(t *testing.T) {
	t.Parallel()
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	f := &feed{url: url, db: db}
	base := time.Unix(1_700_000_000, 0)
	// 23 rows at one time, then 7 at the next, 1 at the last.
	want := f.add(t, 23, func(int) time.Time { return base }, func(i int) string { return fmt.Sprintf("h%03d", i) })
	want = append(want, f.add(t, 7, func(int) time.Time { return base.Add(time.Nanosecond) }, func(i int) string { return fmt.Sprintf("h%03d", i) })...)
	want = append(want, f.add(t, 1, func(int) time.Time { return base.Add(time.Hour) }, func(i int) string { return "z" })...)
	open := func(state []byte) *Source {
		s, err := NewSource(cfg(sourceValues(url, db, map[string]any{"batch_size": int64(4)})))
		require.NoError(t, err)
		require.NoError(t, s.Open(context.Background(), state))
		return s.(*Source)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := open(nil)
	var got []string
	var states [][]byte
	for len(got) < len(want) {
		b, err := s.Poll(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, len(b.Messages), 4)
		for _, m := range b.Messages {
			got = append(got, value(m))
		}
		states = append(states, b.State)
	}
	require.Equal(t, want, got)
	// From each batch's state, a new source reads exactly what followed.
	done := 0
	for _, st := range states {
		var v sourceState
		require.NoError(t, json.Unmarshal(st, &v))
		done = int(v.ProcessedRows)
		if done == len(want) {
			break
		}
		r := open(st)
		var rest []string
		for len(rest) < len(want)-done {
			b, err := r.Poll(ctx)
			require.NoError(t, err)
			for _, m := range b.Messages {
				rest = append(rest, value(m))
			}
		}
		require.Equal(t, want[done:], rest, "after state %s", st)
	}
}

func TestSourceBadConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	for key, bad := range map[string]map[string]any{
		"query":          {"query": "from(bucket: \"x\") |> range(start: -1h)"},
		"initial_offset": {"initial_offset": "yesterday"},
		"cursor_field":   {"cursor_field": "time"},
		"version":        {"version": "v3"},
		"payload_format": {"payload_format": "xml"},
	} {
		_, err := NewSource(cfg(sourceValues("http://127.0.0.1:1", "db", bad)))
		require.ErrorContains(t, err, "plugin_config."+key, "%v", bad)
	}
}

// upstreamSourceTOML is upstream's README "Full Configuration Example"
// with its V2 plugin settings (the README's v2 snippet: the full example
// is v3, which Ferry does not build), addresses and bucket changed.
func upstreamSourceTOML(url, db string) string {
	return fmt.Sprintf(`type = "source"
key = "influxdb"
version = 0
name = "InfluxDB source"
enabled = true
path    = "target/release/libiggy_connector_influxdb_source"

[[streams]]
stream       = "metrics"
topic        = "cpu"
schema       = "json"
batch_length = 100
linger_time  = "10ms"

[plugin_config]
version  = "v2"
url      = %q
org      = "my-org"
token    = "my-token"
query    = '''
  from(bucket: "%s")
    |> range(start: time(v: "$cursor"))
    |> filter(fn: (r) => r._measurement == "cpu" and r._field == "usage")
    |> group(columns: [])
    |> sort(columns: ["_time", "host"])
    |> limit(n: $limit)
'''
poll_interval   = "50ms"
batch_size      = 500
cursor_field    = "_time"
initial_offset  = "2023-01-01T00:00:00Z"
payload_format  = "json"
include_metadata = true
verbose_logging  = false
`, url, db)
}

func TestUpstreamSourceFileRuns(t *testing.T) {
	t.Parallel()
	url := influxtest.URL(t)
	db := influxtest.Database(t, url)
	f := &feed{url: url, db: db}
	base := time.Unix(1_700_000_000, 0)
	want := f.add(t, 40, func(i int) time.Time { return base.Add(time.Duration(i/4) * time.Millisecond) },
		func(i int) string { return fmt.Sprintf("h%d", i%4) })
	run := connectortest.Start(t, map[string]string{"influx.toml": upstreamSourceTOML(url, db)})
	var got []string
	connectortest.Eventually(t, "40 messages in Iggy", func() bool {
		got = readTopic(t, run.Runtime.IggyAddress(), "metrics", "cpu")
		return len(got) >= 40
	})
	var values []string
	for _, p := range got {
		values = append(values, value(connector.Message{Payload: []byte(p)}))
	}
	require.Equal(t, want, values)
	var env map[string]any
	require.NoError(t, json.Unmarshal([]byte(got[0]), &env))
	require.Equal(t, "cpu", env["measurement"])
	require.Equal(t, "usage", env["field"])
	require.Equal(t, "h0", env["row"].(map[string]any)["host"])
}
