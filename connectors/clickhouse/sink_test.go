package clickhouse

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/internal/chtest"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { chtest.Main(m) }

func cfg(values map[string]any) connector.Config {
	return connector.Config{Key: "ch", Plugin: connector.PluginConfig{Source: "ch.toml", Values: values}}
}

func query(t *testing.T, q string) string {
	t.Helper()
	out, err := chtest.Query(chtest.URL(t), q)
	require.NoError(t, err)
	return out
}

func lines(s string) []string {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	out := strings.Split(s, "\n")
	sort.Strings(out)
	return out
}

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, format, engine, idColumn, idType, final string
		idempotent                                    bool
	}{
		{"MergeTree", "json_each_row", "MergeTree ORDER BY n", "", "", "", false},
		// Rows keyed by the Iggy message id collapse: replays add nothing.
		{"ReplacingMergeTree by id", "json_each_row", "ReplacingMergeTree ORDER BY iggy_id", "iggy_id", "String", " FINAL", true},
		{"row_binary MergeTree", "row_binary", "MergeTree ORDER BY n", "", "", "", false},
		{"row_binary ReplacingMergeTree by UUID id", "row_binary", "ReplacingMergeTree ORDER BY iggy_id", "iggy_id", "UUID", " FINAL", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := chtest.Database(t)
			cols := "n UInt32, text String"
			if tc.idColumn != "" {
				cols = tc.idColumn + " " + tc.idType + ", " + cols
			}
			query(t, fmt.Sprintf("CREATE TABLE %s.events (%s) ENGINE = %s", db, cols, tc.engine))
			connectortest.Sink(t, connectortest.SinkSuite{
				New: func(t *testing.T) connector.Sink {
					s, err := New(cfg(map[string]any{"url": chtest.URL(t), "database": db, "table": "events",
						"id_column": tc.idColumn, "max_retries": int64(0), "insert_format": tc.format}))
					require.NoError(t, err)
					return s
				},
				Read: func(t *testing.T) []string {
					return lines(query(t, fmt.Sprintf("SELECT n, text FROM %s.events%s FORMAT JSONEachRow", db, tc.final)))
				},
				Unordered:  true,
				Idempotent: tc.idempotent,
				Poison:     []byte(`{"n":"not a number","text":"refused"}`),
			})
		})
	}
}

// Hostile names cannot reach the query: database and table must be
// identifiers, and payloads travel only in the body.
func TestHostileNamesAndPayloads(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"events; DROP TABLE x", "ev`ents", "1events", "", "a.b"} {
		_, err := New(cfg(map[string]any{"url": "http://127.0.0.1:1", "table": bad}))
		require.ErrorContains(t, err, "table", "%q", bad)
	}
	db := chtest.Database(t)
	query(t, "CREATE TABLE "+db+".t (s String) ENGINE = MergeTree ORDER BY s")
	s, err := New(cfg(map[string]any{"url": chtest.URL(t), "database": db, "table": "t"}))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.Open(ctx))
	hostile := []string{`'); DROP DATABASE ` + db + `; --`, "\u0000", `\'`, "`", "\n"}
	var msgs []connector.Message
	for _, h := range hostile {
		p, err := json.Marshal(map[string]string{"s": h})
		require.NoError(t, err)
		msgs = append(msgs, connector.Message{ID: uuid.New(), Payload: p})
	}
	require.NoError(t, s.Consume(ctx, &connector.SinkBatch{Messages: msgs}))
	require.Equal(t, fmt.Sprint(len(hostile)), strings.TrimSpace(query(t, "SELECT count() FROM "+db+".t")))
}

// A server that is not there is Unavailable (the runtime keeps the batch
// and restarts the sink), not a rejection.
func TestDownServerIsUnavailable(t *testing.T) {
	t.Parallel()
	s, err := New(cfg(map[string]any{"url": "http://127.0.0.1:1", "table": "t", "max_retries": int64(0)}))
	require.NoError(t, err)
	err = s.Consume(context.Background(), &connector.SinkBatch{Messages: []connector.Message{{Payload: []byte(`{"n":1}`)}}})
	require.True(t, connector.IsUnavailable(err), "%v", err)
}
