package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

// keyedSink records, per key, the "i" of each payload it wrote, and
// refuses every batch that holds a message of the failing key.
type keyedSink struct {
	mu      sync.Mutex
	failing string
	// perMessage: refuse the failing key's messages by a MessageErrors
	// (each judged on its own: dead-lettered after max_retries) rather
	// than the whole call (the destination is down: held, never
	// dead-lettered).
	perMessage bool
	got        map[string][]int
	calls      int
	active     int
	maxBusy    int // most Consume calls at once
	// company, when set, makes a call wait (up to 10 s) until another
	// call is running too, so that parallel lanes are seen whatever the
	// machine's load; closed once two calls overlapped.
	company chan struct{}
}

func (s *keyedSink) Open(context.Context) error  { return nil }
func (s *keyedSink) Close(context.Context) error { return nil }
func (s *keyedSink) ConsumesOutOfOrder()         {}

func (s *keyedSink) Consume(_ context.Context, b *connector.SinkBatch) error {
	s.mu.Lock()
	s.calls++
	s.active++
	s.maxBusy = max(s.maxBusy, s.active)
	failing := s.failing
	company := s.company
	if company != nil && s.maxBusy >= 2 {
		select {
		case <-company:
		default:
			close(company)
		}
	}
	s.mu.Unlock()
	if company != nil {
		select {
		case <-company:
		case <-time.After(10 * time.Second): // serial lanes: maxBusy stays 1 and the test says so
		}
	}
	defer func() {
		s.mu.Lock()
		s.active--
		s.mu.Unlock()
	}()
	type rec struct {
		K string `json:"k"`
		I int    `json:"i"`
	}
	recs := make([]rec, len(b.Messages))
	bad := connector.MessageErrors{}
	for i, m := range b.Messages {
		if err := json.Unmarshal(m.Payload, &recs[i]); err != nil {
			return connector.Permanent(err)
		}
		if failing != "" && recs[i].K == failing {
			if !s.perMessage {
				return fmt.Errorf("the destination refuses key %s for now", failing)
			}
			bad[i] = fmt.Errorf("record of key %s refused", failing)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range recs {
		if _, refused := bad[i]; !refused {
			s.got[r.K] = append(s.got[r.K], r.I)
		}
	}
	if len(bad) > 0 {
		return bad
	}
	return nil
}

func (s *keyedSink) snapshot() map[string][]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]int{}
	for k, v := range s.got {
		out[k] = append([]int(nil), v...)
	}
	return out
}

func (s *keyedSink) setFailing(k string) {
	s.mu.Lock()
	s.failing = k
	s.mu.Unlock()
}

// fillKeys starts a runtime with no connectors, creates s/t and sends
// n messages for each of keys keys, interleaved, each with its key in
// the key header, then stops the runtime (the broker's data stays).
func fillKeys(t testing.TB, e *env, keys, n int) {
	t.Helper()
	rt := e.start()
	ctx := context.Background()
	admin, err := iggy.Dial(ctx, rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = admin.CreateTopic(ctx, iggy.NamedID("s"), "t", 1)
	require.NoError(t, err)
	var msgs []iggy.Message
	for i := range n {
		for k := range keys {
			key := fmt.Sprintf("k%03d", k)
			msgs = append(msgs, iggy.Message{Payload: fmt.Appendf(nil, `{"k":%q,"i":%d}`, key, i),
				Headers: []header.Header{header.New(iggy.KeyHeader, header.StringValue(key))}})
		}
	}
	for len(msgs) > 0 {
		chunk := msgs[:min(len(msgs), 500)]
		msgs = msgs[len(chunk):]
		_, err = admin.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), chunk)
		require.NoError(t, err)
	}
	require.NoError(t, rt.Stop(ctx))
}

func (e *env) registerKeyedSink(s *keyedSink) {
	e.t.Helper()
	require.NoError(e.t, e.reg.Register(connector.Info{Kind: connector.KindSink, Name: "keyed",
		NewSink: func(connector.Config) (connector.Sink, error) { return s, nil }}))
}

const keyedSinkTOML = `
type = "sink"
key = "out"
path = "keyed"
[[streams]]
stream = "s"
topics = ["t"]
batch_length = 100
ordering = "key"
ordering_concurrency = 8
max_retries = 2
retry_backoff = "5ms"
max_retry_backoff = "40ms"
`

func committed(t *testing.T, rt *Runtime, group string) (uint64, bool) {
	t.Helper()
	ctx := context.Background()
	admin, err := iggy.Dial(ctx, rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	o, err := admin.GetConsumerOffset(ctx, iggy.ConsumerGroup(iggy.NamedID(group)), iggy.NamedID("s"), iggy.NamedID("t"), iggy.Partition(0))
	if errors.Is(err, iggy.ErrConsumerOffsetNotFound) {
		return 0, false
	}
	require.NoError(t, err)
	return o.StoredOffset, true
}

// 100 keys, one failing: the other 99 arrive whole and in order while
// the failing key waits; the committed offset stays before its first
// message; once the destination takes it, it arrives in order too.
func TestOrderingKeyFailingKeyHoldsOnlyItself(t *testing.T) {
	e := newEnv(t)
	const keys, n = 100, 20
	fillKeys(t, e, keys, n)
	sink := &keyedSink{failing: "k042", got: map[string][]int{}, company: make(chan struct{})}
	e.registerKeyedSink(sink)
	e.connector("out", keyedSinkTOML)
	rt := e.start()

	inOrder := seqInts(n)
	eventually(t, "the 99 good keys whole", func() bool {
		got := sink.snapshot()
		for k := range keys {
			if key := fmt.Sprintf("k%03d", k); key != "k042" && len(got[key]) < n {
				return false
			}
		}
		return true
	})
	got := sink.snapshot()
	for k := range keys {
		key := fmt.Sprintf("k%03d", k)
		if key == "k042" {
			require.Empty(t, got[key], "the failing key wrote nothing")
			continue
		}
		require.Equal(t, inOrder, got[key], "key %s in order, each once", key)
	}
	sink.mu.Lock()
	require.Greater(t, sink.maxBusy, 1, "keys are written in parallel")
	sink.mu.Unlock()

	// The failing key is held, shown in /stats, and the connector runs on.
	info, err := rt.Connector(connector.KindSink, "out")
	require.NoError(t, err)
	require.Equal(t, StatusRunning, info.Status)
	require.Len(t, info.Lanes, 1)
	require.Equal(t, "key", info.Lanes[0].Ordering)
	require.NotEmpty(t, info.Lanes[0].Held)
	require.Equal(t, "k042", info.Lanes[0].Held[0].Key)
	require.Contains(t, info.Lanes[0].Held[0].Error, "refuses key k042")
	require.Contains(t, info.LastError, `key "k042"`)
	// k042's first message is at offset 42: nothing at or past it is
	// committed while it waits.
	off, ok := committed(t, rt, "iggy-connect-sink-out")
	require.True(t, !ok || off < 42, "committed offset %d must stay below 42 while k042 waits", off)

	sink.setFailing("")
	eventually(t, "k042 written once it is taken", func() bool { return len(sink.snapshot()["k042"]) >= n })
	require.Equal(t, inOrder, sink.snapshot()["k042"])
	eventually(t, "everything committed", func() bool {
		off, ok := committed(t, rt, "iggy-connect-sink-out")
		return ok && off == keys*n-1
	})
	info, err = rt.Connector(connector.KindSink, "out")
	require.NoError(t, err)
	require.Empty(t, info.Lanes[0].Held)
}

// With on_error = "dead_letter", the failing key's messages go to the
// dead-letter topic after max_retries and everything is committed.
func TestOrderingKeyDeadLettersAFailingKey(t *testing.T) {
	e := newEnv(t)
	const keys, n = 10, 5
	fillKeys(t, e, keys, n)
	sink := &keyedSink{failing: "k003", perMessage: true, got: map[string][]int{}}
	e.registerKeyedSink(sink)
	e.connector("out", keyedSinkTOML+"on_error = \"dead_letter\"\ndead_letter_topic = \"dlq\"\n")
	rt := e.start()
	eventually(t, "everything settled and committed", func() bool {
		off, ok := committed(t, rt, "iggy-connect-sink-out")
		return ok && off == keys*n-1
	})
	got := sink.snapshot()
	require.Empty(t, got["k003"])
	for k := range keys {
		if key := fmt.Sprintf("k%03d", k); key != "k003" {
			require.Equal(t, seqInts(n), got[key], key)
		}
	}
	ctx := context.Background()
	admin, err := iggy.Dial(ctx, rt.IggyAddress(), iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	defer admin.Close()
	var dead []iggy.Message
	eventually(t, "k003's messages dead-lettered", func() bool {
		reply, err := admin.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("s"), Topic: iggy.NamedID("dlq"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100})
		if err != nil {
			return false
		}
		dead = reply.Messages
		return len(dead) >= n
	})
	require.Len(t, dead, n)
	for i, m := range dead {
		require.Equal(t, fmt.Sprintf(`{"k":"k003","i":%d}`, i), string(m.Payload), "in order")
	}
}

// A restart in the middle (a key held) loses nothing: what was not
// committed is delivered again, so each message arrives at least once
// and each key's last delivery ends in order.
func TestOrderingKeyRestartLosesNothing(t *testing.T) {
	e := newEnv(t)
	const keys, n = 20, 30
	fillKeys(t, e, keys, n)
	sink := &keyedSink{failing: "k007", got: map[string][]int{}}
	e.registerKeyedSink(sink)
	e.connector("out", keyedSinkTOML)
	rt := e.start()
	eventually(t, "some keys written", func() bool { return len(sink.snapshot()) >= 10 })
	require.NoError(t, rt.Stop(context.Background()))
	sink.setFailing("")
	e.start()
	eventually(t, "every key whole", func() bool {
		got := sink.snapshot()
		for k := range keys {
			if !containsAll(got[fmt.Sprintf("k%03d", k)], n) {
				return false
			}
		}
		return true
	})
	for k, v := range sink.snapshot() {
		require.True(t, isOrderedWithRepeats(v), "key %s: %v (a replay starts again from an earlier message, never skips one)", k, v)
	}
}

// ordering = "none" delivers everything, and a sink that needs offset
// order is refused with a reason.
func TestOrderingNoneAndRefusal(t *testing.T) {
	e := newEnv(t)
	fillKeys(t, e, 5, 40)
	sink := &keyedSink{got: map[string][]int{}}
	e.registerKeyedSink(sink)
	e.sinks["ordered"] = &collectSink{}
	e.connector("out", strings.Replace(keyedSinkTOML, `ordering = "key"`, `ordering = "none"`, 1))
	e.connector("ordered", strings.NewReplacer(`key = "out"`, `key = "ordered"`, `path = "keyed"`, `path = "collect"`).Replace(keyedSinkTOML))
	rt := e.start()
	eventually(t, "all 200", func() bool {
		total := 0
		for _, v := range sink.snapshot() {
			total += len(v)
		}
		return total >= 200
	})
	eventually(t, "the ordered-only sink refused", func() bool {
		i, _ := rt.Connector(connector.KindSink, "ordered")
		return i.Status == StatusError && strings.Contains(i.LastError, `ordering = "key": sink "collect" writes a partition's messages in offset order`)
	})
}

func seqInts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func containsAll(v []int, n int) bool {
	seen := map[int]bool{}
	for _, i := range v {
		seen[i] = true
	}
	return len(seen) == n
}

// isOrderedWithRepeats: each step goes up by one, or back to an earlier
// value (a replay), never forward past the next.
func isOrderedWithRepeats(v []int) bool {
	for i := 1; i < len(v); i++ {
		if v[i] > v[i-1]+1 {
			return false
		}
	}
	return len(v) == 0 || v[0] == 0
}
