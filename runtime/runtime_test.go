package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

const seqSourceTOML = `
type = "source"
key = "%s"
path = "seq"
[[streams]]
stream = "s"
topic = "t"
batch_length = 10
`

func TestSourceToSinkWithTransforms(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 50, batch: 7}
	e.sinks["out"] = &collectSink{}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("out", `
type = "sink"
key = "out"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
[transforms.add_fields]
enabled = true
[[transforms.add_fields.fields]]
key = "via"
value.static = "ferry"
`)
	rt := e.start()
	sink := e.sinks["out"]
	eventually(t, "50 messages at the sink", func() bool { return len(sink.messages()) >= 50 })
	require.Equal(t, seqRange(0, 50), sink.ns(t))
	for _, m := range sink.messages() {
		var v map[string]any
		require.NoError(t, json.Unmarshal(m.Payload, &v))
		require.Equal(t, "ferry", v["via"])
		require.Equal(t, "s", m.Stream)
		require.Equal(t, "t", m.Topic)
	}
	// The source acknowledges a batch after it is in Iggy and its state
	// saved: the sink may have read it before that.
	src := e.sources["numbers"]
	eventually(t, "the last batch acknowledged", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return len(src.acked) > 0 && src.acked[len(src.acked)-1] == 49
	})
	for _, kind := range []connector.Kind{connector.KindSource, connector.KindSink} {
		for _, info := range rt.Connectors(kind) {
			require.Equal(t, StatusRunning, info.Status, "%s %s: %s", kind, info.Key, info.LastError)
		}
	}
}

func TestEveryConfiguredStreamReceivesEachBatch(t *testing.T) {
	e := newEnv(t)
	e.sources["fan"] = &seqSource{max: 30, batch: 4}
	e.sinks["a"], e.sinks["b"] = &collectSink{}, &collectSink{}
	e.connector("fan", `
type = "source"
key = "fan"
path = "seq"
[[streams]]
stream = "one"
topic = "first"
[[streams]]
stream = "two"
topic = "second"
`)
	e.connector("a", "type = \"sink\"\nkey = \"a\"\npath = \"collect\"\n[[streams]]\nstream = \"one\"\ntopics = [\"first\"]\n")
	e.connector("b", "type = \"sink\"\nkey = \"b\"\npath = \"collect\"\n[[streams]]\nstream = \"two\"\ntopics = [\"second\"]\n")
	e.start()
	eventually(t, "both streams got every message", func() bool {
		return len(e.sinks["a"].messages()) >= 30 && len(e.sinks["b"].messages()) >= 30
	})
	require.Equal(t, seqRange(0, 30), e.sinks["a"].ns(t))
	require.Equal(t, seqRange(0, 30), e.sinks["b"].ns(t))
}

func TestFailingSinkIsRetriedAndOffsetsNeverRunAhead(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 40, batch: 10}
	var offsetErrs []string
	var mu sync.Mutex
	sink := &collectSink{failFirst: 4}
	e.sinks["flaky"] = sink
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("flaky", `
type = "sink"
key = "flaky"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
consumer_group = "flaky-group"
max_retries = 10
retry_backoff = "10ms"
`)
	rt := e.start()
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	// While the sink is failing a batch, the group's stored offset must be
	// below that batch's first offset.
	sink.onFail = func(b *connector.SinkBatch) {
		off, err := admin.GetConsumerOffset(context.Background(), iggy.ConsumerGroup(iggy.NamedID("flaky-group")),
			iggy.NamedID("s"), iggy.NamedID("t"), iggy.Partition(b.Partition))
		mu.Lock()
		defer mu.Unlock()
		if err == nil && off != nil && off.StoredOffset >= b.Messages[0].Offset {
			offsetErrs = append(offsetErrs, "offset committed ahead of a failing batch")
		}
	}
	eventually(t, "all 40 delivered after retries", func() bool { return len(sink.messages()) >= 40 })
	require.Equal(t, seqRange(0, 40), sink.ns(t))
	mu.Lock()
	require.Empty(t, offsetErrs)
	mu.Unlock()
	sink.mu.Lock()
	require.GreaterOrEqual(t, sink.calls, 5)
	sink.mu.Unlock()
}

func TestPoisonMessageGoesToDeadLetterTopic(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 20, batch: 5, poison: map[uint64]bool{7: true}}
	sink := &collectSink{poison: `"n":13}`}
	e.sinks["picky"] = sink
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("picky", `
type = "sink"
key = "picky"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
max_retries = 2
retry_backoff = "5ms"
on_error = "dead_letter"
dead_letter_topic = "dlq"
`)
	rt := e.start()
	eventually(t, "18 good messages", func() bool { return len(sink.messages()) >= 18 })
	want := seqRange(0, 20)
	want = append(want[:7], want[8:]...)
	want = append(want[:12], want[13:]...)
	require.Equal(t, want, sink.ns(t), "everything but the two poison messages flows")

	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var dead []iggy.Message
	eventually(t, "two dead letters", func() bool {
		reply, err := admin.PollMessages(context.Background(), iggy.PollRequest{
			Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("s"), Topic: iggy.NamedID("dlq"),
			Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10,
		})
		if err != nil {
			return false
		}
		dead = reply.Messages
		return len(dead) == 2
	})
	offsets := map[string]string{}
	for _, m := range dead {
		h := m.Headers
		get := func(k string) string { v, ok := wire.Lookup(h, k); require.True(t, ok, k); return v.String() }
		require.Equal(t, "s", get(HeaderDLQStream))
		require.Equal(t, "t", get(HeaderDLQTopic))
		require.Equal(t, "0", get(HeaderDLQPartition))
		require.Equal(t, "picky", get(HeaderDLQConnector))
		offsets[get(HeaderDLQOffset)] = get(HeaderDLQError)
	}
	require.Contains(t, offsets["7"], "not valid JSON")
	require.Contains(t, offsets["13"], "rejected poison record")
	require.Equal(t, "not json 7", string(dead[0].Payload), "the original payload is kept")
}

// A sink that cannot write anything is failing as a whole: status Error,
// nothing committed, and it restarts with backoff (no dead letters).
func TestSinkThatIsDownCommitsNothing(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 5, batch: 5}
	e.sinks["down"] = &collectSink{failFirst: 1 << 30}
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("down", `
type = "sink"
key = "down"
path = "collect"
[[streams]]
stream = "s"
topics = ["t"]
consumer_group = "down-group"
max_retries = 1
retry_backoff = "5ms"
`)
	rt := e.start()
	eventually(t, "sink in Error", func() bool {
		i, _ := rt.Connector(connector.KindSink, "down")
		return i.Status == StatusError
	})
	i, err := rt.Connector(connector.KindSink, "down")
	require.NoError(t, err)
	require.Contains(t, i.LastError, "sink unavailable")
	require.Contains(t, i.LastError, "offset not committed")
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.GetConsumerOffset(context.Background(), iggy.ConsumerGroup(iggy.NamedID("down-group")),
		iggy.NamedID("s"), iggy.NamedID("t"), iggy.Partition(0))
	require.ErrorIs(t, err, iggy.ErrConsumerOffsetNotFound, "nothing was committed")
	src, _ := rt.Connector(connector.KindSource, "numbers")
	require.Equal(t, StatusRunning, src.Status, "the source is not affected")
}

func TestPanickingConnectorIsIsolatedAndRestarts(t *testing.T) {
	e := newEnv(t)
	e.sources["boom"] = &seqSource{max: 10, batch: 10, panicOnce: &sync.Once{}}
	e.sources["calm"] = &seqSource{max: 10, batch: 5}
	e.sinks["calm-out"] = &collectSink{}
	e.connector("boom", `
type = "source"
key = "boom"
path = "seq"
[[streams]]
stream = "boom"
topic = "t"
`)
	e.connector("calm", strings.Replace(strings.Replace(seqSourceTOML, "%s", "calm", 1), `stream = "s"`, `stream = "calm"`, 1))
	e.connector("calm-out", "type = \"sink\"\nkey = \"calm-out\"\npath = \"collect\"\n[[streams]]\nstream = \"calm\"\ntopics = [\"t\"]\n")
	rt := e.start()
	eventually(t, "boom in Error", func() bool {
		i, _ := rt.Connector(connector.KindSource, "boom")
		return i.Status == StatusError
	})
	i, _ := rt.Connector(connector.KindSource, "boom")
	require.Contains(t, i.LastError, "seq source exploded")
	eventually(t, "the calm pipeline delivers", func() bool { return len(e.sinks["calm-out"].messages()) >= 10 })

	require.NoError(t, rt.Restart(context.Background(), connector.KindSource, "boom"))
	eventually(t, "boom running after restart", func() bool {
		i, _ := rt.Connector(connector.KindSource, "boom")
		return i.Status == StatusRunning
	})
}

// gateSink blocks each Consume until the test opens the gate.
type gateSink struct {
	collectSink
	entered chan struct{}
	gate    chan struct{}
}

func (g *gateSink) Consume(ctx context.Context, b *connector.SinkBatch) error {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.gate
	return g.collectSink.Consume(ctx, b)
}

func TestGracefulStopFinishesTheBatchInFlight(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 10, batch: 10}
	gs := &gateSink{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "gate",
		NewSink: func(connector.Config) (connector.Sink, error) { return gs, nil }}))
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("slow", "type = \"sink\"\nkey = \"slow\"\npath = \"gate\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nconsumer_group = \"slow-group\"\n")
	rt := e.start()
	addr := rt.IggyAddress()
	<-gs.entered // a batch is inside Consume

	stopped := make(chan error, 1)
	go func() { stopped <- rt.Stop(context.Background()) }()
	eventually(t, "the sink is stopping", func() bool {
		i, _ := rt.Connector(connector.KindSink, "slow")
		return i.Status == StatusStopping
	})
	close(gs.gate) // the batch in flight completes during the stop
	require.NoError(t, <-stopped)
	require.Len(t, gs.messages(), 10)
	i, _ := rt.Connector(connector.KindSink, "slow")
	require.Equal(t, StatusStopped, i.Status)

	// The runtime's embedded broker is closed now; restart the runtime on
	// the same state and check the offset was committed before the stop.
	e2 := &env{t: t, dir: e.dir, reg: e.reg, sources: e.sources, sinks: e.sinks}
	rt2 := e2.start()
	require.NotEqual(t, "", addr)
	admin, err := iggy.Dial(context.Background(), rt2.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	off, err := admin.GetConsumerOffset(context.Background(), iggy.ConsumerGroup(iggy.NamedID("slow-group")),
		iggy.NamedID("s"), iggy.NamedID("t"), iggy.Partition(0))
	require.NoError(t, err)
	require.Equal(t, uint64(9), off.StoredOffset, "the drained batch was committed")
}

// mixedSink fails n%5 == 0 permanently and n%5 == 1 once, transiently.
type mixedSink struct {
	collectSink
	tries map[uint64]int
}

func (s *mixedSink) Consume(_ context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	bad := connector.MessageErrors{}
	for i, m := range b.Messages {
		var v struct{ N uint64 }
		if err := json.Unmarshal(m.Payload, &v); err != nil {
			return err
		}
		s.tries[v.N]++
		switch {
		case v.N%5 == 0:
			bad[i] = connector.Permanent(errors.New("rejected for good"))
		case v.N%5 == 1 && s.tries[v.N] == 1:
			bad[i] = errors.New("try again")
		default:
			s.got = append(s.got, m)
		}
	}
	if len(bad) > 0 {
		return bad
	}
	return nil
}

func TestPermanentEntriesAreNotRetried(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 20, batch: 20}
	sink := &mixedSink{tries: map[uint64]int{}}
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "mixed",
		NewSink: func(connector.Config) (connector.Sink, error) { return sink, nil }}))
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("mixed", "type = \"sink\"\nkey = \"mixed\"\npath = \"mixed\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nbatch_length = 20\nmax_retries = 3\nretry_backoff = \"5ms\"\non_error = \"dead_letter\"\n")
	rt := e.start()
	eventually(t, "16 written", func() bool { return len(sink.messages()) >= 16 })
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	eventually(t, "4 dead letters", func() bool {
		reply, err := admin.PollMessages(context.Background(), iggy.PollRequest{
			Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("s"), Topic: iggy.NamedID("mixed_dead_letter"),
			Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10,
		})
		return err == nil && len(reply.Messages) == 4
	})
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for n := uint64(0); n < 20; n++ {
		want := 1
		if n%5 == 1 {
			want = 2 // retried once after its transient failure
		}
		require.Equal(t, want, sink.tries[n], "message %d was tried %d times", n, sink.tries[n])
	}
}

// While a later batch fails, the group's stored offset is exactly the last
// offset of the batch before it: committed after success, never ahead.
func TestOffsetStaysAtTheLastWrittenBatchWhileTheSinkFails(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 30, batch: 10}
	sink := &collectSink{failCall: func(call int) bool { return call >= 2 && call <= 4 }}
	e.sinks["flaky"] = sink
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("flaky", "type = \"sink\"\nkey = \"flaky\"\npath = \"collect\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nconsumer_group = \"g\"\nbatch_length = 10\nmax_retries = 5\nretry_backoff = \"5ms\"\n")
	rt := e.start()
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var stored []uint64
	var firstFailed []uint64
	var mu sync.Mutex
	sink.onFail = func(b *connector.SinkBatch) {
		off, err := admin.GetConsumerOffset(context.Background(), iggy.ConsumerGroup(iggy.NamedID("g")),
			iggy.NamedID("s"), iggy.NamedID("t"), iggy.Partition(b.Partition))
		require.NoError(t, err, "the first batch was committed before the second was tried")
		mu.Lock()
		stored = append(stored, off.StoredOffset)
		firstFailed = append(firstFailed, b.Messages[0].Offset)
		mu.Unlock()
	}
	eventually(t, "all 30 delivered", func() bool { return len(sink.messages()) >= 30 })
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, stored, 3)
	for i := range stored {
		require.Equal(t, firstFailed[i]-1, stored[i], "stored offset while a batch from %d fails", firstFailed[i])
	}
}

// With on_error = "stop", a poison message stops the sink for good: status
// Error with the message's offset, no automatic restart, the batch not
// committed (its other messages are delivered again after a restart).
func TestStopPolicyStopsOnAPoisonMessage(t *testing.T) {
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: 10, batch: 10, poison: map[uint64]bool{4: true}}
	sink := &collectSink{}
	e.sinks["strict"] = sink
	e.connector("numbers", strings.Replace(seqSourceTOML, "%s", "numbers", 1))
	e.connector("strict", "type = \"sink\"\nkey = \"strict\"\npath = \"collect\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\nconsumer_group = \"strict-group\"\non_error = \"stop\"\n")
	rt := e.start()
	eventually(t, "sink in Error", func() bool {
		i, _ := rt.Connector(connector.KindSink, "strict")
		return i.Status == StatusError
	})
	i, _ := rt.Connector(connector.KindSink, "strict")
	require.Contains(t, i.LastError, "offset 4")
	require.Contains(t, i.LastError, "on_error = \"stop\"")
	require.Zero(t, i.Restarts, "a stopped sink is not restarted automatically")
}
