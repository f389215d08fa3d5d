package live_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/live"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is one test's broker, handle and topic.
type env struct {
	b             *broker.Broker
	h             *live.Handle
	admin         *iggy.Client
	stream, topic iggy.Identifier
}

var names atomic.Int64

// newEnv starts a broker and creates a stream with one topic of the given
// partitions.
func newEnv(t *testing.T, partitions uint32) *env {
	t.Helper()
	ctx := testCtx(t)
	b := brokertest.Start(t, brokertest.InMemory())
	h, err := live.Connect(ctx, "iggy://iggy:iggy@"+b.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.Close() })
	admin, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	e := &env{b: b, h: h, admin: admin}
	e.stream, e.topic = e.newTopic(t, partitions)
	return e
}

func (e *env) newTopic(t *testing.T, partitions uint32) (iggy.Identifier, iggy.Identifier) {
	t.Helper()
	ctx := testCtx(t)
	name := fmt.Sprintf("s%d", names.Add(1))
	_, err := e.admin.CreateStream(ctx, name)
	require.NoError(t, err)
	_, err = e.admin.CreateTopic(ctx, iggy.NamedID(name), "t", partitions)
	require.NoError(t, err)
	return iggy.NamedID(name), iggy.NamedID("t")
}

// send sends payloads to one partition, in order.
func (e *env) send(t *testing.T, partition uint32, payloads ...string) {
	t.Helper()
	msgs := make([]iggy.Message, len(payloads))
	for i, p := range payloads {
		msgs[i].Payload = []byte(p)
	}
	_, err := e.admin.SendMessages(testCtx(t), e.stream, e.topic, iggy.ToPartition(partition), msgs)
	require.NoError(t, err)
}

// sendKeyed sends one message with headers built from key ("" for none)
// and deleted.
func (e *env) sendKeyed(t *testing.T, partition uint32, key, payload string, deleted bool) {
	t.Helper()
	var hs []iggy.Entry
	if key != "" {
		hs = append(hs, iggy.Header(live.KeyHeader, iggy.StringValue(key)))
	}
	if deleted {
		hs = append(hs, iggy.Header(live.DeletedHeader, iggy.BoolValue(true)))
	}
	m := iggy.Message{Payload: []byte(payload), Headers: hs}
	_, err := e.admin.SendMessages(testCtx(t), e.stream, e.topic, iggy.ToPartition(partition), []iggy.Message{m})
	require.NoError(t, err)
}

// all reads every message of a partition.
func (e *env) all(t *testing.T, partition uint32) []iggy.Message {
	t.Helper()
	r, err := e.admin.PollMessages(testCtx(t), iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NamedID("test-reader")), Stream: e.stream, Topic: e.topic,
		Partition: iggy.Partition(partition), Strategy: iggy.First(), Count: 10_000,
	})
	require.NoError(t, err)
	return r.Messages
}

// stored returns the group's stored offset of a partition.
func (e *env) stored(t *testing.T, group string, partition uint32) (uint64, bool) {
	t.Helper()
	info, err := e.admin.GetConsumerOffset(testCtx(t), iggy.ConsumerGroup(iggy.NamedID(group)), e.stream, e.topic, iggy.Partition(partition))
	if err != nil {
		require.ErrorIs(t, err, iggy.ErrConsumerOffsetNotFound)
		return 0, false
	}
	return info.StoredOffset, true
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// next reads n messages from s.
func next(t *testing.T, s *live.Stream, n int) []*live.Message {
	t.Helper()
	ctx := testCtx(t)
	out := make([]*live.Message, 0, n)
	for range n {
		m, err := s.Next(ctx)
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

// where is a message's partition and offset.
type where struct {
	p   uint32
	off uint64
}

func at(m *live.Message) where { return where{m.Partition, m.Offset} }

func wheres(ms []*live.Message) []where {
	out := make([]where, len(ms))
	for i, m := range ms {
		out[i] = at(m)
	}
	return out
}

func closeStream(t *testing.T, s *live.Stream) {
	t.Helper()
	require.NoError(t, s.Close(testCtx(t)))
}
