package api

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/runtime"
)

// keysSource sends, once, n messages for each of keys keys, interleaved,
// each with its key in the key header (iggy.KeyHeader), then nothing.
type keysSource struct {
	keys, n int
	sent    bool
}

func (s *keysSource) Open(context.Context, []byte) error { return nil }
func (s *keysSource) Close(context.Context) error        { return nil }

func (s *keysSource) Poll(ctx context.Context) (*connector.Batch, error) {
	if s.sent {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s.sent = true
	b := &connector.Batch{Schema: connector.SchemaJSON}
	for i := range s.n {
		for k := range s.keys {
			key := fmt.Sprintf("k%03d", k)
			b.Messages = append(b.Messages, connector.Message{Payload: fmt.Appendf(nil, `{"k":%q,"i":%d}`, key, i),
				Headers: []connector.Header{connector.StringHeader(iggy.KeyHeader, key)}})
		}
	}
	return b, nil
}

// failingKeySink takes messages out of order (ordering = "key") and
// refuses, as a destination that is down for it, every batch holding a
// message of the failing key (as runtime/sink_lanes_test.go's keyedSink
// does); it counts what it wrote per key.
type failingKeySink struct {
	mu      sync.Mutex
	failing string
	written map[string]int
}

func (s *failingKeySink) Open(context.Context) error  { return nil }
func (s *failingKeySink) Close(context.Context) error { return nil }
func (s *failingKeySink) ConsumesOutOfOrder()         {}

func (s *failingKeySink) Consume(_ context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range b.Messages {
		if v, ok := m.Header(iggy.KeyHeader); ok && s.failing != "" && v.String() == s.failing {
			return fmt.Errorf("the destination refuses key %s for now", s.failing)
		}
	}
	for _, m := range b.Messages {
		v, _ := m.Header(iggy.KeyHeader)
		s.written[v.String()]++
	}
	return nil
}

func (s *failingKeySink) setFailing(k string) {
	s.mu.Lock()
	s.failing = k
	s.mu.Unlock()
}

func (s *failingKeySink) count(k string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written[k]
}

// lanesEnv is a running runtime with keysSource writing s/t, a sink
// "keyed" reading it with ordering = "key" through sink, and a sink
// "plain" (ordering "partition", the default) reading it too.
func lanesEnv(t *testing.T, sink *failingKeySink, keys, n int) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), counts: map[string]*atomic.Int64{}, logs: &logBuffer{}}
	files := map[string]string{
		"config.toml": `[iggy]
address = "embedded"
embedded_address = "127.0.0.1:0"
create_missing = true
[state]
path = "state"
[connectors]
config_type = "local"
config_dir = "connectors"
[http]
enabled = false
`,
		"connectors/keys.toml": "type = \"source\"\nkey = \"keys\"\npath = \"keys\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n",
		"connectors/keyed.toml": `type = "sink"
key = "keyed"
path = "failing_key"
[[streams]]
stream = "s"
topics = ["t"]
batch_length = 100
poll_interval = "5ms"
ordering = "key"
ordering_concurrency = 4
max_retries = 2
retry_backoff = "5ms"
max_retry_backoff = "40ms"
`,
		"connectors/plain.toml": "type = \"sink\"\nkey = \"plain\"\npath = \"count\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\npoll_interval = \"5ms\"\n",
	}
	require.NoError(t, os.MkdirAll(filepath.Join(e.dir, "connectors"), 0o755))
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644))
	}
	reg := connector.NewRegistry()
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSource, Name: "keys",
		NewSource: func(connector.Config) (connector.Source, error) { return &keysSource{keys: keys, n: n}, nil }}))
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSink, Name: "failing_key",
		NewSink: func(connector.Config) (connector.Sink, error) { return sink, nil }}))
	require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSink, Name: "count",
		NewSink: func(c connector.Config) (connector.Sink, error) { return &countSink{n: e.count(c.Key)}, nil }}))
	noEnv := config.WithEnv(config.MapEnv(nil))
	rcfg, err := config.Load(filepath.Join(e.dir, "config.toml"), noEnv)
	require.NoError(t, err)
	rt, err := runtime.New(rcfg, runtime.Options{Registry: reg, ConfigOptions: []config.Option{noEnv}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, rt.Start(ctx))
	t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	e.rt = rt
	e.srv, e.url = startServer(t, rt, config.HTTP{}, e.logs)
	e.key = localToken(t, e.srv)
	return e
}

// statsConnector is GET /stats's entry of the connector with key.
func (e *env) statsConnector(key string) map[string]any {
	e.t.Helper()
	st := e.do("GET", "/stats", "").object(e.t)
	for _, c := range st["connectors"].([]any) {
		if m := c.(map[string]any); m["key"] == key {
			return m
		}
	}
	e.t.Fatalf("/stats has no connector %q", key)
	return nil
}

// heldLanes is the "held" list of a /stats entry's only lane set (nil
// when it has none: omitted).
func heldLanes(t *testing.T, c map[string]any) []any {
	t.Helper()
	lanes, ok := c["lanes"].([]any)
	require.True(t, ok, "a sink with ordering = \"key\" has lanes in /stats: %v", c)
	require.Len(t, lanes, 1)
	held, _ := lanes[0].(map[string]any)["held"].([]any)
	return held
}

// GET /stats shows a sink's lanes with ordering = "key": while one key's
// writes fail, that key is held (with its messages, attempts, since and
// the error) and the other keys are written; once the destination takes
// it, it is no longer held. A sink with the default ordering has no
// lanes key.
func TestStatsShowsHeldLanes(t *testing.T) {
	t.Parallel()
	const nKeys, n = 10, 5
	sink := &failingKeySink{failing: "k003", written: map[string]int{}}
	e := lanesEnv(t, sink, nKeys, n)

	eventually(t, "the 9 good keys written and k003 held with its 5 messages", func() bool {
		for k := range nKeys {
			if key := fmt.Sprintf("k%03d", k); key != "k003" && sink.count(key) < n {
				return false
			}
		}
		c := e.statsConnector("keyed")
		ls, ok := c["lanes"].([]any)
		if !ok || len(ls) != 1 {
			return false
		}
		held, _ := ls[0].(map[string]any)["held"].([]any)
		return len(held) == 1 && held[0].(map[string]any)["messages"] == float64(n)
	})
	c := e.statsConnector("keyed")
	require.Equal(t, "running", c["status"], "a held key does not stop the connector")
	lane := c["lanes"].([]any)[0].(map[string]any)
	require.ElementsMatch(t, []string{"stream", "topic", "ordering", "pending", "max_pending", "lanes", "held"}, keys(lane))
	require.Equal(t, "s", lane["stream"])
	require.Equal(t, "t", lane["topic"])
	require.Equal(t, "key", lane["ordering"])
	require.GreaterOrEqual(t, lane["pending"], float64(n), "k003's messages are read and not settled")
	require.Greater(t, lane["max_pending"], float64(0))
	require.GreaterOrEqual(t, lane["lanes"], float64(1))
	held := heldLanes(t, c)
	require.Len(t, held, 1, "only the failing key is held")
	h := held[0].(map[string]any)
	require.ElementsMatch(t, []string{"partition", "key", "messages", "attempts", "since", "error"}, keys(h))
	require.Equal(t, "k003", h["key"])
	require.Equal(t, float64(0), h["partition"])
	require.Equal(t, float64(n), h["messages"])
	require.GreaterOrEqual(t, h["attempts"], float64(1))
	since, err := time.Parse(time.RFC3339Nano, h["since"].(string))
	require.NoError(t, err, "since is a time: %v", h["since"])
	require.WithinDuration(t, time.Now(), since, time.Hour)
	require.Contains(t, h["error"], "refuses key k003")
	require.Zero(t, sink.count("k003"))

	// The default ordering shows no lanes.
	_, has := e.statsConnector("plain")["lanes"]
	require.False(t, has, "a sink with ordering \"partition\" has no lanes in /stats")

	sink.setFailing("")
	eventually(t, "k003 written once the destination takes it, and no longer held", func() bool {
		return sink.count("k003") == n && len(heldLanes(t, e.statsConnector("keyed"))) == 0
	})
	for k := range nKeys {
		require.Equal(t, n, sink.count(fmt.Sprintf("k%03d", k)), "each message written once")
	}
}
