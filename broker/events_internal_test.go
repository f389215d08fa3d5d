package broker

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/storage"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func noData() (string, any) { return "x", struct{}{} }

// A full queue drops (and counts) instead of waiting; so does the
// offsets table at its cap.
func TestEventsFullQueueDrops(t *testing.T) {
	t.Parallel()
	e := newEventPub(&Broker{start: time.Now()}, Events{Enabled: true, QueueSize: 2}.withDefaults())
	for range 10 {
		e.emit(pendingEvent{typ: sysevents.StreamCreated, build: noData}) // nobody drains: must not block
	}
	require.Len(t, e.q, 2)
	require.Equal(t, 8.0, counterValue(e.dropped.WithLabelValues(dropQueueFull)))

	e.maxOffs = 2
	p := &partition{id: 0, topic: &topic{uid: 1, stream: &stream{id: 1}}}
	for i := range uint32(3) {
		e.offsetStored(p, nil, offsetKey{wire.ConsumerSingle, i}, 5)
	}
	e.offsetStored(p, nil, offsetKey{wire.ConsumerSingle, 0}, 6) // coalesced into its entry
	require.Len(t, e.offs, 2)
	require.Equal(t, 2, e.offs[offKey{p, wire.ConsumerSingle, 0}].stores)
	require.Equal(t, uint64(6), e.offs[offKey{p, wire.ConsumerSingle, 0}].offset)
	require.Equal(t, 1.0, counterValue(e.dropped.WithLabelValues(dropOffsetsFull)))
}

// A publisher that cannot append (here: stuck on the partition lock, as
// on a disk that hangs) never stalls the broker: every create_stream is
// answered, the events beyond the queue are dropped and counted, and the
// rest are published once the publisher moves again.
func TestEventsStalledPublisherDoesNotBlockTheBroker(t *testing.T) {
	t.Parallel()
	b, c := startInternal(t, Config{Events: Events{Enabled: true, QueueSize: 4}})
	p := b.events.partitionFor(sysevents.StreamCreated)
	require.NotNil(t, p)
	p.mu.Lock()
	const n = 200
	for i := range n {
		mustOK(t, c, wire.CmdCreateStream, wire.Marshal(&wire.CreateStream{Name: "s" + strconv.Itoa(i)}))
	}
	p.mu.Unlock()
	dropped := func() float64 { return counterValue(b.events.dropped.WithLabelValues(dropQueueFull)) }
	published := func() float64 {
		return counterValue(b.events.published.WithLabelValues(string(sysevents.StreamCreated)))
	}
	deadline := time.Now().Add(time.Minute)
	for dropped()+published() < n {
		require.True(t, time.Now().Before(deadline), "dropped %v + published %v of %d", dropped(), published(), n)
		time.Sleep(10 * time.Millisecond)
	}
	require.Positive(t, dropped(), "a queue of 4 behind a stuck publisher drops")
	require.Positive(t, published())
	require.Equal(t, float64(n), dropped()+published(), "each event is published or counted as dropped")
	require.Equal(t, uint64(published()), p.log.NextOffset())
}

func TestEventsConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ev   Events
		want string
	}{
		{Events{Enabled: true, MaxTopicSize: 1000}, "below the system topics' segment size"},
		{Events{Enabled: true, MessageExpiry: -time.Second}, "must not be negative"},
		{Events{Enabled: true, QueueSize: -1}, "must not be negative"},
	} {
		err := Config{Events: tc.ev}.withDefaults().validate()
		require.ErrorContains(t, err, tc.want, "%+v", tc.ev)
	}
	require.NoError(t, Config{Events: Events{MaxTopicSize: 1}}.withDefaults().validate(), "not checked while off")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEventsPublish measures the event path end to end: an event
// point emits a segment.deleted-sized event and the publisher builds,
// encodes and appends it (memory and file logs). msgs/s counts events
// appended; cpu-µs/msg is the process's CPU (all goroutines) per event.
func BenchmarkEventsPublish(b *testing.B) {
	for _, mode := range []string{"memory", "file"} {
		b.Run(mode, func(b *testing.B) {
			cfg := Config{Events: Events{Enabled: true, QueueSize: 1 << 16}}
			if mode == "file" {
				cfg.DataDir = b.TempDir()
			}
			br, _ := startInternal(b, cfg)
			p := &partition{id: 0, topic: &topic{uid: 99, name: "t", stream: &stream{id: 5, name: "s"}}}
			published := br.events.published.WithLabelValues(string(sysevents.SegmentDeleted))
			before := counterValue(published)
			segs := make([]storage.SegmentInfo, 1)
			cpu := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				segs[0] = storage.SegmentInfo{BaseOffset: uint64(i) * 100, NextOffset: uint64(i)*100 + 100, Messages: 100, SizeBytes: 1 << 20}
				br.events.segmentsDeleted(p, segs, sysevents.ReasonExpiry)
				for i%1000 == 999 && len(br.events.q) > 1<<15 { // stay below the queue's size
					time.Sleep(time.Millisecond)
				}
			}
			for counterValue(published)-before < float64(b.N) {
				if dropped := counterValue(br.events.dropped.WithLabelValues(dropQueueFull)); dropped > 0 {
					b.Fatalf("%v events dropped", dropped)
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-µs/msg")
		})
	}
}
