package live_test

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/live"
)

func TestStreamReadiness(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	ctx := testCtx(t)
	for p := range uint32(3) {
		e.send(t, p, "a", "b", "c", "d")
	}
	s, err := e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	defer closeStream(t, s)
	require.False(t, closed(s.Ready()), "ready before anything was read")

	msgs := next(t, s, 12)
	require.False(t, closed(s.Ready()), "ready after reading, before processing")
	var held *live.Message
	for _, m := range msgs {
		if m.Partition == 1 && m.Offset == 2 {
			held = m
			continue
		}
		m.Done()
	}
	require.NotNil(t, held)
	require.False(t, closed(s.Ready()), "ready with partition 1 offset 2 unprocessed")
	held.Done()
	require.True(t, closed(s.Ready()), "not ready after every message of the start was processed")

	// Live messages come after readiness.
	e.send(t, 2, "live")
	m := next(t, s, 1)[0]
	require.Equal(t, where{2, 4}, at(m))
	require.Equal(t, "live", m.PayloadString())
	require.True(t, closed(s.Ready()))

	require.NoError(t, s.Commit(ctx))
	for p := range uint32(3) {
		off, ok := e.stored(t, "g", p)
		require.True(t, ok, "partition %d", p)
		require.Equal(t, uint64(3), off, "partition %d: the live message was not processed", p)
	}
}

func TestStreamReadyAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	ctx := testCtx(t)

	s, err := e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	require.True(t, closed(s.Ready()), "an empty topic has nothing to catch up on")
	closeStream(t, s)

	// A group that processed everything before is ready at once too.
	e.send(t, 0, "x", "y")
	s, err = e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	require.False(t, closed(s.Ready()))
	for _, m := range next(t, s, 2) {
		m.Done()
	}
	require.True(t, closed(s.Ready()))
	closeStream(t, s)
	s, err = e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	require.True(t, closed(s.Ready()), "everything was processed by the group before")
	closeStream(t, s)
}

func TestStreamMessageFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	m0 := iggy.Message{Payload: []byte("hello"), Headers: []iggy.Entry{iggy.Header("source", iggy.StringValue("test"))}}
	m0.ID = [16]byte{1, 2, 3}
	before := time.Now().Add(-time.Minute)
	_, err := e.admin.SendMessages(ctx, e.stream, e.topic, iggy.ToPartition(0), []iggy.Message{m0})
	require.NoError(t, err)

	s, err := e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	defer closeStream(t, s)
	m := next(t, s, 1)[0]
	require.Equal(t, uint32(0), m.Partition)
	require.Equal(t, uint64(0), m.Offset)
	require.Equal(t, [16]byte{1, 2, 3}, m.ID)
	require.Equal(t, "hello", m.PayloadString())
	require.True(t, m.Timestamp.After(before), "timestamp %s", m.Timestamp)
	require.True(t, m.OriginTimestamp.After(before), "origin timestamp %s", m.OriginTimestamp)
	require.NotZero(t, m.Checksum)
	require.Equal(t, e.all(t, 0)[0].Checksum, m.Checksum)
	v, ok := m.Header("source")
	require.True(t, ok)
	require.Equal(t, "test", v.String())
	_, ok = m.Header("other")
	require.False(t, ok)
}

// TestStreamResumeAfterRestart: a restart resumes after the last processed
// message of each partition, never past an unprocessed one; nothing is
// lost and nothing skipped.
func TestStreamResumeAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	ctx := testCtx(t)
	for p := range uint32(2) {
		for i := range 10 {
			e.send(t, p, fmt.Sprintf("p%d-%d", p, i))
		}
	}
	processed := map[where]bool{}

	s, err := e.h.Stream(ctx, e.stream, e.topic, "g", live.WithBatchLength(4))
	require.NoError(t, err)
	first := next(t, s, 20)
	require.ElementsMatch(t, allWheres(2, 10), wheres(first), "every message once")
	for _, m := range first {
		if m.Partition == 0 && m.Offset == 4 {
			continue // a hole: processed later than its successors, never here
		}
		if m.Partition == 0 && m.Offset > 7 {
			continue // not reached before the "crash"
		}
		m.Done()
		processed[at(m)] = true
	}
	closeStream(t, s)
	off, ok := e.stored(t, "g", 0)
	require.True(t, ok)
	require.Equal(t, uint64(3), off, "partition 0 stops before the unprocessed offset 4")
	off, ok = e.stored(t, "g", 1)
	require.True(t, ok)
	require.Equal(t, uint64(9), off)

	s, err = e.h.Stream(ctx, e.stream, e.topic, "g", live.WithBatchLength(4))
	require.NoError(t, err)
	defer closeStream(t, s)
	require.False(t, closed(s.Ready()))
	second := next(t, s, 6)
	require.Equal(t, []where{{0, 4}, {0, 5}, {0, 6}, {0, 7}, {0, 8}, {0, 9}}, wheres(second),
		"resumes at the first unprocessed message, in order")
	for _, m := range second {
		m.Done()
		processed[at(m)] = true
	}
	require.True(t, closed(s.Ready()))
	// Partition 1 was done: its next message is a new one, not a replay.
	e.send(t, 1, "new-1")
	e.send(t, 0, "new-0")
	third := next(t, s, 2)
	require.ElementsMatch(t, []where{{0, 10}, {1, 10}}, wheres(third))
	for w := range slices.Values(allWheres(2, 10)) {
		require.True(t, processed[w], "message %v lost", w)
	}
}

func allWheres(partitions uint32, n uint64) []where {
	var out []where
	for p := range partitions {
		for off := range n {
			out = append(out, where{p, off})
		}
	}
	return out
}

func TestStreamBatchDone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	e.send(t, 0, "a", "b", "c")
	s, err := e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	defer closeStream(t, s)
	b, err := s.NextBatch(ctx)
	require.NoError(t, err)
	require.Equal(t, uint32(0), b.Partition)
	require.Len(t, b.Messages, 3)
	_, ok := e.stored(t, "g", 0)
	require.False(t, ok, "nothing stored before Done")
	b.Done()
	require.True(t, closed(s.Ready()))
	require.NoError(t, s.Commit(ctx))
	off, ok := e.stored(t, "g", 0)
	require.True(t, ok)
	require.Equal(t, uint64(2), off)
}

// TestStreamPayloads: the payload adapter marks a payload processed when
// the loop asks for the next one, not when the body breaks on it.
func TestStreamPayloads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	e.send(t, 0, "one", "two", "three")
	s, err := e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	var got []string
	for p, err := range s.Payloads(ctx) {
		require.NoError(t, err)
		got = append(got, string(p))
		if len(got) == 2 {
			break
		}
	}
	require.Equal(t, []string{"one", "two"}, got)
	closeStream(t, s)
	off, ok := e.stored(t, "g", 0)
	require.True(t, ok)
	require.Equal(t, uint64(0), off, "only the payload the loop moved past is processed")

	s, err = e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	defer closeStream(t, s)
	got = nil
	for p, err := range s.Payloads(ctx) {
		require.NoError(t, err)
		got = append(got, string(p))
		if len(got) == 2 {
			break
		}
	}
	require.Equal(t, []string{"two", "three"}, got)
}

func TestStreamMessagesIterator(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	e.send(t, 0, "a", "b")
	s, err := e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	var got []string
	for m, err := range s.Messages(ctx) {
		require.NoError(t, err)
		got = append(got, m.PayloadString())
		m.Done()
		if closed(s.Ready()) {
			break
		}
	}
	require.Equal(t, []string{"a", "b"}, got)
	closeStream(t, s)

	_, err = s.Next(ctx)
	require.ErrorIs(t, err, iggy.ErrClosed)
	var iterErr error
	for _, err := range s.Messages(ctx) {
		iterErr = err
	}
	require.ErrorIs(t, iterErr, iggy.ErrClosed, "the iterator yields the error and ends")
	require.NoError(t, s.Close(ctx), "Close is idempotent")
}

// dropNextPoll makes the broker drop the connection of the next poll.
func dropNextPoll(b *broker.Broker) {
	b.ControlOnce(wire.CmdPollMessages, func(broker.Request) broker.Action { return broker.Action{Drop: true} })
}

// reconnectMidRead drops the connection under s's next poll and waits for
// the client to reconnect: the consumer joins the group again in a new
// session and reads on from the group's stored offset.
func reconnectMidRead(t *testing.T, e *env, s *live.Stream) {
	t.Helper()
	ctx := testCtx(t)
	dropNextPoll(e.b)
	_, err := s.Next(ctx)
	require.ErrorIs(t, err, iggy.ErrConnection)
	require.NoError(t, e.h.ConsumerClient().Ping(ctx))
}

// TestStreamNoReplay: after a reconnect the group re-reads from its
// stored offset; without replay the Stream does not deliver again what it
// delivered, and the stored offset only moves forward.
func TestStreamNoReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	for i := range 20 {
		e.send(t, 0, fmt.Sprint(i))
	}
	s, err := e.h.Stream(ctx, e.stream, e.topic, "g", live.WithBatchLength(10))
	require.NoError(t, err)
	defer closeStream(t, s)
	first := next(t, s, 10)
	for _, m := range first[:5] {
		m.Done()
	}
	require.NoError(t, s.Commit(ctx))
	off, _ := e.stored(t, "g", 0)
	require.Equal(t, uint64(4), off)

	reconnectMidRead(t, e, s)
	rest := next(t, s, 10)
	require.Equal(t, uint64(10), rest[0].Offset, "offsets 5..9 were re-read but are not delivered twice")
	seen := map[uint64]int{}
	for _, m := range append(first, rest...) {
		seen[m.Offset]++
	}
	for off := range uint64(20) {
		require.Equal(t, 1, seen[off], "offset %d", off)
	}

	last := uint64(4)
	for _, m := range append(first[5:], rest...) {
		m.Done()
		require.NoError(t, s.Commit(ctx))
		off, _ := e.stored(t, "g", 0)
		require.GreaterOrEqual(t, off, last, "the stored offset moved backwards")
		last = off
	}
	require.Equal(t, uint64(19), last)
}

// TestStreamAllowReplay: with replay allowed, a re-read is delivered
// again, and processing it moves the stored offset back.
func TestStreamAllowReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	for i := range 20 {
		e.send(t, 0, fmt.Sprint(i))
	}
	s, err := e.h.Stream(ctx, e.stream, e.topic, "g", live.WithBatchLength(10), live.WithAllowReplay())
	require.NoError(t, err)
	defer closeStream(t, s)
	first := next(t, s, 10)
	for _, m := range first[:5] {
		m.Done()
	}
	require.NoError(t, s.Commit(ctx))

	reconnectMidRead(t, e, s)
	replayed := next(t, s, 5)
	require.Equal(t, []where{{0, 5}, {0, 6}, {0, 7}, {0, 8}, {0, 9}}, wheres(replayed), "re-read messages are delivered again")

	for _, m := range first[5:] {
		m.Done()
	}
	require.NoError(t, s.Commit(ctx))
	off, _ := e.stored(t, "g", 0)
	require.Equal(t, uint64(9), off)
	replayed[0].Done()
	require.NoError(t, s.Commit(ctx))
	off, _ = e.stored(t, "g", 0)
	require.Equal(t, uint64(5), off, "with replay allowed the stored offset follows the replay back")
}

func TestStreamFailsOnFirstErrorByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	e.send(t, 0, "a")
	s, err := e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	defer closeStream(t, s)
	dropNextPoll(e.b)
	_, err = s.Next(ctx)
	require.ErrorIs(t, err, iggy.ErrConnection)
	// The client reconnects; the caller may go on.
	m, err := s.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "a", m.PayloadString())
}

func TestStreamRetryInterval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	e.send(t, 0, "a")
	s, err := e.h.Stream(ctx, e.stream, e.topic, "g", live.WithRetryInterval(time.Millisecond))
	require.NoError(t, err)
	defer closeStream(t, s)
	dropNextPoll(e.b)
	m, err := s.Next(ctx)
	require.NoError(t, err, "the failed poll is retried")
	require.Equal(t, "a", m.PayloadString())
}

// missingTopicFor answers the first n get_topic requests as if the topic
// did not exist, and counts them all.
func missingTopicFor(b *broker.Broker, n int32) (count *atomic.Int32, cancel func()) {
	count = new(atomic.Int32)
	cancel = b.Control(wire.CmdGetTopic, func(broker.Request) broker.Action {
		if count.Add(1) <= n {
			return broker.Action{Body: []byte{}}
		}
		return broker.Action{}
	})
	return count, cancel
}

func TestStreamInitRetries(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		retries, missing int32
		ok               bool
	}{
		{retries: 0, missing: 1, ok: false},
		{retries: 1, missing: 2, ok: false},
		{retries: 2, missing: 2, ok: true},
		{retries: 5, missing: 1, ok: true},
	} {
		t.Run(fmt.Sprintf("%d_retries%d_missing%d", i, tc.retries, tc.missing), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 1)
			count, cancel := missingTopicFor(e.b, tc.missing)
			defer cancel()
			s, err := e.h.Stream(testCtx(t), e.stream, e.topic, "g",
				live.WithInitRetries(int(tc.retries)), live.WithInitRetryInterval(time.Millisecond))
			if !tc.ok {
				require.ErrorIs(t, err, iggy.ErrTopicNotFound)
				require.Equal(t, tc.retries+1, count.Load(), "looks at the topic 1+retries times")
				return
			}
			require.NoError(t, err)
			closeStream(t, s)
			require.Equal(t, tc.missing+1, count.Load())
		})
	}
}

func TestStreamNeverCreatesTopics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	ctx := testCtx(t)
	_, err := e.h.Stream(ctx, e.stream, iggy.NamedID("nope"), "g")
	require.ErrorIs(t, err, iggy.ErrTopicNotFound)
	require.ErrorContains(t, err, "never creates")
	_, err = e.h.Stream(ctx, iggy.NamedID("nope"), e.topic, "g")
	require.ErrorIs(t, err, iggy.ErrTopicNotFound)
	topics, err := e.admin.ListTopics(ctx, e.stream)
	require.NoError(t, err)
	require.Len(t, topics, 1)
	_, err = e.admin.GetStream(ctx, iggy.NamedID("nope"))
	require.ErrorIs(t, err, iggy.ErrStreamNotFound)
}

func TestStreamOptionErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 1)
	for i, tc := range []struct {
		group string
		opt   live.StreamOption
		want  string
	}{
		{"g", live.WithBatchLength(0), "batch length 0"},
		{"g", live.WithPollInterval(0), "poll interval 0s"},
		{"g", live.WithRetryInterval(-time.Second), "retry interval -1s"},
		{"g", live.WithInitRetries(-1), "init retries -1"},
		{"g", live.WithInitRetryInterval(0), "init retry interval 0s"},
		{"g", live.WithLogger(nil), "nil logger"},
		{"", nil, "consumer group name"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			_, err := e.h.Stream(testCtx(t), e.stream, e.topic, tc.group, tc.opt)
			require.ErrorIs(t, err, live.ErrInvalidOption)
			require.ErrorContains(t, err, tc.want)
		})
	}
	// Several problems are reported together.
	_, err := e.h.Stream(testCtx(t), e.stream, e.topic, "", live.WithBatchLength(0))
	require.ErrorContains(t, err, "batch length")
	require.ErrorContains(t, err, "group")
	require.True(t, errors.Is(err, live.ErrInvalidOption))
}

// TestStreamTwoMembers: two Streams in one group share the partitions;
// each stores the offsets of its own.
func TestStreamTwoMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2)
	ctx := testCtx(t)
	e.send(t, 0, "a0", "a1", "a2")
	e.send(t, 1, "b0", "b1", "b2")
	h2, err := live.Connect(ctx, "iggy://iggy:iggy@"+e.b.Addr())
	require.NoError(t, err)
	defer h2.Close()

	s1, err := e.h.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	s2, err := h2.Stream(ctx, e.stream, e.topic, "g")
	require.NoError(t, err)
	got1, got2 := next(t, s1, 3), next(t, s2, 3)
	parts := map[uint32]bool{}
	for _, got := range [][]*live.Message{got1, got2} {
		p := got[0].Partition
		require.False(t, parts[p], "both members read partition %d", p)
		parts[p] = true
		for i, m := range got {
			require.Equal(t, where{p, uint64(i)}, at(m))
			m.Done()
		}
	}
	require.True(t, closed(s2.Ready()), "the second member joined after the split: its one partition is done")
	closeStream(t, s1)
	closeStream(t, s2)
	for p := range uint32(2) {
		off, ok := e.stored(t, "g", p)
		require.True(t, ok)
		require.Equal(t, uint64(2), off, "partition %d", p)
	}
}
