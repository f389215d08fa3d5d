package runtime

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
)

// pacedSource emits {"n": i} from its state on, five every 10 ms; its
// state is the next n.
type pacedSource struct{ next uint64 }

func (s *pacedSource) Open(_ context.Context, st []byte) error {
	if len(st) == 8 {
		s.next = binary.LittleEndian.Uint64(st)
	}
	return nil
}

func (s *pacedSource) Poll(ctx context.Context) (*connector.Batch, error) {
	select {
	case <-time.After(10 * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	b := &connector.Batch{Schema: connector.SchemaJSON}
	for range 5 {
		b.Messages = append(b.Messages, connector.Message{Payload: fmt.Appendf(nil, `{"n":%d}`, s.next)})
		s.next++
	}
	b.State = binary.LittleEndian.AppendUint64(nil, s.next)
	return b, nil
}

func (s *pacedSource) Ack(context.Context, *connector.Batch) error   { return nil }
func (s *pacedSource) Nack(context.Context, *connector.Batch, error) {}
func (s *pacedSource) Close(context.Context) error                   { return nil }

// writeScaleOutConfig writes, in dir, a config.toml of a runtime on the
// Iggy server addr with state in Iggy and [scale_out] at these timings,
// and one source "numbers" of connector path source into s/t.
func writeScaleOutConfig(t *testing.T, dir, addr, renew, hold, takeover, source string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.toml"), fmt.Appendf(nil, `
[iggy]
address = %q
create_missing = true
[state]
path = "state"
storage = "iggy"
[scale_out]
enabled = true
renew_interval = %q
hold_timeout = %q
takeover_delay = %q
[connectors]
config_type = "local"
config_dir = "connectors"
[http]
enabled = false
`, addr, renew, hold, takeover), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "connectors", "numbers.toml"),
		fmt.Appendf(nil, "type = \"source\"\nkey = \"numbers\"\npath = %q\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n", source), 0o644))
}

// Two runtimes of one configuration ([scale_out], state in Iggy) against
// one Iggy server: the source runs in one of them while the other stands
// by; when the holder stops, the other takes the source over and goes on
// from the state the first saved, so the topic holds every n in order,
// none lost (repeats only of what was in flight at the handover).
func TestScaleOutSourceRunsInOneRuntimeAndMoves(t *testing.T) {
	b := brokertest.Start(t)
	start := func() (*Runtime, string) {
		dir := t.TempDir()
		writeScaleOutConfig(t, dir, b.Addr(), "50ms", "300ms", "600ms", "paced")
		reg := connector.NewRegistry()
		require.NoError(t, reg.Register(connector.Info{Kind: connector.KindSource, Name: "paced",
			NewSource: func(connector.Config) (connector.Source, error) { return &pacedSource{}, nil }}))
		noEnv := config.WithEnv(config.MapEnv(nil))
		cfg, err := config.Load(filepath.Join(dir, "config.toml"), noEnv)
		require.NoError(t, err)
		rt, err := New(cfg, Options{Registry: reg, ConfigOptions: []config.Option{noEnv}})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, rt.Start(ctx))
		t.Cleanup(func() { _ = rt.Stop(context.Background()) })
		return rt, dir
	}
	status := func(rt *Runtime) Status {
		i, err := rt.Connector(connector.KindSource, "numbers")
		require.NoError(t, err)
		return i.Status
	}
	a, _ := start()
	eventually(t, "the first runtime runs the source", func() bool { return status(a) == StatusRunning })
	bb, _ := start()
	eventually(t, "the second stands by", func() bool { return status(bb) == StatusStandby })

	cl, err := iggy.Dial(context.Background(), b.Addr(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer cl.Close()
	read := func() []uint64 {
		var out []uint64
		for {
			r, err := cl.PollMessages(context.Background(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
				Stream: iggy.NamedID("s"), Topic: iggy.NamedID("t"), Partition: iggy.Partition(0),
				Strategy: iggy.AtOffset(uint64(len(out))), Count: 1000})
			require.NoError(t, err)
			if len(r.Messages) == 0 {
				return out
			}
			for _, m := range r.Messages {
				var v struct{ N uint64 }
				require.NoError(t, json.Unmarshal(m.Payload, &v))
				out = append(out, v.N)
			}
		}
	}
	eventually(t, "some messages from the first", func() bool { return len(read()) >= 50 })
	require.Equal(t, StatusStandby, status(bb), "one runtime at a time")

	require.NoError(t, a.Stop(context.Background()))
	before := len(read())
	eventually(t, "the second runtime took the source over", func() bool { return status(bb) == StatusRunning })
	eventually(t, "and goes on", func() bool { return len(read()) >= before+50 })

	got := read()
	// In order from 0, each n once: the second resumed exactly at the
	// first's saved state (a graceful stop leaves nothing in flight).
	for i, n := range got {
		require.Equal(t, uint64(i), n, "message %d", i)
	}
}
