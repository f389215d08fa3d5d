package runtime

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/stretchr/testify/require"
)

// A sink that has read everything is woken by the embedded broker's next
// append: with a poll interval of an hour, the second message could only
// arrive through the wake.
func TestCaughtUpSinkIsWokenByTheNextAppend(t *testing.T) {
	e := newEnv(t)
	fillKeys(t, e, 1, 1)
	sink := &keyedSink{got: map[string][]int{}}
	e.registerKeyedSink(sink)
	e.connector("out", `
type = "sink"
key = "out"
path = "keyed"
[[streams]]
stream = "s"
topics = ["t"]
poll_interval = "1h"
`)
	rt := e.start()
	eventually(t, "the first message", func() bool { return len(sink.snapshot()["k000"]) == 1 })
	ctx := context.Background()
	admin, err := iggy.Dial(ctx, rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0),
		[]iggy.Message{{Payload: []byte(`{"k":"k000","i":1}`)}})
	require.NoError(t, err)
	eventually(t, "the second message, woken by its append", func() bool { return len(sink.snapshot()["k000"]) == 2 })
}

// clockSource emits one message per poll carrying the time it was made,
// pausing between polls so the sink is caught up each time.
type clockSource struct {
	pause time.Duration
	left  int
}

func (s *clockSource) Open(context.Context, []byte) error { return nil }
func (s *clockSource) Close(context.Context) error        { return nil }
func (s *clockSource) Poll(ctx context.Context) (*connector.Batch, error) {
	if s.left <= 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	select {
	case <-time.After(s.pause):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.left--
	return &connector.Batch{Schema: connector.SchemaText,
		Messages: []connector.Message{{Payload: strconv.AppendInt(nil, time.Now().UnixNano(), 10)}}}, nil
}

// latencySink records, for each message, the time from its making to
// its Consume.
type latencySink struct {
	mu   sync.Mutex
	lat  []time.Duration
	want int
	done chan struct{}
}

func (s *latencySink) Open(context.Context) error  { return nil }
func (s *latencySink) Close(context.Context) error { return nil }
func (s *latencySink) Consume(_ context.Context, b *connector.SinkBatch) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range b.Messages {
		ns, err := strconv.ParseInt(string(m.Payload), 10, 64)
		if err != nil {
			return connector.Permanent(err)
		}
		s.lat = append(s.lat, now.Sub(time.Unix(0, ns)))
		if len(s.lat) == s.want {
			close(s.done)
		}
	}
	return nil
}

// BenchmarkSelfConsumptionLatency measures source poll → sink Consume
// through the embedded broker, with the append wake and without it
// (polling every poll_interval, 5ms by default): p50 and p99 in µs.
//
//	go test -run '^$' -bench SelfConsumptionLatency -benchtime 500x ./runtime/
func BenchmarkSelfConsumptionLatency(b *testing.B) {
	for _, wake := range []bool{true, false} {
		b.Run(fmt.Sprintf("wake=%v", wake), func(b *testing.B) {
			appendWake = wake
			defer func() { appendWake = true }()
			e := newEnv(b)
			src := &clockSource{pause: 2 * time.Millisecond, left: b.N}
			sink := &latencySink{want: b.N, done: make(chan struct{})}
			require.NoError(b, e.reg.Register(connector.Info{Kind: connector.KindSource, Name: "clock",
				NewSource: func(connector.Config) (connector.Source, error) { return src, nil }}))
			require.NoError(b, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "latency",
				NewSink: func(connector.Config) (connector.Sink, error) { return sink, nil }}))
			e.connector("clock", "type = \"source\"\nkey = \"clock\"\npath = \"clock\"\n[[streams]]\nstream = \"s\"\ntopic = \"t\"\nschema = \"text\"\nlinger_time = \"0s\"\n")
			e.connector("latency", "type = \"sink\"\nkey = \"latency\"\npath = \"latency\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nschema = \"text\"\n")
			b.ResetTimer()
			e.start()
			<-sink.done
			b.StopTimer()
			sink.mu.Lock()
			lat := slices.Clone(sink.lat)
			sink.mu.Unlock()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkIdleSinks measures what five sinks on an empty topic cost the
// whole process (broker included) over a second of idling, in percent of
// one core, with the append wake (an empty round sleeps until the next
// append, or WakeFallback) and without it (a poll every poll_interval,
// 5ms by default).
//
//	go test -run '^$' -bench IdleSinks -benchtime 3x ./runtime/
func BenchmarkIdleSinks(b *testing.B) {
	for _, wake := range []bool{true, false} {
		b.Run(fmt.Sprintf("wake=%v", wake), func(b *testing.B) {
			appendWake = wake
			defer func() { appendWake = true }()
			e := newEnv(b)
			fillKeys(b, e, 1, 1)
			sink := &keyedSink{got: map[string][]int{}}
			e.registerKeyedSink(sink)
			for i := range 5 {
				e.connector(fmt.Sprintf("idle%d", i), fmt.Sprintf("type = \"sink\"\nkey = \"idle%d\"\npath = \"keyed\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n", i))
			}
			e.start()
			for len(sink.snapshot()["k000"]) < 5 { // each read the one message: now idle
				time.Sleep(10 * time.Millisecond)
			}
			var idle time.Duration
			b.ResetTimer()
			for b.Loop() {
				cpu := cpuTime()
				time.Sleep(time.Second)
				idle += cpuTime() - cpu
			}
			b.ReportMetric(100*idle.Seconds()/float64(b.N), "%core")
		})
	}
}
