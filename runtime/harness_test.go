package runtime

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/stretchr/testify/require"
)

// The test connectors below are real connectors (they implement the
// connector contracts and run in the real runtime against the embedded
// broker); they record what happens to them for the assertions.

// seqSource emits {"n": i} for i in [state, max), `batch` per poll; its
// state is the next n. It records acks and nacks.
type seqSource struct {
	max, batch uint64
	next       uint64
	poison     map[uint64]bool // n that get a non-JSON payload
	mu         sync.Mutex
	acked      []uint64 // last n of each acked batch
	nacks      int
	panicOnce  *sync.Once
}

func (s *seqSource) Open(_ context.Context, st []byte) error {
	if len(st) == 8 {
		s.next = binary.LittleEndian.Uint64(st)
	}
	return nil
}

func (s *seqSource) Poll(ctx context.Context) (*connector.Batch, error) {
	if s.panicOnce != nil {
		s.panicOnce.Do(func() { panic("seq source exploded") })
	}
	if s.next >= s.max {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	b := &connector.Batch{Schema: connector.SchemaJSON}
	for i := uint64(0); i < s.batch && s.next < s.max; i++ {
		p := fmt.Appendf(nil, `{"n":%d}`, s.next)
		if s.poison[s.next] {
			p = fmt.Appendf(nil, `not json %d`, s.next)
		}
		b.Messages = append(b.Messages, connector.Message{Payload: p})
		s.next++
	}
	b.State = binary.LittleEndian.AppendUint64(nil, s.next)
	return b, nil
}

func (s *seqSource) Ack(_ context.Context, b *connector.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked = append(s.acked, binary.LittleEndian.Uint64(b.State)-1)
	return nil
}

func (s *seqSource) Nack(context.Context, *connector.Batch, error) {
	s.mu.Lock()
	s.nacks++
	s.mu.Unlock()
}

func (s *seqSource) Close(context.Context) error { return nil }

// collectSink records what it consumed. failFirst makes the first calls
// fail; poison makes messages whose payload contains it fail permanently.
type collectSink struct {
	failFirst int
	failCall  func(call int) bool // when set, decides which calls fail
	poison    string
	onFail    func(b *connector.SinkBatch) // called on each failed call
	mu        sync.Mutex
	calls     int
	got       []connector.Message
}

func (s *collectSink) Open(context.Context) error { return nil }

func (s *collectSink) Consume(_ context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	s.calls++
	fail := s.calls <= s.failFirst || (s.failCall != nil && s.failCall(s.calls))
	s.mu.Unlock()
	if fail {
		if s.onFail != nil {
			s.onFail(b)
		}
		return fmt.Errorf("sink unavailable (call %d)", s.calls)
	}
	if s.poison != "" {
		bad := connector.MessageErrors{}
		for i, m := range b.Messages {
			if strings.Contains(string(m.Payload), s.poison) {
				bad[i] = connector.Permanent(errors.New("rejected poison record"))
			}
		}
		if len(bad) > 0 {
			s.mu.Lock()
			for i, m := range b.Messages {
				if _, isBad := bad[i]; !isBad {
					s.got = append(s.got, m)
				}
			}
			s.mu.Unlock()
			return bad
		}
	}
	s.mu.Lock()
	s.got = append(s.got, b.Messages...)
	s.mu.Unlock()
	return nil
}

func (s *collectSink) Close(context.Context) error { return nil }

func (s *collectSink) messages() []connector.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]connector.Message(nil), s.got...)
}

// ns returns the "n" of every collected JSON payload.
func (s *collectSink) ns(t *testing.T) []uint64 {
	var out []uint64
	for _, m := range s.messages() {
		var v struct{ N uint64 }
		require.NoError(t, json.Unmarshal(m.Payload, &v), "payload %s", m.Payload)
		out = append(out, v.N)
	}
	return out
}

// env is one test's runtime: a config directory, a registry with the test
// connectors, and the runtime once started.
type env struct {
	t       testing.TB
	dir     string
	reg     *connector.Registry
	sources map[string]*seqSource
	sinks   map[string]*collectSink
	rt      *Runtime
}

// runtimeTOML is the test runtime's config.toml: the embedded broker on a
// free port, state and connectors in the test's directory.
const runtimeTOML = `
[iggy]
address = "embedded"
embedded_address = "127.0.0.1:0"
[state]
path = "state"
[connectors]
config_type = "local"
config_dir = "connectors"
[http]
enabled = false
`

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), reg: connector.NewRegistry(),
		sources: map[string]*seqSource{}, sinks: map[string]*collectSink{}}
	require.NoError(t, os.MkdirAll(filepath.Join(e.dir, "connectors"), 0o755))
	e.write("config.toml", runtimeTOML)
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSource, Name: "seq",
		NewSource: func(c connector.Config) (connector.Source, error) {
			s, ok := e.sources[c.Key]
			if !ok {
				return nil, fmt.Errorf("no test source for key %q", c.Key)
			}
			return s, nil
		}}))
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "collect",
		NewSink: func(c connector.Config) (connector.Sink, error) {
			s, ok := e.sinks[c.Key]
			if !ok {
				return nil, fmt.Errorf("no test sink for key %q", c.Key)
			}
			return s, nil
		}}))
	return e
}

func (e *env) write(name, content string) {
	e.t.Helper()
	require.NoError(e.t, os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644))
}

func (e *env) connector(key, content string) {
	e.write(filepath.Join("connectors", key+".toml"), content)
}

func (e *env) start() *Runtime {
	e.t.Helper()
	cfg, err := config.Load(filepath.Join(e.dir, "config.toml"), config.WithEnv(config.MapEnv(nil)))
	require.NoError(e.t, err)
	rt, err := New(cfg, Options{Registry: e.reg, ConfigOptions: []config.Option{config.WithEnv(config.MapEnv(nil))}})
	require.NoError(e.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(e.t, rt.Start(ctx))
	e.rt = rt
	e.t.Cleanup(func() { _ = rt.Stop(context.Background()) })
	return rt
}

// eventually polls cond until it holds; it fails the test after a generous
// deadline (a liveness bound, not a timing assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
