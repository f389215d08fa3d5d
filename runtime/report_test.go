package runtime

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestBenchmarkAndVerboseEvents(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 20, batch: 10}
	e.sinks["out"] = &collectSink{}
	e.connector("numbers", "type = \"source\"\nkey = \"numbers\"\npath = \"seq\"\nbenchmark = true\nverbose = true\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\n")
	e.connector("out", "type = \"sink\"\nkey = \"out\"\npath = \"collect\"\nbenchmark = true\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n")
	var logs syncBuffer
	cfg, err := config.Load(e.dir+"/config.toml", config.WithEnv(config.MapEnv(nil)))
	require.NoError(t, err)
	rt, err := New(cfg, Options{Registry: e.reg, ConfigOptions: []config.Option{config.WithEnv(config.MapEnv(nil))},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, rt.Start(ctx))
	defer rt.Stop(context.Background())
	eventually(t, "20 messages", func() bool { return len(e.sinks["out"].messages()) >= 20 })
	// The sink can consume a batch before its source has saved state and
	// logged it, so both reports are waited for.
	eventually(t, "source and sink benchmark events", func() bool {
		l := logs.String()
		return strings.Contains(l, "connector_type=sink") && strings.Contains(l, "ffi_us=") &&
			strings.Contains(l, "connector_type=source") && strings.Contains(l, "state_save_us=") &&
			strings.Contains(l, `msg="sent batch"`)
	})

	var src, sink, verbose int
	for _, line := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(line, "msg=benchmark") && strings.Contains(line, "connector_type=source"):
			src++
			for _, f := range []string{"stream=s", "topic=t", "batch_size=", "sent_count=", "prepare_us=", "iggy_send_us=", "state_save_us=", "total_us="} {
				require.Contains(t, line, f)
			}
		case strings.Contains(line, "msg=benchmark") && strings.Contains(line, "connector_type=sink"):
			sink++
			for _, f := range []string{"partition_id=0", "current_offset=", "processed_count=", "prepare_us=", "ffi_us=", "total_us="} {
				require.Contains(t, line, f)
			}
		case strings.Contains(line, `msg="sent batch"`):
			verbose++
		case strings.Contains(line, `msg="consumed batch"`):
			t.Errorf("the sink is not verbose, but logged at info: %s", line)
		}
	}
	require.NotZero(t, src)
	require.NotZero(t, sink)
	require.NotZero(t, verbose, "verbose = true logs each batch at info")
}
