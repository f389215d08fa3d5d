package connectortest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// SourceSuite says how to test one source.
type SourceSuite struct {
	// New builds the source as the runtime would, from its settings. It
	// is called several times: each source it returns reads the same
	// external system.
	New func(t *testing.T) connector.Source
	// Add makes the external system hold n more records after those it
	// has, and returns their payloads as the source sends them, in order.
	Add func(t *testing.T, n int) []string
	// StableIDs says that the source gives each record an id derived from
	// its place in the external system, so that a batch read again after a
	// crash carries the same ids and Iggy-side or sink-side deduplication
	// removes the repeats.
	StableIDs bool
	// Text, when set, turns a message into what Add's payloads are
	// compared with, for sources whose payloads carry what a test cannot
	// predict (a CDC event's LSN and commit time): for example the row's
	// new values. Default: the payload as it is.
	Text func(m connector.Message) string
	// AckedPosition says that the external system keeps the source's
	// position: what the source acknowledged (Acker.Ack) is not read
	// again, as with a queue (RabbitMQ, SQS), so batches need no State.
	// The suite still checks that a restart neither skips nor repeats
	// beyond one batch.
	AckedPosition bool
	// Synthetic, for a source with no external system that makes its own
	// records (such as random), is how many it makes in all before it
	// ends (its max_count); Add is then nil, and the suite checks counts
	// instead of payloads.
	Synthetic int
}

// pollTimeout bounds how long the suite waits for data it added.
const pollTimeout = time.Minute

// Source runs the conformance suite for a source; each check is a subtest.
func Source(t *testing.T, s SourceSuite) {
	t.Helper()
	if s.New == nil || (s.Add == nil) == (s.Synthetic == 0) {
		t.Fatal("connectortest.Source: New, and either Add or Synthetic, are required")
	}
	if s.Synthetic > 0 {
		syntheticSource(t, s)
		return
	}
	t.Run("delivers what was added, in order", func(t *testing.T) {
		want := s.Add(t, 12)
		src := openSource(t, s, nil)
		got, _ := collect(t, src, len(want), true)
		if !slices.Equal(s.texts(got), want) {
			t.Fatalf("the source sent %q, want %q", s.texts(got), want)
		}
	})
	t.Run("resumes from its state neither skipping nor repeating beyond one batch", func(t *testing.T) {
		first := openSource(t, s, nil)
		drain(t, first) // what earlier checks added
		want := s.Add(t, 12)
		b := pollOne(t, first)
		ack(t, first, b)
		closeSource(t, first)
		if _, acks := first.(connector.Acker); b.State == nil && !(s.AckedPosition && acks) {
			t.Fatal("a batch with messages carried no state: a restart would read it again forever")
		}
		want = append(want, s.Add(t, 3)...)
		read := s.texts(b.Messages)
		next := openSource(t, s, b.State)
		got, _ := collect(t, next, len(want)-len(read), true)
		resumed := s.texts(got)
		if slices.Equal(resumed, want[len(read):]) {
			return // right after the acknowledged batch
		}
		if slices.Equal(resumed, want[:len(resumed)]) {
			// That batch again, at most: the rest must follow.
			rest, _ := collect(t, next, len(read), true)
			if all := append(resumed, s.texts(rest)...); slices.Equal(all, want) {
				return
			}
		}
		t.Fatalf("after a restart from the state of the batch %q the source sent %q; want what followed it: %q", read, resumed, want[len(read):])
	})
	t.Run("a batch replayed after a crash carries the same ids", func(t *testing.T) {
		if !s.StableIDs {
			t.Skip("the source does not claim stable ids")
		}
		first := openSource(t, s, nil)
		drain(t, first)
		s.Add(t, 6)
		b1 := pollOne(t, first)
		ack(t, first, b1)
		b2, _ := collect(t, first, 0, false) // read further, never acknowledged: then a crash
		if len(b2) == 0 {
			s.Add(t, 3)
			b2, _ = collect(t, first, 1, false)
		}
		closeSource(t, first)
		again := openSource(t, s, b1.State)
		replay, _ := collect(t, again, len(b2), true)
		for i, m := range b2 {
			if m.ID == ([16]byte{}) {
				t.Fatalf("message %d (%q) has no id although the source claims stable ids", i, m.Payload)
			}
			if replay[i].ID != m.ID || string(replay[i].Payload) != string(m.Payload) {
				t.Fatalf("replayed message %d is %q with id %x; first read as %q with id %x", i, replay[i].Payload, replay[i].ID, m.Payload, m.ID)
			}
		}
	})
	t.Run("Poll returns when its context ends", func(t *testing.T) {
		src := openSource(t, s, nil)
		drain(t, src)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			b, err := src.Poll(ctx)
			if err == nil && b != nil && len(b.Messages) > 0 {
				err = errors.New("a batch with messages from an external system holding nothing new")
			}
			done <- err
		}()
		time.Sleep(50 * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, connector.ErrEndOfInput) {
				t.Fatalf("Poll after its context ended: %v (want nil, context.Canceled or ErrEndOfInput)", err)
			}
		case <-time.After(pollTimeout):
			t.Fatal("Poll did not return within a minute of its context ending")
		}
	})
	t.Run("Ack and Nack come in poll order", func(t *testing.T) {
		src := openSource(t, s, nil)
		drain(t, src)
		acker, ok := src.(connector.Acker)
		if !ok {
			t.Skip("the source does not implement connector.Acker")
		}
		s.Add(t, 4)
		b := pollOne(t, src)
		acker.Nack(context.Background(), b, errors.New("connectortest: the send failed"))
		if err := acker.Ack(context.Background(), b); err != nil {
			t.Fatalf("Ack of a batch after a Nack of it (the runtime sent it again): %v", err)
		}
	})
}

func openSource(t *testing.T, s SourceSuite, state []byte) connector.Source {
	t.Helper()
	src := s.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	if err := src.Open(ctx, state); err != nil {
		t.Fatalf("Open: %v", err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = src.Close(context.Background())
		}
	})
	return &trackedSource{Source: src, closed: &closed}
}

// trackedSource remembers a Close so that the cleanup does not close twice.
type trackedSource struct {
	connector.Source
	closed *bool
}

func (s *trackedSource) Ack(ctx context.Context, b *connector.Batch) error {
	if a, ok := s.Source.(connector.Acker); ok {
		return a.Ack(ctx, b)
	}
	return nil
}

func (s *trackedSource) Nack(ctx context.Context, b *connector.Batch, cause error) {
	if a, ok := s.Source.(connector.Acker); ok {
		a.Nack(ctx, b, cause)
	}
}

func closeSource(t *testing.T, src connector.Source) {
	t.Helper()
	ts := src.(*trackedSource)
	*ts.closed = true
	if err := ts.Source.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// pollOne polls until a batch with messages comes.
func pollOne(t *testing.T, src connector.Source) *connector.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	for {
		b, err := src.Poll(ctx)
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		if b != nil && len(b.Messages) > 0 {
			return b
		}
	}
}

// collect polls until it has n messages (n = 0: until a poll brings none
// or ends the input), acknowledging each batch when ack is set; it
// returns the messages and the last state.
func collect(t *testing.T, src connector.Source, n int, ackEach bool) ([]connector.Message, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	var got []connector.Message
	var state []byte
	for n == 0 || len(got) < n {
		pctx, stop := ctx, context.CancelFunc(func() {})
		if n == 0 {
			pctx, stop = context.WithTimeout(ctx, time.Second)
		}
		b, err := src.Poll(pctx)
		stop()
		if errors.Is(err, connector.ErrEndOfInput) || (n == 0 && errors.Is(err, context.DeadlineExceeded)) {
			break
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("only %d of the %d messages expected came within a minute: %q", len(got), n, payloads(got))
		}
		if err != nil {
			t.Fatalf("Poll after %d of %d messages: %v", len(got), n, err)
		}
		if b == nil {
			continue
		}
		got = append(got, b.Messages...)
		if b.State != nil {
			state = b.State
		}
		if ackEach {
			ack(t, src, b)
		}
		if n == 0 && len(b.Messages) == 0 {
			break
		}
	}
	return got, state
}

// drain reads and acknowledges whatever the external system holds.
func drain(t *testing.T, src connector.Source) []connector.Message {
	t.Helper()
	got, _ := collect(t, src, 0, true)
	return got
}

func ack(t *testing.T, src connector.Source, b *connector.Batch) {
	t.Helper()
	if a, ok := src.(connector.Acker); ok {
		if err := a.Ack(context.Background(), b); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
}

// texts are the messages as Add's payloads are compared with them.
func (s SourceSuite) texts(ms []connector.Message) []string {
	if s.Text == nil {
		return payloads(ms)
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = s.Text(m)
	}
	return out
}

func payloads(ms []connector.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = string(m.Payload)
	}
	return out
}

// syntheticSource checks a source that makes its own records: it makes
// exactly Synthetic records and ends, and one resumed from the state of
// an acknowledged batch makes the rest — neither skipping nor repeating
// beyond that batch.
func syntheticSource(t *testing.T, s SourceSuite) {
	t.Run("makes what it says, then ends", func(t *testing.T) {
		src := openSource(t, s, nil)
		if got := countToEnd(t, src); got != s.Synthetic {
			t.Fatalf("the source made %d records before ending, want %d", got, s.Synthetic)
		}
	})
	t.Run("resumes from its state neither skipping nor repeating beyond one batch", func(t *testing.T) {
		first := openSource(t, s, nil)
		b := pollOne(t, first)
		ack(t, first, b)
		closeSource(t, first)
		if b.State == nil {
			t.Fatal("a batch with messages carried no state: a restart would make it again forever")
		}
		rest := countToEnd(t, openSource(t, s, b.State))
		if rest < s.Synthetic-len(b.Messages) || rest > s.Synthetic {
			t.Fatalf("after a restart from the state of a batch of %d, the source made %d more; want %d (or that batch again: %d)",
				len(b.Messages), rest, s.Synthetic-len(b.Messages), s.Synthetic)
		}
	})
}

// countToEnd polls, acknowledging, until the source ends its input.
func countToEnd(t *testing.T, src connector.Source) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	n := 0
	for {
		b, err := src.Poll(ctx)
		if errors.Is(err, connector.ErrEndOfInput) {
			return n
		}
		if err != nil {
			t.Fatalf("Poll after %d records: %v", n, err)
		}
		if b != nil {
			n += len(b.Messages)
			ack(t, src, b)
		}
	}
}
