package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// outageSink is a destination whose answer to each Consume call is
// scripted: answer gets the call's number (from 1, counted across
// restarts) and the batch, and returns the call's error, or nil to write
// the messages it does not name in a MessageErrors.
type outageSink struct {
	answer func(call int, b *connector.SinkBatch) error
	mu     sync.Mutex
	calls  int
	alone  map[uint64]int // n → lone tries (calls with only that message)
	got    map[uint64]int // n → times written
}

func newOutageSink(answer func(call int, b *connector.SinkBatch) error) *outageSink {
	return &outageSink{answer: answer, alone: map[uint64]int{}, got: map[uint64]int{}}
}

func (s *outageSink) Open(context.Context) error  { return nil }
func (s *outageSink) Close(context.Context) error { return nil }

func (s *outageSink) Consume(_ context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(b.Messages) == 1 {
		s.alone[payloadN(b.Messages[0])]++
	}
	err := s.answer(s.calls, b)
	var per connector.MessageErrors
	if err != nil && !errors.As(err, &per) {
		return err
	}
	for i, m := range b.Messages {
		if _, bad := per[i]; !bad {
			s.got[payloadN(m)]++
		}
	}
	return err
}

// written is every n written at least once, in order.
func (s *outageSink) written() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint64
	for n := range uint64(1000) {
		if s.got[n] > 0 {
			out = append(out, n)
		}
	}
	return out
}

func payloadN(m connector.Message) uint64 {
	var v struct{ N uint64 }
	_ = json.Unmarshal(m.Payload, &v)
	return v.N
}

// everyMessage is a MessageErrors naming each message of b with err.
func everyMessage(b *connector.SinkBatch, err error) connector.MessageErrors {
	per := connector.MessageErrors{}
	for i := range b.Messages {
		per[i] = err
	}
	return per
}

var errRefused = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

// startOutage runs a seq source of n messages (one batch) into an
// outageSink keyed "dest" with on_error = "dead_letter" to s/dlq.
func startOutage(t *testing.T, n uint64, sink *outageSink, maxRetries int) (*Runtime, *iggy.Client) {
	t.Helper()
	e := newEnv(t)
	e.sources["numbers"] = &seqSource{max: n, batch: n}
	require.NoError(t, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "outage",
		NewSink: func(connector.Config) (connector.Sink, error) { return sink, nil }}))
	e.connector("numbers", strings.Replace(strings.Replace(seqSourceTOML, "%s", "numbers", 1), "batch_length = 10", fmt.Sprintf("batch_length = %d", n), 1))
	e.connector("dest", fmt.Sprintf(`
type = "sink"
key = "dest"
path = "outage"
[[streams]]
stream = "s"
topics = ["t"]
consumer_group = "dest-group"
batch_length = %d
max_retries = %d
retry_backoff = "5ms"
on_error = "dead_letter"
dead_letter_topic = "dlq"
`, n, maxRetries))
	rt := e.start()
	admin, err := iggy.Dial(context.Background(), rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close() })
	return rt, admin
}

// awaitCommitted waits until dest-group's offset reaches last: every
// dead letter of the batches up to last is stored by then.
func awaitCommitted(t *testing.T, admin *iggy.Client, last uint64) {
	t.Helper()
	eventually(t, fmt.Sprintf("offset %d committed", last), func() bool {
		off, err := admin.GetConsumerOffset(context.Background(), iggy.ConsumerGroup(iggy.NamedID("dest-group")),
			iggy.NamedID("s"), iggy.NamedID("t"), iggy.Partition(0))
		return err == nil && off.StoredOffset >= last
	})
}

// deadLetters returns the dead-letter topic's messages (none when it was
// never created).
func deadLetters(t *testing.T, admin *iggy.Client) []iggy.Message {
	t.Helper()
	reply, err := admin.PollMessages(context.Background(), iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("s"), Topic: iggy.NamedID("dlq"),
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100,
	})
	if errors.Is(err, iggy.ErrTopicNotFound) {
		return nil
	}
	require.NoError(t, err)
	return reply.Messages
}

// A sink that says the destination is unavailable, for the whole call or
// per message, has nothing dead-lettered: it restarts with backoff, shows
// why, and delivers everything once the destination is back.
func TestUnavailableDestinationDeadLettersNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  func(b *connector.SinkBatch) error
	}{
		{"per message", func(b *connector.SinkBatch) error { return everyMessage(b, connector.Unavailable(errRefused)) }},
		{"whole call", func(*connector.SinkBatch) error { return connector.Unavailable(errRefused) }},
		{"per message, some written", func(b *connector.SinkBatch) error {
			per := everyMessage(b, connector.Unavailable(errRefused))
			delete(per, 0) // the first of each call gets through
			return per
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sink := newOutageSink(func(call int, b *connector.SinkBatch) error {
				if call <= 4 { // two runs of max_retries = 1
					return tc.err(b)
				}
				return nil
			})
			rt, admin := startOutage(t, 10, sink, 1)
			eventually(t, "every message written", func() bool { return len(sink.written()) == 10 })
			awaitCommitted(t, admin, 9)
			require.Equal(t, seqRange(0, 10), sink.written())
			require.Empty(t, deadLetters(t, admin), "nothing is dead-lettered while the destination is down")
			i, err := rt.Connector(connector.KindSink, "dest")
			require.NoError(t, err)
			require.Contains(t, i.LastError, "destination unavailable")
			require.Contains(t, i.LastError, "connection refused")
			require.GreaterOrEqual(t, i.Restarts, 1, "a down destination restarts the sink with backoff")
		})
	}
}

// An outage that ends while the runtime tries a failing batch's messages
// one by one: the messages that failed alone before it ended are not
// poison. Unmarked errors get a second lone try once another message was
// written; an Unavailable answer stops the isolation and keeps the batch.
func TestOutageEndingDuringIsolationDeadLettersNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		lone error // the answer to the first three lone tries
	}{
		{"unmarked errors", errRefused},
		{"unavailable", connector.Unavailable(errRefused)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sink := newOutageSink(func(call int, b *connector.SinkBatch) error {
				switch {
				case call <= 2: // the batch and its one retry: down, as far as the sink can tell
					return errRefused
				case call <= 5 && len(b.Messages) == 1: // the first three lone tries: still down
					return tc.lone
				}
				return nil
			})
			_, admin := startOutage(t, 10, sink, 1)
			eventually(t, "every message written", func() bool { return len(sink.written()) == 10 })
			awaitCommitted(t, admin, 9)
			require.Equal(t, seqRange(0, 10), sink.written())
			require.Empty(t, deadLetters(t, admin), "a transient failure during isolation is not poison")
		})
	}
}

// A message that fails alone, twice, while its neighbours are written is
// poison even when the sink does not mark its error: it is dead-lettered
// and the rest is delivered.
func TestUnmarkedPoisonIsStillIsolated(t *testing.T) {
	t.Parallel()
	sink := newOutageSink(func(_ int, b *connector.SinkBatch) error {
		for _, m := range b.Messages {
			if payloadN(m) == 3 {
				return errors.New("cannot write record")
			}
		}
		return nil
	})
	rt, admin := startOutage(t, 10, sink, 1)
	awaitCommitted(t, admin, 9)
	info, err := rt.Connector(connector.KindSink, "dest")
	require.NoError(t, err)
	require.Equal(t, StatusRunning, info.Status, "the sink runs on")
	require.Contains(t, info.LastError, "offset 3 sent to the dead-letter topic", "and says why a message was dead-lettered")
	require.Contains(t, info.LastError, "cannot write record")
	want := append(seqRange(0, 3), seqRange(4, 10)...)
	require.Equal(t, want, sink.written())
	dead := deadLetters(t, admin)
	require.Len(t, dead, 1)
	h := dead[0].Headers
	off, _ := wire.Lookup(h, HeaderDLQOffset)
	cause, _ := wire.Lookup(h, HeaderDLQError)
	require.Equal(t, "3", off.String())
	require.Contains(t, cause.String(), "cannot write record")
	sink.mu.Lock()
	defer sink.mu.Unlock()
	require.Equal(t, 2, sink.alone[3], "the poison message was tried alone twice")
	require.Equal(t, 1, sink.alone[4], "a neighbour written alone is not tried again")
}

// An Unavailable entry beside a Permanent one: nothing is dead-lettered
// while the destination is down, and the rejected message goes to the
// dead-letter topic once, after it is back.
func TestUnavailableWinsOverPermanentEntries(t *testing.T) {
	t.Parallel()
	sink := newOutageSink(func(call int, b *connector.SinkBatch) error {
		per := connector.MessageErrors{}
		for i, m := range b.Messages {
			switch {
			case payloadN(m) == 5:
				per[i] = connector.Permanent(errors.New("rejected record"))
			case call <= 4:
				per[i] = connector.Unavailable(errRefused)
			}
		}
		if len(per) == 0 {
			return nil
		}
		return per
	})
	_, admin := startOutage(t, 10, sink, 1)
	awaitCommitted(t, admin, 9)
	require.Equal(t, append(seqRange(0, 5), seqRange(6, 10)...), sink.written())
	dead := deadLetters(t, admin)
	require.Len(t, dead, 1, "dead-lettered once, after the destination was back")
	require.Equal(t, `{"n":5}`, string(dead[0].Payload))
}
