package live_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/live"
)

// metric reads one series of the broker's metrics (0 when absent).
func metric(t *testing.T, b *broker.Broker, series string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	b.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return 0
}

// TestMapCatchUpOverCompactedTopic: a Map catching up on a compacted
// topic of the embedded broker reads only the messages compaction left
// (the broker's messages-out counter grows by exactly that many) and ends
// with the latest value of every key, deleted keys absent.
func TestMapCatchUpOverCompactedTopic(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := brokertest.Start(t, brokertest.InMemory(), brokertest.Config(func(c *broker.Config) {
		c.CompactionInterval = 50 * time.Millisecond
	}))
	admin, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
	require.NoError(t, err)
	defer func() { _ = admin.Close() }()
	_, err = admin.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = admin.CreateTopic(ctx, iggy.NamedID("s"), "kv", 1, iggy.TopicSegmentSize(1<<20), iggy.TopicCompact(true),
		iggy.TopicCompactTombstoneRetention(time.Hour))
	require.NoError(t, err)

	want := map[string]string{}
	r := rand.New(rand.NewPCG(1, 2))
	pad := strings.Repeat("p", 4<<10)
	for i := 0; i < 1200; i += 50 {
		var msgs []iggy.Message
		for j := i; j < i+50; j++ {
			k := fmt.Sprintf("k%d", r.IntN(200))
			hs := []iggy.Entry{iggy.Header(live.KeyHeader, iggy.StringValue(k))}
			payload := fmt.Sprintf("%d %s", j, pad)
			if r.IntN(10) == 0 {
				hs = append(hs, iggy.Header(live.DeletedHeader, iggy.BoolValue(true)))
				delete(want, k)
			} else {
				want[k] = payload
			}
			msgs = append(msgs, iggy.Message{Payload: []byte(payload), Headers: hs})
		}
		_, err := admin.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("kv"), iggy.ToPartition(0), msgs)
		require.NoError(t, err)
	}
	segments := `iggy_broker_compaction_segments_total{stream="s",topic="kv"}`
	passes := `iggy_broker_compaction_passes_total{stream="s",topic="kv"}`
	require.Eventually(t, func() bool { return metric(t, b, segments) > 0 }, time.Minute, 10*time.Millisecond)
	p := metric(t, b, passes)
	require.Eventually(t, func() bool { return metric(t, b, passes) >= p+2 }, time.Minute, 10*time.Millisecond)

	// What survives, polled the way any client does.
	var survivors int
	for next := uint64(0); ; {
		rep, err := admin.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(9)),
			Stream: iggy.NamedID("s"), Topic: iggy.NamedID("kv"), Partition: iggy.Partition(0),
			Strategy: iggy.AtOffset(next), Count: 100})
		require.NoError(t, err)
		if len(rep.Messages) == 0 {
			break
		}
		survivors += len(rep.Messages)
		next = rep.Messages[len(rep.Messages)-1].Offset + 1
	}
	require.Less(t, survivors, 1200, "compaction removed messages")

	out := `iggy_broker_messages_out_total{stream="s",topic="kv"}`
	before := metric(t, b, out)
	h, err := live.Connect(ctx, "iggy://iggy:iggy@"+b.Addr())
	require.NoError(t, err)
	defer func() { _ = h.Close() }()
	m, err := h.Map(ctx, iggy.NamedID("s"), iggy.NamedID("kv"), live.StringKey, live.WithDeletion(live.IsDeleted))
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close(ctx)) }()
	events := 0
	for !closed(m.Ready()) {
		e, err := m.Next(ctx)
		require.NoError(t, err)
		require.True(t, e.CatchUp)
		events++
	}
	require.Equal(t, len(want), events, "one catch-up event per live key")
	require.Equal(t, want, contents(m), "the latest value of every key, deleted keys absent")
	require.Equal(t, float64(survivors), metric(t, b, out)-before, "the catch-up read only the survivors")
}
