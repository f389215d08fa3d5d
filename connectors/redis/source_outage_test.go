package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/internal/redistest"
	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// sourceTOML is a redis source connector file into bridge/records.
func sourceTOML(url, mode, name string, batch int, schema string) string {
	return fmt.Sprintf(`type = "source"
key = "from_redis"
path = "redis"
[[streams]]
stream = "bridge"
topic = "records"
schema = %q
linger_time = "0ms"
[plugin_config]
url = %q
mode = %q
stream = %q
key = %q
batch_size = %d
block = "20ms"
timeout = "5s"
schema = %q
`, schema, url, mode, name, name, batch, schema)
}

// feeder adds one record at a time, remembering which adds Redis
// answered (acked) and which were only tried (the answer lost with the
// server: such a record may or may not be in Redis).
type feeder struct {
	mu     sync.Mutex
	acked  map[int]bool
	tried  map[int]bool
	failed int
}

// noRetryClient is a client that never sends a command twice: a retried
// RPUSH whose first answer was lost would add the item twice.
func noRetryClient(t *testing.T, url string) *goredis.Client {
	t.Helper()
	opt, err := goredis.ParseURL(url)
	require.NoError(t, err)
	opt.MaxRetries = -1
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = time.Second, time.Second, time.Second
	c := goredis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (f *feeder) add(c *goredis.Client, mode, name string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v := fmt.Sprintf(`{"n":%d}`, n)
	f.mu.Lock()
	f.tried[n] = true
	f.mu.Unlock()
	var err error
	if mode == "streams" {
		// An explicit id: n+1 milliseconds, sequence 1.
		err = c.XAdd(ctx, &goredis.XAddArgs{Stream: name, ID: fmt.Sprintf("%d-1", n+1), Values: []any{"body", v, "seq", fmt.Sprint(n)}}).Err()
	} else {
		err = c.RPush(ctx, name, v).Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.acked[n] = true
	} else {
		f.failed++
	}
}

func (f *feeder) counts() (acked, failed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.acked), f.failed
}

// A Redis killed (SIGKILL) mid-stream and started again on its data
// (append-only file, fsync always): the source notices, the runtime
// restarts it with backoff, and once Redis is back every record Redis
// acknowledged reaches the Iggy topic, with no help from the test. A
// record is repeated only when its batch was in Iggy and its XACK or
// LREM was lost with the server: at most the two batches in flight (one
// being sent, one read ahead). A repeated stream entry keeps its id.
func TestSourceSurvivesAServerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a Redis of its own")
	}
	for _, mode := range []string{"streams", "lists"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			const batch = 10
			srv := redistest.Private(t)
			c := noRetryClient(t, srv.URL)
			name := "in"
			run := connectortest.Start(t, map[string]string{"in.toml": sourceTOML(srv.URL, mode, name, batch, "json")})
			t.Cleanup(func() {
				if t.Failed() {
					for _, info := range run.Runtime.Connectors(connector.KindSource) {
						t.Logf("source %s: %s, %d restarts, last error %q", info.Key, info.Status, info.Restarts, info.LastError)
					}
				}
			})
			f := &feeder{acked: map[int]bool{}, tried: map[int]bool{}}
			stop := connectortest.Feed(t, 2*time.Millisecond, func(i int) error { f.add(c, mode, name, i); return nil })
			stopped := false
			defer func() {
				if !stopped {
					stop()
				}
			}()
			topic := func() []iggy.Message { return run.Messages(t, "bridge", "records") }
			connectortest.Eventually(t, "records flowing into Iggy", func() bool { return len(topic()) >= 50 })

			srv.Halt()
			connectortest.Eventually(t, "the source and the feeder to notice the outage", func() bool {
				if _, failed := f.counts(); failed < 5 {
					return false
				}
				for _, info := range run.Runtime.Connectors(connector.KindSource) {
					if info.LastError != "" {
						return true
					}
				}
				return false
			})
			_, failedAtResume := f.counts()
			srv.Resume(t)
			ackedAtResume, _ := f.counts()
			connectortest.Eventually(t, "adds answered again after the restart", func() bool {
				acked, _ := f.counts()
				return acked >= ackedAtResume+100
			})
			stopped = true
			stop()

			f.mu.Lock()
			acked, tried := f.acked, f.tried
			f.mu.Unlock()
			// The runtime restarts a source with backoff of up to a
			// minute: wait longer than that (a liveness bound).
			var msgs []iggy.Message
			deadline := time.Now().Add(3 * time.Minute)
			for {
				msgs = topic()
				seen := map[int]bool{}
				for _, m := range msgs {
					var v struct{ N int }
					if json.Unmarshal(m.Payload, &v) == nil {
						seen[v.N] = true
					}
				}
				missing := 0
				for n := range acked {
					if !seen[n] {
						missing++
					}
				}
				if missing == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after the outage %d of %d acknowledged records are not in Iggy", missing, len(acked))
				}
				time.Sleep(50 * time.Millisecond)
			}

			copies, ids := map[int]int{}, map[int][16]byte{}
			for _, m := range msgs {
				var v struct{ N int }
				require.NoError(t, json.Unmarshal(m.Payload, &v), "%s", m.Payload)
				require.True(t, tried[v.N], "record %d was never added", v.N)
				if mode == "streams" {
					require.Equal(t, entryID(fmt.Sprintf("%d-1", v.N+1)), m.ID, "record %d: the id is its entry id", v.N)
					h, ok := header.Get(m.Headers, "redis_stream_id")
					require.True(t, ok)
					require.Equal(t, fmt.Sprintf("%d-1", v.N+1), h.String())
					if id, ok := ids[v.N]; ok {
						require.Equal(t, id, m.ID, "record %d repeated with another id", v.N)
					}
					ids[v.N] = m.ID
				}
				copies[v.N]++
			}
			repeats := len(msgs) - len(copies)
			restarts := 0
			for _, info := range run.Runtime.Connectors(connector.KindSource) {
				restarts = info.Restarts
			}
			t.Logf("%s: %d records answered by Redis (%d tried), %d in Iggy, %d repeated; %d adds failed in the outage; %d source restarts",
				mode, len(acked), len(tried), len(msgs), repeats, failedAtResume, restarts)
			require.NotZero(t, restarts, "the runtime restarted the source (its read failed with the server)")
			require.LessOrEqual(t, repeats, 2*batch, "more repeats than the two batches in flight at the outage")

			// Everything acknowledged in the end: nothing left pending.
			ctx := context.Background()
			if mode == "streams" {
				connectortest.Eventually(t, "no entry left pending", func() bool {
					pend, err := c.XPending(ctx, name, "ferry").Result()
					return err == nil && pend.Count == 0
				})
			} else {
				connectortest.Eventually(t, "the list and the processing list empty", func() bool {
					return c.LLen(ctx, name).Val() == 0 && c.LLen(ctx, name+":processing").Val() == 0
				})
			}
		})
	}
}
