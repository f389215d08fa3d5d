package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
)

func TestPollingSourceConformance(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE conf_items (id bigint PRIMARY KEY, body text)`)
	connectortest.Source(t, connectortest.SourceSuite{
		New: sourceWith(map[string]any{
			"connection_string": db.dsn, "mode": "polling", "tables": []any{"conf_items"},
			"poll_interval": "20ms", "batch_size": int64(5), "include_metadata": false}),
		Add:       rowAdder(db, "conf_items", `{"id":%[1]d,"body":"row %[1]d"}`),
		StableIDs: true,
	})
}

func TestSinkConformance(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	connectortest.Sink(t, connectortest.SinkSuite{
		New: func(t *testing.T) connector.Sink {
			s, err := NewSink(connector.Config{Key: "pg", Plugin: connector.PluginConfig{Source: "pg.toml", Values: map[string]any{
				"connection_string": db.dsn, "target_table": "conf_rows", "auto_create_table": true, "payload_format": "text"}}})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		Read: func(t *testing.T) []string {
			rows, err := db.pool.Query(context.Background(), `SELECT payload::text FROM conf_rows ORDER BY iggy_offset`)
			if err != nil {
				return nil // not created yet
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var p string
				if err := rows.Scan(&p); err != nil {
					t.Fatal(err)
				}
				out = append(out, p)
			}
			return out
		},
		Idempotent: true,
		Poison:     []byte("a NUL \x00 byte, which a text column refuses"),
	})
}

func TestCDCSourceConformance(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	db.exec(`CREATE TABLE items (id bigint PRIMARY KEY, body text)`)
	connectortest.Source(t, connectortest.SourceSuite{
		New: sourceWith(cdcConfig(db, nil)),
		Add: rowAdder(db, "items", "row %[1]d"),
		// An event carries its LSN and commit time; compare the row it
		// brings, from the initial snapshot (rows there before the first
		// start) or from the stream (an INSERT).
		Text: func(m connector.Message) string {
			var r record
			var row struct{ ID int64 }
			if json.Unmarshal(m.Payload, &r) != nil || json.Unmarshal(r.Data, &row) != nil ||
				(r.Op != "SNAPSHOT" && r.Op != "INSERT") {
				return "unexpected event: " + string(m.Payload)
			}
			return fmt.Sprintf("row %d", row.ID)
		},
		StableIDs: true,
	})
}

// sourceWith builds the PostgreSQL source from plugin_config values.
func sourceWith(values map[string]any) func(t *testing.T) connector.Source {
	return func(t *testing.T) connector.Source {
		s, err := NewSource(connector.Config{Key: "pg", Plugin: connector.PluginConfig{Source: "pg.toml", Values: values}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// rowAdder inserts rows (id, 'row <id>') into table, numbering on from the
// last call, and returns each as want formats its id (%[1]d).
func rowAdder(db *testDB, table, want string) func(t *testing.T, count int) []string {
	var mu sync.Mutex
	n := 0
	return func(_ *testing.T, count int) []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for range count {
			n++
			db.exec(`INSERT INTO `+table+` VALUES ($1, $2)`, n, fmt.Sprintf("row %d", n))
			out = append(out, fmt.Sprintf(want, n))
		}
		return out
	}
}
