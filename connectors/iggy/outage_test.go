package iggy

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ferryhq/ferry/connectortest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/stretchr/testify/require"
)

// feeder sends messages to the origin's s/t, batch by batch, each with
// an id (feedID of its index), a header and an origin timestamp of its
// own, until stopped. A send that fails (the origin is down) is sent
// again, the same ids, until the origin takes it; a send whose reply was
// lost may so be appended twice, which the destination's deduplication
// by id absorbs. One send at a time: at a kill, the origin holds at most
// a batch beyond what it acknowledged.
type feeder struct {
	batch int
	mu    sync.Mutex
	acked int // messages the origin acknowledged
	fails int // sends that failed and were sent again
	quit  chan struct{}
	done  chan struct{}
}

func feedID(i int) [16]byte {
	var id [16]byte
	binary.BigEndian.PutUint64(id[:8], 0xfeed_0000_0000_0000)
	binary.BigEndian.PutUint64(id[8:], uint64(i))
	return id
}

func startFeeder(t *testing.T, c *iggy.Client, batch int, every time.Duration) *feeder {
	f := &feeder{batch: batch, quit: make(chan struct{}), done: make(chan struct{})}
	testCtx := t.Context() // done when the test ends
	go func() {
		defer close(f.done)
		for sent := 0; ; {
			msgs := make([]iggy.Message, batch)
			for k := range msgs {
				i := sent + k
				msgs[k] = iggy.Message{ID: feedID(i), Payload: fmt.Appendf([]byte{0, 0xff}, "message %d", i),
					Headers:         []header.Header{header.New("n", header.Int64Value(int64(i)))},
					OriginTimestamp: time.UnixMicro(1_600_000_000_000_000 + int64(i))}
			}
			for {
				ctx, cancel := context.WithTimeout(testCtx, 5*time.Second)
				_, err := c.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), msgs)
				cancel()
				if err == nil {
					break
				}
				f.mu.Lock()
				f.fails++
				f.mu.Unlock()
				select {
				case <-testCtx.Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			sent += len(msgs)
			f.mu.Lock()
			f.acked = sent
			f.mu.Unlock()
			select {
			case <-testCtx.Done():
				return
			case <-f.quit:
				return
			case <-time.After(every):
			}
		}
	}()
	return f
}

func (f *feeder) progress() (acked, fails int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acked, f.fails
}

// stop ends the feed once the origin took at least n messages and
// returns how many it took.
func (f *feeder) stop(t *testing.T, n int) int {
	t.Helper()
	connectortest.Eventually(t, fmt.Sprintf("the feed to reach %d messages", n), func() bool { a, _ := f.progress(); return a >= n })
	close(f.quit)
	<-f.done
	a, _ := f.progress()
	return a
}

// readTopic reads every message of stream/topic partition 0 from c,
// payloads and headers copied.
func readTopic(t *testing.T, c *iggy.Client, stream, topic string) []iggy.Message {
	t.Helper()
	var out []iggy.Message
	for {
		r, err := c.PollMessages(t.Context(), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID(stream), Topic: iggy.NamedID(topic), Partition: iggy.Partition(0),
			Strategy: iggy.AtOffset(uint64(len(out))), Count: 1000})
		require.NoError(t, err)
		if len(r.Messages) == 0 {
			return out
		}
		for _, m := range r.Messages {
			require.NoError(t, m.HeadersErr, "offset %d of %s/%s", m.Offset, stream, topic)
			m.Payload = bytes.Clone(m.Payload)
			m.Headers = header.Clone(m.Headers)
			out = append(out, m)
		}
	}
}

// requireSameMessage fails unless c is m as replicated: the same id,
// payload bytes, headers (keys, kinds, value bytes, in order) and origin
// timestamp.
func requireSameMessage(t *testing.T, m, c iggy.Message, what string) {
	t.Helper()
	require.Equal(t, m.ID, c.ID, "%s: id", what)
	require.True(t, bytes.Equal(m.Payload, c.Payload), "%s: payload %q, copy %q", what, m.Payload, c.Payload)
	require.Equal(t, m.Headers, c.Headers, "%s: headers", what)
	require.True(t, m.OriginTimestamp.Equal(c.OriginTimestamp), "%s: origin timestamp %s, copy %s", what, m.OriginTimestamp, c.OriginTimestamp)
}

// replication is an origin and a destination, each a broker process (a
// `ferry serve` on a data directory; the destination deduplicates by id),
// a runtime process replicating s/t of the origin to copy/t of the
// destination, and a feed of the origin.
type replication struct {
	origin, dest *served
	oc, dc       *iggy.Client
	rt           *child
	feed         *feeder
	total        int // messages the feed sent, once stopped
}

func startReplication(t *testing.T) *replication {
	t.Helper()
	r := &replication{origin: startServe(t, 0), dest: startServe(t, 100_000)}
	r.oc, r.dc = r.origin.dial(t), r.dest.dial(t)
	_, err := r.oc.CreateStream(t.Context(), "s")
	require.NoError(t, err)
	_, err = r.oc.CreateTopic(t.Context(), iggy.NamedID("s"), "t", 1)
	require.NoError(t, err)
	r.rt = startRuntime(t, r.dest.addr, map[string]string{"replica.toml": replicaTOML(r.origin.addr, 100)})
	r.feed = startFeeder(t, r.oc, 50, 10*time.Millisecond)
	return r
}

// copied is how many messages the destination holds, or an error while
// it is down.
func (r *replication) copied(t *testing.T) (int, error) {
	d, err := r.dc.GetTopic(t.Context(), iggy.NamedID("copy"), iggy.NamedID("t"))
	if err != nil {
		return 0, err
	}
	return int(d.MessagesCount), nil
}

// copiedMoreThan reports whether the destination answers with more than n.
func (r *replication) copiedMoreThan(t *testing.T, n int) bool {
	c, err := r.copied(t)
	return err == nil && c > n
}

// outages kills s (the origin or the destination) with SIGKILL kills
// times mid-stream and starts it again on the same port and data after a
// while down. After each restart it waits until replication goes on:
// when the origin was killed, until the destination holds a message the
// origin took after the restart (more than it held at the kill, a batch
// in flight included); when the destination was, until the restarted
// destination appended copies. Then it stops the feed, once it sent at
// least atLeast messages.
func (r *replication) outages(t *testing.T, s *served, kills, atLeast int) {
	t.Helper()
	connectortest.Eventually(t, "the first copies", func() bool { return r.copiedMoreThan(t, 0) })
	for k := range kills {
		acked, _ := r.feed.progress()
		atKill, _ := r.copied(t)
		s.kill()
		time.Sleep(time.Duration(300+rand.IntN(700)) * time.Millisecond) // down a while
		s.start()
		restarted := time.Now()
		after := acked + r.feed.batch // the origin held no more at the kill
		if s == r.dest {
			connectortest.Eventually(t, "the restarted destination to answer", func() bool {
				n, err := r.copied(t)
				after = n
				return err == nil
			})
		}
		connectortest.Eventually(t, fmt.Sprintf("copies after restart %d", k), func() bool { return r.copiedMoreThan(t, after) })
		_, fails := r.feed.progress()
		t.Logf("kill %d: %d messages acknowledged by the origin and %d in the destination at the kill; more than %d in the destination %s after the restart; %d failed sends to the origin so far",
			k, acked, atKill, after, time.Since(restarted).Round(time.Millisecond), fails)
	}
	r.total = r.feed.stop(t, atLeast)
}

// originMessages reads the origin: every message the feed sent, in order,
// each once (a send whose reply a kill cut was sent again, and may be
// there twice; the later one is left out). all is how many it holds.
func (r *replication) originMessages(t *testing.T) (want []iggy.Message, all int) {
	t.Helper()
	stored := readTopic(t, r.origin.dial(t), "s", "t") // a new connection: the feed's may have seen a kill
	seen := map[[16]byte]bool{}
	for _, m := range stored {
		if !seen[m.ID] {
			seen[m.ID] = true
			want = append(want, m)
		}
	}
	for i := range r.total {
		require.True(t, seen[feedID(i)], "message %d, acknowledged by the origin, is not in it", i)
	}
	require.Len(t, want, r.total, "the origin holds messages the feed did not send")
	return want, len(stored)
}

// The origin goes away mid-stream, three times: its broker process is
// killed with SIGKILL and started again on the same port and data while
// messages keep being sent to it. The runtime, never restarted, comes
// back by itself, and every message of the origin is in the destination
// once, in the origin's order, byte for byte: a batch copied but not yet
// acknowledged to the origin when it died is read again, with the ids it
// had, and the destination leaves the copies out.
func TestOriginOutageBetweenTwoServeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	const kills = 3
	r := startReplication(t)
	r.outages(t, r.origin, kills, 20_000)
	total := r.total
	_, fails := r.feed.progress()
	require.Positive(t, fails, "no send failed: the origin was never down while the feed ran")
	want, stored := r.originMessages(t)

	connectortest.Eventually(t, "every message in the destination", func() bool { return r.copiedMoreThan(t, total-1) })
	got := readTopic(t, r.dest.dial(t), "copy", "t")
	require.Len(t, got, total, "each origin message once in the destination")
	for i, m := range want {
		requireSameMessage(t, m, got[i], fmt.Sprintf("message %d", i))
	}
	require.False(t, r.rt.exited.Load(), "the runtime process ended")
	t.Logf("%d messages, %d origin kills, %d in the origin (%d sent twice), %d in the destination; %d failed sends",
		total, r.origin.Kills, stored, stored-total, len(got), fails)
}

// The destination goes away mid-stream, three times. The runtime, never
// restarted, comes back by itself and nothing is lost; but a restarted
// broker has forgotten the ids it deduplicates by (as upstream's), so a
// batch appended just before the kill and not yet acknowledged is
// appended again: at most a batch (batch_length, 100 here) a kill, each
// an earlier message again, id and bytes. Counting those first copies
// only, the destination is the origin, in order, byte for byte.
func TestDestinationOutageBetweenTwoServeProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("process-kill test")
	}
	const kills, batch = 3, 100
	r := startReplication(t)
	r.outages(t, r.dest, kills, 20_000)
	total := r.total
	want, _ := r.originMessages(t)
	byID := make(map[[16]byte]iggy.Message, len(want))
	for _, m := range want {
		byID[m.ID] = m
	}

	var got []iggy.Message
	seen := map[[16]byte]bool{}
	dc := r.dest.dial(t) // a new connection: r.dc's may have seen a kill
	connectortest.Eventually(t, "every message in the destination once at least", func() bool {
		got = readTopic(t, dc, "copy", "t")
		clear(seen)
		for _, m := range got {
			seen[m.ID] = true
		}
		return len(seen) >= total
	})
	clear(seen)
	next, dups := 0, 0
	for i, m := range got {
		w, ok := byID[m.ID]
		require.True(t, ok, "destination offset %d: %x is no origin message", i, m.ID)
		requireSameMessage(t, w, m, fmt.Sprintf("destination offset %d", i))
		if seen[m.ID] {
			dups++
			continue
		}
		seen[m.ID] = true
		require.Equal(t, want[next].ID, m.ID, "destination offset %d: origin message %d expected next", i, next)
		next++
	}
	require.Equal(t, total, next, "every origin message in the destination")
	require.LessOrEqual(t, dups, kills*batch, "more appended twice than a batch a kill")
	require.False(t, r.rt.exited.Load(), "the runtime process ended")
	t.Logf("%d messages, %d destination kills, %d in the destination, %d appended twice", total, r.dest.Kills, len(got), dups)
}
