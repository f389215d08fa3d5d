package iceberg

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/pgtest"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func cfg(key string, values map[string]any) connector.Config {
	return connector.Config{Key: key, Plugin: connector.PluginConfig{Source: "iceberg.toml", Values: values}}
}

// env is a SQL catalog in a database of the test's own, with a
// file:// warehouse.
type env struct {
	dsn, warehouse string
	cat            catalog.Catalog
}

// sqlValues are plugin_config values for the sink on e.
func (e *env) values(tables ...string) map[string]any {
	ts := []any{}
	for _, t := range tables {
		ts = append(ts, t)
	}
	return map[string]any{"tables": ts, "catalog_type": "sql", "uri": e.dsn, "warehouse": e.warehouse, "store_class": "fs"}
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvOn(t, pgtest.DB(t))
}

func newEnvOn(t testing.TB, dsn string) *env {
	t.Helper()
	e := &env{dsn: dsn, warehouse: t.TempDir()}
	st, err := parseSettings(cfg("setup", e.values("setup.unused")))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e.cat, err = openCatalog(ctx, st)
	require.NoError(t, err)
	t.Cleanup(func() { closeCatalog(e.cat) })
	return e
}

// eventsSchema is the table the tests write: n (required long), text
// (optional string).
var eventsSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "n", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 2, Name: "text", Type: iceberg.PrimitiveTypes.String},
)

// createTable makes "ns.table" (and ns) with eventsSchema.
func createTable(t testing.TB, cat catalog.Catalog, name string) {
	t.Helper()
	id, err := parseTableName(name)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := catalog.NamespaceFromIdent(id)
	if ok, err := cat.CheckNamespaceExists(ctx, ns); err == nil && !ok {
		require.NoError(t, cat.CreateNamespace(ctx, ns, nil))
	}
	_, err = cat.CreateTable(ctx, id, eventsSchema)
	require.NoError(t, err)
}

// row is one row of an events table.
type row struct {
	N    int64
	Text string
}

func (r row) String() string { return fmt.Sprintf(`{"n":%d,"text":%q}`, r.N, r.Text) }

// readRows scans the table with iceberg-go, sorted by n.
func readRows(t testing.TB, cat catalog.Catalog, name string) []row {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _ := parseTableName(name)
	tbl, err := cat.LoadTable(ctx, id)
	require.NoError(t, err)
	return scanRows(t, ctx, tbl)
}

func scanRows(t testing.TB, ctx context.Context, tbl *table.Table) []row {
	t.Helper()
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	require.NoError(t, err)
	defer at.Release()
	rdr := array.NewTableReader(at, 1024)
	defer rdr.Release()
	var out []row
	for rdr.Next() {
		rec := rdr.RecordBatch()
		ni := rec.Schema().FieldIndices("n")[0]
		ti := rec.Schema().FieldIndices("text")[0]
		ns := rec.Column(ni).(*array.Int64)
		ts := rec.Column(ti).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, row{N: ns.Value(i), Text: ts.Value(i)})
		}
	}
	require.NoError(t, rdr.Err())
	sort.Slice(out, func(i, j int) bool { return out[i].N < out[j].N })
	return out
}

// snapshotCount is how many snapshots the table has.
func snapshotCount(t testing.TB, cat catalog.Catalog, name string) int {
	t.Helper()
	id, _ := parseTableName(name)
	tbl, err := cat.LoadTable(context.Background(), id)
	require.NoError(t, err)
	return len(tbl.Metadata().Snapshots())
}

func jsonBatch(stream, topic string, first uint64, payloads ...string) *connector.SinkBatch {
	b := &connector.SinkBatch{Stream: stream, Topic: topic, Schema: connector.SchemaJSON}
	for i, p := range payloads {
		b.Messages = append(b.Messages, connector.Message{Payload: []byte(p), Stream: stream, Topic: topic, Offset: first + uint64(i)})
	}
	return b
}

func openSink(t testing.TB, c connector.Config) connector.Sink {
	t.Helper()
	s, err := New(c)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.Open(ctx))
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}
