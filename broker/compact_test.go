package broker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/sysevents"
	"github.com/stretchr/testify/require"
)

// compactedTopic starts a broker compacting every 50 ms, creates the
// compacted topic s/kv with 1 MiB segments and sends msgs (key, deleted)
// with 4 KiB payloads naming their index, 50 per send.
func compactedTopic(t *testing.T, n, keys int, opts ...brokertest.Option) (*broker.Broker, *iggy.Client, []string, []bool) {
	t.Helper()
	opts = append(opts, brokertest.Config(func(c *broker.Config) { c.CompactionInterval = 50 * time.Millisecond }))
	b, c := eventsBroker(t, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("s"), "kv", 1, iggy.TopicSegmentSize(1<<20), iggy.TopicCompact(true),
		iggy.TopicCompactTombstoneRetention(time.Hour))
	require.NoError(t, err)
	ks, del := make([]string, n), make([]bool, n)
	pad := strings.Repeat("x", 4<<10)
	r := rand.New(rand.NewPCG(uint64(n), uint64(keys)))
	var batch []iggy.Message
	for i := range n {
		ks[i], del[i] = fmt.Sprintf("k%d", r.IntN(keys)), i%11 == 10
		hs := []iggy.Entry{iggy.Header(iggy.KeyHeader, iggy.StringValue(ks[i]))}
		if del[i] {
			hs = append(hs, iggy.Header(iggy.DeletedHeader, iggy.BoolValue(true)))
		}
		batch = append(batch, iggy.Message{Payload: []byte(fmt.Sprintf("%d %s", i, pad)), Headers: hs})
		if len(batch) == 50 || i == n-1 {
			_, err := c.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("kv"), iggy.ToPartition(0), batch)
			require.NoError(t, err)
			batch = nil
		}
	}
	return b, c, ks, del
}

// pollAll reads the partition from offset 0 with polls of count messages.
func pollAll(t *testing.T, c *iggy.Client, count uint32) []iggy.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []iggy.Message
	for next := uint64(0); ; {
		r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("s"), Topic: iggy.NamedID("kv"), Partition: iggy.Partition(0),
			Strategy: iggy.AtOffset(next), Count: count})
		require.NoError(t, err)
		if len(r.Messages) == 0 {
			return out
		}
		for _, m := range r.Messages {
			if len(out) > 0 {
				require.Greater(t, m.Offset, out[len(out)-1].Offset, "offsets ascend, no message twice")
			}
			require.True(t, strings.HasPrefix(string(m.Payload), fmt.Sprintf("%d ", m.Offset)), "offset %d keeps its payload", m.Offset)
			out = append(out, m)
		}
		next = out[len(out)-1].Offset + 1
	}
}

// TestCompactedTopicPolls: Ferry's client polls a compacted topic (the
// official Go SDK cannot be fetched in this environment): with every poll
// size, from compacted offsets, First, by timestamp and with consumer
// offsets (Next + auto-commit), it gets exactly the survivors, in order,
// once each. segment.compacted is published and the metrics count.
func TestCompactedTopicPolls(t *testing.T) {
	t.Parallel()
	const n, keys = 1200, 300
	b, c, ks, del := compactedTopic(t, n, keys)
	// Latest per key: survivors outside the active segment are the latest
	// of their key; markers stay within their hour of retention.
	last := map[string]int{}
	for i, k := range ks {
		last[k] = i
	}
	ev := waitEvent(t, c, sysevents.SegmentCompacted, field("topic", "kv"))
	var d sysevents.SegmentCompactedData
	require.NoError(t, ev.DecodeData(&d))
	require.Equal(t, "s", d.Stream)
	require.Zero(t, d.FirstOffset)
	require.Less(t, d.MessagesAfter, d.MessagesBefore)
	require.Less(t, d.BytesAfter, d.BytesBefore)
	require.Equal(t, "streams/s/topics/kv/partitions/0", ev.Subject)

	// Let the pass that published the event finish, and one more.
	passes := compactionPasses(t, b)
	require.Eventually(t, func() bool { return compactionPasses(t, b) >= passes+2 }, time.Minute, 10*time.Millisecond)
	all := pollAll(t, c, 1000)
	require.NotEmpty(t, all)
	var gaps int
	for i, m := range all {
		k, _ := m.Key()
		require.Equal(t, ks[m.Offset], string(k.Data))
		if i > 0 && m.Offset != all[i-1].Offset+1 {
			gaps++
		}
	}
	require.NotZero(t, gaps, "compaction left gaps")
	// Every key's latest message is there, whatever else survived.
	have := map[uint64]bool{}
	for _, m := range all {
		have[m.Offset] = true
	}
	for k, i := range last {
		require.True(t, have[uint64(i)], "key %s: latest at %d present (deleted=%v)", k, i, del[i])
	}
	for _, count := range []uint32{1, 3, 17, 256} {
		got := pollAll(t, c, count)
		require.Equal(t, offsetsOfMsgs(all), offsetsOfMsgs(got), "polls of %d", count)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(7)), Stream: iggy.NamedID("s"),
		Topic: iggy.NamedID("kv"), Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 5}
	r, err := c.PollMessages(ctx, req)
	require.NoError(t, err)
	require.Equal(t, offsetsOfMsgs(all[:5]), offsetsOfMsgs(r.Messages), "First starts at the first survivor")
	req.Strategy = iggy.AtTimestamp(0)
	r, err = c.PollMessages(ctx, req)
	require.NoError(t, err)
	require.Equal(t, offsetsOfMsgs(all[:5]), offsetsOfMsgs(r.Messages), "by timestamp")
	// A consumer that stores its offsets reads every survivor once.
	req.Strategy, req.AutoCommit, req.Count = iggy.Next(), true, 7
	var viaNext []iggy.Message
	for {
		r, err := c.PollMessages(ctx, req)
		require.NoError(t, err)
		if len(r.Messages) == 0 {
			break
		}
		viaNext = append(viaNext, r.Messages...)
	}
	require.Equal(t, offsetsOfMsgs(all), offsetsOfMsgs(viaNext), "Next with auto-commit")

	rec := httptest.NewRecorder()
	b.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Contains(t, rec.Body.String(), `iggy_broker_compaction_segments_total{stream="s",topic="kv"}`)
	require.Contains(t, rec.Body.String(), `iggy_broker_compaction_bytes_before_total{stream="s",topic="kv"}`)
}

// compactionPasses reads iggy_broker_compaction_passes_total of s/kv.
func compactionPasses(t *testing.T, b *broker.Broker) float64 {
	rec := httptest.NewRecorder()
	b.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, `iggy_broker_compaction_passes_total{stream="s",topic="kv"} `); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return 0
}

func offsetsOfMsgs(ms []iggy.Message) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Offset
	}
	return out
}

// TestCompactOptionPersisted: the topic option survives a restart and is
// shown in the topic's details; a plain topic is not compacted.
func TestCompactOptionPersisted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := brokertest.Start(t, brokertest.DataDir(dir))
	c := client(t, b.Addr(), "iggy", "iggy")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("s"), "kv", 1, iggy.TopicCompact(true), iggy.TopicCompactTombstoneRetention(time.Minute))
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("s"), "plain", 1)
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("s"), "bad", 1, iggy.TopicRawOption("ferry.compact", iggy.StringValue("maybe")))
	require.ErrorContains(t, err, "invalid option value")
	c.Close()
	require.NoError(t, b.Close())

	b = brokertest.Start(t, brokertest.DataDir(dir))
	c = client(t, b.Addr(), "iggy", "iggy")
	td, err := c.GetTopic(ctx, iggy.NamedID("s"), iggy.NamedID("kv"))
	require.NoError(t, err)
	v, ok := wire.Lookup(td.Explicit, "ferry.compact")
	require.True(t, ok && v.Bool(), "compaction persisted: %v", td.Explicit)
	_, ok = wire.Lookup(td.Explicit, "ferry.compact_tombstone_retention")
	require.True(t, ok)
	td, err = c.GetTopic(ctx, iggy.NamedID("s"), iggy.NamedID("plain"))
	require.NoError(t, err)
	for _, e := range append(td.Explicit, td.Derived...) {
		require.False(t, strings.HasPrefix(string(e.Key.Data), "ferry."), "a topic that did not ask shows no extension")
	}
}
