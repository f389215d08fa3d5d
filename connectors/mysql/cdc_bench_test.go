package mysql

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/mysqltest"
)

// BenchmarkCDC streams inserted rows (id, a 100-byte text, a number, a
// time) through Poll and Ack, batch_size 1000: each iteration inserts
// 1000 rows in one transaction and polls until they came. msgs/s
// includes the server's insert; cpu-µs/msg is this process's CPU while
// polling (the source's reader and vitess's decoding), not the insert's
// nor the server's.
func BenchmarkCDC(b *testing.B) {
	dsn := mysqltest.Database(b)
	db := mysqltest.Open(b, dsn)
	if _, err := db.Exec("CREATE TABLE bench (id BIGINT PRIMARY KEY, body VARCHAR(200), n INT, at DATETIME(6))"); err != nil {
		b.Fatal(err)
	}
	src, err := NewSource(connector.Config{Key: "b", Plugin: connector.PluginConfig{Source: "b.toml",
		Values: cdcValues(dsn, map[string]any{"snapshot": "never", "batch_size": int64(1000)})}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := src.Open(ctx, nil); err != nil {
		b.Fatal(err)
	}
	defer src.Close(ctx)
	const rows = 1000
	q := "INSERT INTO bench VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", rows), ", ")
	body := strings.Repeat("x", 100)
	next := 0
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		args := make([]any, 0, 4*rows)
		for k := 0; k < rows; k++ {
			next++
			args = append(args, next, body, k, time.Now())
		}
		if _, err := db.Exec(q, args...); err != nil {
			b.Fatal(err)
		}
		c0 := cpuTime()
		for got := 0; got < rows; {
			batch, err := src.Poll(ctx)
			if err != nil {
				b.Fatal(err)
			}
			got += len(batch.Messages)
			if err := src.(connector.Acker).Ack(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		cpu += cpuTime() - c0
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(rows*b.N), "cpu-µs/msg")
}
