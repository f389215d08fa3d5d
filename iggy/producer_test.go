package iggy_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
)

// sendLog records the message count and partition of every send the
// broker receives.
type sendLog struct {
	mu      sync.Mutex
	batches []string // "partition:count"
	counts  []int
}

func watchSends(t *testing.T, b *broker.Broker) *sendLog {
	l := &sendLog{}
	t.Cleanup(b.Control(wire.CmdSendMessages, func(r broker.Request) broker.Action {
		var req wire.SendMessages
		require.NoError(t, wire.Unmarshal(r.Body, &req))
		l.mu.Lock()
		l.batches = append(l.batches, fmt.Sprintf("%d:%d", req.Partitioning.PartitionID, req.Count))
		l.counts = append(l.counts, int(req.Count))
		l.mu.Unlock()
		return broker.Action{}
	}))
	return l
}

func (l *sendLog) get() ([]int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.counts...), append([]string(nil), l.batches...)
}

func newProducer(t *testing.T, c *iggy.Client, s, tp iggy.Identifier, opts ...iggy.ProducerOption) *iggy.Producer {
	t.Helper()
	p, err := iggy.NewProducer(c, s, tp, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func pollAll(t *testing.T, c *iggy.Client, s, tp iggy.Identifier, partition uint32) []iggy.Message {
	t.Helper()
	r, err := c.PollMessages(testCtx(t), iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(99)), Stream: s, Topic: tp,
		Partition: iggy.Partition(partition), Strategy: iggy.First(), Count: 100_000,
	})
	require.NoError(t, err)
	return r.Messages
}

func TestProducerBatchesByLength(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	log := watchSends(t, b)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)
	p := newProducer(t, c, s, tp, iggy.WithBatchLength(10), iggy.WithLinger(time.Hour))

	var acks []*iggy.Ack
	for i := range 25 {
		acks = append(acks, p.Send(ctx, iggy.Message{Payload: fmt.Appendf(nil, "m-%d", i)}))
	}
	for _, a := range acks[:20] {
		require.NoError(t, a.Wait(ctx), "full batches go without waiting for linger")
	}
	select {
	case <-acks[24].Done():
		t.Fatal("a partial batch went before its linger")
	default:
	}
	require.NoError(t, p.Flush(ctx))
	for _, a := range acks {
		require.NoError(t, a.Err())
	}
	counts, _ := log.get()
	require.Equal(t, []int{10, 10, 5}, counts)
	msgs := pollAll(t, c, s, tp, 0)
	require.Len(t, msgs, 25)
	for i, m := range msgs {
		require.Equal(t, fmt.Sprintf("m-%d", i), string(m.Payload), "order kept")
	}
}

func TestProducerLinger(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	log := watchSends(t, b)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)
	// A linger no test run outlasts: the sends can only go together, when
	// Flush says so.
	p := newProducer(t, c, s, tp, iggy.WithLinger(time.Hour))
	a1 := p.Send(ctx, payloads("a", 2)...)
	a2 := p.Send(ctx, payloads("b", 1)...)
	require.NoError(t, p.Flush(ctx))
	require.NoError(t, a1.Wait(ctx))
	require.NoError(t, a2.Wait(ctx))
	counts, _ := log.get()
	require.Equal(t, []int{3}, counts, "both sends went in one batch")

	// A short linger sends on its own, without a flush (how the sends are
	// batched depends on timing, so only the arrival is checked).
	s2, tp2 := newTopic(t, c, 1)
	p2 := newProducer(t, c, s2, tp2, iggy.WithLinger(time.Millisecond))
	require.NoError(t, p2.Send(ctx, payloads("c", 2)...).Wait(ctx), "sent after the linger, without a flush")
	require.Len(t, pollAll(t, c, s2, tp2, 0), 2)
}

func TestProducerSplitsLargeSends(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	log := watchSends(t, b)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)
	p := newProducer(t, c, s, tp, iggy.WithBatchLength(4), iggy.WithBatchBytes(3*(48+10)))

	ack := p.Send(ctx, payloads("0123456", 10)...) // 9- or 10-byte payloads
	require.NoError(t, ack.Wait(ctx))
	counts, _ := log.get()
	require.Equal(t, []int{3, 3, 3, 1}, counts, "the byte bound splits before the length bound")
	require.Len(t, pollAll(t, c, s, tp, 0), 10)
}

func TestProducerBackPressure(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)

	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	stop := b.ControlOnce(wire.CmdSendMessages, func(broker.Request) broker.Action {
		entered <- struct{}{}
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
		return broker.Action{}
	})
	defer stop()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()

	p := newProducer(t, c, s, tp, iggy.WithMaxBuffered(10, 1<<20), iggy.WithLinger(0))
	first := p.Send(ctx, payloads("first", 10)...)
	<-entered // the batch is in flight and still counts against the bound

	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	blocked := p.Send(short, payloads("blocked", 1)...)
	require.ErrorIs(t, blocked.Wait(ctx), context.DeadlineExceeded)

	unblock()
	require.NoError(t, first.Wait(ctx))
	require.NoError(t, p.Send(ctx, payloads("later", 1)...).Wait(ctx))
	msgs := pollAll(t, c, s, tp, 0)
	require.Len(t, msgs, 11, "the blocked send was not sent")

	// A send bigger than the bound goes in when the buffer is empty.
	require.NoError(t, p.Send(ctx, payloads("big", 25)...).Wait(ctx))
}

func TestProducerReportsFailures(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)

	missing := newProducer(t, c, s, iggy.NamedID("missing"))
	require.ErrorIs(t, missing.Send(ctx, payloads("m", 3)...).Wait(ctx), iggy.ErrTopicNotFound)

	wrongPartition := newProducer(t, c, s, tp, iggy.WithPartitioning(iggy.ToPartition(7)))
	require.ErrorIs(t, wrongPartition.Send(ctx, payloads("m", 3)...).Wait(ctx), iggy.ErrResourceNotFound)

	p := newProducer(t, c, s, tp)
	bad := p.Send(ctx, iggy.Message{Payload: []byte("ok")}, iggy.Message{})
	select {
	case <-bad.Done():
	default:
		t.Fatal("an invalid message fails its send at once")
	}
	require.ErrorIs(t, bad.Err(), iggy.ErrEmptyMessagePayload)
	require.ErrorIs(t, p.Send(ctx).Err(), iggy.ErrInvalidMessagesCount)
	require.NoError(t, p.Send(ctx, payloads("good", 2)...).Wait(ctx))
	require.Len(t, pollAll(t, c, s, tp, 0), 2, "nothing of the invalid send went out")

	// A retriable failure is retried: the broker drops the first attempt.
	b.ControlOnce(wire.CmdSendMessages, func(broker.Request) broker.Action { return broker.Action{Drop: true} })
	require.NoError(t, p.Send(ctx, payloads("retried", 1)...).Wait(ctx))
	require.Len(t, pollAll(t, c, s, tp, 0), 3)

	_, err := iggy.NewProducer(c, s, tp, iggy.WithBatchLength(0))
	require.ErrorContains(t, err, "must all be positive")
	_, err = iggy.NewProducer(c, s, iggy.Identifier{})
	require.ErrorContains(t, err, "topic id")
}

func TestProducerPartitioning(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	log := watchSends(t, b)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 3)

	// Balanced: round robin per batch.
	p := newProducer(t, c, s, tp, iggy.WithLinger(time.Hour), iggy.WithBatchLength(2))
	for range 3 {
		p.Send(ctx, payloads("bal", 2)...)
	}
	require.NoError(t, p.Flush(ctx))
	_, batches := log.get()
	require.Equal(t, []string{"0:2", "1:2", "2:2"}, batches)

	// Per-message keys: each key's messages go to its partition, in order.
	kp := newProducer(t, c, s, tp, iggy.WithMessageKey(func(m *iggy.Message) []byte { return m.Payload[:1] }))
	var msgs []iggy.Message
	for i := range 30 {
		msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, "%c-%02d", 'a'+i%3, i)})
	}
	require.NoError(t, kp.Send(ctx, msgs...).Wait(ctx))
	for part := uint32(0); part < 3; part++ {
		last := map[byte]string{}
		for _, m := range pollAll(t, c, s, tp, part) {
			if m.Payload[1] != '-' {
				continue // the balanced batches above
			}
			require.Equal(t, part, wire.PartitionForKey(m.Payload[:1], 3), "message %s", m.Payload)
			require.Greater(t, string(m.Payload), last[m.Payload[0]], "order per key")
			last[m.Payload[0]] = string(m.Payload)
		}
	}

	// A fixed key sends everything to one partition.
	fp := newProducer(t, c, s, tp, iggy.WithPartitioning(iggy.ByKey([]byte("k"))))
	require.NoError(t, fp.Send(ctx, payloads("fixed", 5)...).Wait(ctx))
	want := wire.PartitionForKey([]byte("k"), 3)
	_, batches = log.get()
	require.Equal(t, fmt.Sprintf("%d:5", want), batches[len(batches)-1])
}

func TestProducerCloseDrains(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)
	p, err := iggy.NewProducer(c, s, tp, iggy.WithLinger(time.Hour))
	require.NoError(t, err)
	ack := p.Send(ctx, payloads("m", 5)...)
	require.NoError(t, p.Close(ctx))
	require.NoError(t, ack.Err(), "Close sent what was buffered")
	require.Len(t, pollAll(t, c, s, tp, 0), 5)
	require.ErrorIs(t, p.Send(ctx, payloads("late", 1)...).Err(), iggy.ErrClosed)
	require.NoError(t, p.Close(ctx), "idempotent")
	require.NoError(t, c.Ping(ctx), "the client stays open")
}

func TestProducerCloseGivesUpAtDeadline(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 1)
	b.ControlOnce(wire.CmdSendMessages, func(broker.Request) broker.Action {
		entered <- struct{}{}
		select {
		case <-release:
		case <-time.After(30 * time.Second):
		}
		return broker.Action{}
	})
	p, err := iggy.NewProducer(c, s, tp, iggy.WithLinger(0))
	require.NoError(t, err)
	inFlight := p.Send(ctx, payloads("a", 1)...)
	<-entered
	queued := p.Send(ctx, payloads("b", 1)...)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, p.Close(short), context.DeadlineExceeded)
	require.ErrorIs(t, inFlight.Wait(ctx), iggy.ErrClosed)
	require.ErrorIs(t, queued.Wait(ctx), iggy.ErrClosed)
}
