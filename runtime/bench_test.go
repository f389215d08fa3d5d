package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
)

// fixedSource emits pre-generated 200-byte JSON records in batches until
// it has produced total.
type fixedSource struct {
	batch    []connector.Message
	total    int64
	produced int64
}

func (s *fixedSource) Open(context.Context, []byte) error { return nil }
func (s *fixedSource) Close(context.Context) error        { return nil }
func (s *fixedSource) Poll(ctx context.Context) (*connector.Batch, error) {
	if s.produced >= s.total {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	n := min(int64(len(s.batch)), s.total-s.produced)
	s.produced += n
	return &connector.Batch{Schema: connector.SchemaJSON, Messages: s.batch[:n]}, nil
}

// countSink counts messages and closes done at want.
type countSink struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (s *countSink) Open(context.Context) error  { return nil }
func (s *countSink) Close(context.Context) error { return nil }
func (s *countSink) Consume(_ context.Context, b *connector.SinkBatch) error {
	if s.n.Add(int64(len(b.Messages))) >= s.want {
		select {
		case <-s.done:
		default:
			close(s.done)
		}
	}
	return nil
}

func record200(i int) []byte {
	p := fmt.Appendf(nil, `{"id":%d,"title":"Hello","name":"World","text":"`, i)
	for len(p) < 198 {
		p = append(p, 'x')
	}
	return append(p, '"', '}')
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPipeline measures a whole pipeline: a source of pre-generated
// 200-byte JSON records → the embedded broker (file-backed) → 1, 2 or 4
// counting sinks (each its own connector and consumer group), in one
// process. It reports messages/s and CPU µs per message; the cost of each
// extra sink on a topic is the difference between sinks=N and sinks=1
// over N-1:
//
//	go test -run '^$' -bench 'BenchmarkPipeline' -benchtime 1000000x ./runtime/
func BenchmarkPipeline(b *testing.B) {
	for _, sinks := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("sinks=%d", sinks), func(b *testing.B) { benchPipeline(b, sinks) })
	}
}

func benchPipeline(b *testing.B, sinks int) {
	dir := b.TempDir()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "config.toml"), []byte("[iggy]\naddress = \"embedded\"\nembedded_address = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n[connectors]\nconfig_dir = \"connectors\"\n[http]\nenabled = false\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "connectors/src.toml"), []byte("type = \"source\"\nkey = \"src\"\npath = \"fixed\"\n[[streams]]\nstream = \"bench\"\ntopic = \"t\"\nbatch_length = 1000\n"), 0o644))
	for i := range sinks {
		must(os.WriteFile(filepath.Join(dir, fmt.Sprintf("connectors/dst%d.toml", i)), []byte(fmt.Sprintf("type = \"sink\"\nkey = \"dst%d\"\npath = \"count%d\"\n[[streams]]\nstream = \"bench\"\ntopics = [\"t\"]\nbatch_length = 1000\npoll_interval = \"1ms\"\n", i, i)), 0o644))
	}

	batch := make([]connector.Message, 1000)
	for i := range batch {
		batch[i].Payload = record200(i)
	}
	src := &fixedSource{batch: batch, total: int64(b.N)}
	reg := connector.NewRegistry()
	must(reg.Register(connector.Info{Kind: connector.KindSource, Name: "fixed",
		NewSource: func(connector.Config) (connector.Source, error) { return src, nil }}))
	counts := make([]*countSink, sinks)
	for i := range counts {
		sink := &countSink{want: int64(b.N), done: make(chan struct{})}
		counts[i] = sink
		must(reg.Register(connector.Info{Kind: connector.KindSink, Name: fmt.Sprintf("count%d", i),
			NewSink: func(connector.Config) (connector.Sink, error) { return sink, nil }}))
	}
	cfg, err := config.Load(filepath.Join(dir, "config.toml"), config.WithEnv(config.MapEnv(nil)))
	must(err)
	rt, err := New(cfg, Options{Registry: reg, ConfigOptions: []config.Option{config.WithEnv(config.MapEnv(nil))}})
	must(err)

	b.SetBytes(200)
	b.ReportAllocs()
	cpu0 := cpuTime()
	start := time.Now()
	b.ResetTimer()
	must(rt.Start(context.Background()))
	for _, s := range counts {
		<-s.done
	}
	b.StopTimer()
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	must(rt.Stop(context.Background()))
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
}
