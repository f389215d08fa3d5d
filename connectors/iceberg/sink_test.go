package iceberg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/stretchr/testify/require"
)

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	t.Run("sql catalog on PostgreSQL", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		createTable(t, e.cat, "conf.events")
		runConformance(t, e.cat, cfg("conf", e.values("conf.events")))
	})
	t.Run("hadoop catalog", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		values := map[string]any{"tables": []any{"conf.events"}, "catalog_type": "hadoop", "warehouse": dir, "store_class": "fs"}
		st, err := parseSettings(cfg("conf", values))
		require.NoError(t, err)
		cat, err := openCatalog(context.Background(), st)
		require.NoError(t, err)
		createTable(t, cat, "conf.events")
		runConformance(t, cat, cfg("conf", values))
	})
}

func runConformance(t *testing.T, cat catalog.Catalog, c connector.Config) {
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink {
			s, err := New(c)
			require.NoError(t, err)
			return s
		},
		Read: func(t *testing.T) []string {
			var out []string
			for _, r := range readRows(t, cat, "conf.events") {
				out = append(out, r.String())
			}
			return out
		},
		Unordered:  true,
		Idempotent: true,
		Poison:     []byte(`{"n":"not a number","text":"refused"}`),
	})
}

// A batch delivered again, whole or in part, after its snapshot was
// committed adds no row: the offsets in the snapshot summary say what
// is in the table. Another partition's offsets are kept apart.
func TestReplayIsSkippedByTheSnapshotOffsets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	createTable(t, e.cat, "ns.t")
	s := openSink(t, cfg("replay", e.values("ns.t")))
	ctx := context.Background()
	b := jsonBatch("s", "t", 10, `{"n":10}`, `{"n":11}`, `{"n":12}`)
	require.NoError(t, s.Consume(ctx, b))
	require.NoError(t, s.Consume(ctx, b), "the same batch again")
	// A batch overlapping the last one: only 13 and 14 are new.
	require.NoError(t, s.Consume(ctx, jsonBatch("s", "t", 12, `{"n":12}`, `{"n":13}`, `{"n":14}`)))
	// Partition 1 of the same topic has offsets of its own.
	p1 := jsonBatch("s", "t", 10, `{"n":110}`)
	p1.Partition = 1
	require.NoError(t, s.Consume(ctx, p1))
	var got []int64
	for _, r := range readRows(t, e.cat, "ns.t") {
		got = append(got, r.N)
	}
	require.Equal(t, []int64{10, 11, 12, 13, 14, 110}, got)
	require.Equal(t, 3, snapshotCount(t, e.cat, "ns.t"), "one snapshot per batch that added rows")

	// A second sink (a restarted runtime) sees the same offsets.
	s2 := openSink(t, cfg("replay", e.values("ns.t")))
	require.NoError(t, s2.Consume(ctx, jsonBatch("s", "t", 13, `{"n":13}`, `{"n":14}`, `{"n":15}`)))
	require.Len(t, readRows(t, e.cat, "ns.t"), 7)
}

// Two sinks appending to one table at once, as two runtimes would:
// commits that lose the race are redone on the reloaded table, and
// every row arrives once.
func TestConcurrentWritersRetryConflicts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	createTable(t, e.cat, "ns.t")
	const writers, batches = 3, 6
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		s := openSink(t, cfg(fmt.Sprintf("w%d", w), e.values("ns.t")))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range batches {
				n := w*1000 + i
				b := jsonBatch("s", "t", uint64(i), fmt.Sprintf(`{"n":%d}`, n))
				errs <- s.Consume(context.Background(), b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, readRows(t, e.cat, "ns.t"), writers*batches)
}

// Records that do not fit the schema are permanent errors naming why;
// their neighbours are written.
func TestRecordsThatDoNotFitArePermanentErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	createTable(t, e.cat, "ns.t")
	s := openSink(t, cfg("fit", e.values("ns.t")))
	b := jsonBatch("s", "t", 0,
		`{"n":0,"text":"ok","extra":{"ignored":true}}`,
		`{"text":"no n"}`,
		`{"n":1.5}`,
		`[1,2]`,
		`not json`,
		`{"n":null}`,
		`{"n":5}`,
	)
	err := s.Consume(context.Background(), b)
	var per connector.MessageErrors
	require.True(t, errors.As(err, &per), "%v", err)
	require.Len(t, per, 5)
	for i, want := range map[int]string{1: `required column "n"`, 2: "does not fit", 3: "not a JSON object", 4: "not a JSON object", 5: `required column "n"`} {
		require.True(t, connector.IsPermanent(per[i]), "message %d", i)
		require.ErrorContains(t, per[i], want, "message %d", i)
	}
	require.Equal(t, []row{{N: 0, Text: "ok"}, {N: 5}}, readRows(t, e.cat, "ns.t"))
	// Replayed, the rejects are reported again (so a crash before the
	// runtime dead-lettered them loses nothing) and nothing is added.
	err = s.Consume(context.Background(), b)
	require.True(t, errors.As(err, &per))
	require.Len(t, per, 5)
	require.Len(t, readRows(t, e.cat, "ns.t"), 2)
}

// Dynamic routing: each message goes to the table it names; a message
// naming no table, a missing one or a hostile name is rejected with the
// reason and never reaches the catalog as a name.
func TestDynamicRoutingAndHostileNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	createTable(t, e.cat, "nyc.users")
	createTable(t, e.cat, "nyc.trips")
	v := e.values("")
	v["dynamic_routing"], v["dynamic_route_field"] = true, "db_table"
	s := openSink(t, cfg("dyn", v))
	b := jsonBatch("s", "t", 0,
		`{"db_table":"nyc.users","n":1}`,
		`{"db_table":"nyc.trips","n":2}`,
		`{"n":3}`,
		`{"db_table":"nyc.nope","n":4}`,
		`{"db_table":"../../etc.passwd","n":5}`,
		`{"db_table":"nyc.users; DROP TABLE iceberg_tables","n":6}`,
		`{"db_table":"nyc.us\u0000ers","n":7}`,
		`{"db_table":"nyc","n":8}`,
		`{"db_table":7,"n":9}`,
		`{"db_table":"nyc.users","n":10}`,
	)
	err := s.Consume(context.Background(), b)
	var per connector.MessageErrors
	require.True(t, errors.As(err, &per), "%v", err)
	require.Len(t, per, 7)
	require.ErrorContains(t, per[2], `no string field "db_table"`)
	require.ErrorContains(t, per[3], "nyc.nope")
	require.ErrorContains(t, per[3], "does not exist")
	for _, i := range []int{4, 5, 6, 7} {
		require.ErrorContains(t, per[i], "dynamic_route_field", "message %d", i)
	}
	require.Equal(t, []row{{N: 1}, {N: 10}}, readRows(t, e.cat, "nyc.users"))
	require.Equal(t, []row{{N: 2}}, readRows(t, e.cat, "nyc.trips"))
	ctx := context.Background()
	nss, err := e.cat.ListNamespaces(ctx, nil)
	require.NoError(t, err)
	require.Len(t, nss, 1, "no namespace was made from a message: %v", nss)
}

// Bad configuration is refused with the key named; hostile names in
// tables never load.
func TestBadConfigNamesTheKey(t *testing.T) {
	t.Parallel()
	base := func() map[string]any {
		return map[string]any{"tables": []any{"nyc.users"}, "catalog_type": "sql", "uri": "postgres://u@127.0.0.1:1/db",
			"warehouse": t.TempDir(), "store_class": "fs"}
	}
	for _, tc := range []struct {
		key  string
		set  map[string]any
		want string
	}{
		{"tables[0]", map[string]any{"tables": []any{"../x.y"}}, "not a plain name"},
		{"tables[0]", map[string]any{"tables": []any{"a/b.c"}}, "not a plain name"},
		{"tables[0]", map[string]any{"tables": []any{"users"}}, "<namespace>.<table>"},
		{"tables[0]", map[string]any{"tables": []any{"ns.t t"}}, "not a plain name"},
		{"tables", map[string]any{"tables": []any{""}}, "at least one table"},
		{"catalog_type", map[string]any{"catalog_type": "glue"}, "not built in Ferry"},
		{"catalog_type", map[string]any{"catalog_type": "hive"}, "catalog_type"},
		{"store_class", map[string]any{"store_class": "gcs"}, "not built in Ferry"},
		{"uri", map[string]any{"uri": ""}, "needs uri"},
		{"uri", map[string]any{"uri": "sqlite:///tmp/x.db"}, "postgres://"},
		{"dynamic_route_field", map[string]any{"dynamic_routing": true}, "dynamic_routing needs"},
		{"store_class", map[string]any{"catalog_type": "hadoop", "store_class": "s3"}, "not atomic"},
		{"warehouse", map[string]any{"warehouse": nil}, "warehouse"},
	} {
		v := base()
		for k, x := range tc.set {
			if x == nil {
				delete(v, k)
			} else {
				v[k] = x
			}
		}
		_, err := New(cfg("bad", v))
		require.Error(t, err, "%s %v", tc.key, tc.set)
		require.ErrorContains(t, err, tc.key, "%v", tc.set)
		require.ErrorContains(t, err, tc.want, "%v", tc.set)
	}
}

// A table in tables that does not exist fails Open with its name.
func TestMissingTableFailsOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s, err := New(cfg("missing", e.values("nyc.users")))
	require.NoError(t, err)
	err = s.Open(context.Background())
	require.ErrorContains(t, err, "nyc.users does not exist")
}

// The secret key is a secret of the spec (redacted in API answers and
// logs).
func TestSecretsAreSpecdAsSecret(t *testing.T) {
	for _, k := range []string{"store_secret_access_key", "credential", "token", "uri"} {
		require.True(t, Spec.Secret(k), k)
	}
}
