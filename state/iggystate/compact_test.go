package iggystate

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/internal/cputime"
	"github.com/ferryhq/ferry/state"
	"github.com/stretchr/testify/require"
)

// compactionPasses reads iggy_broker_compaction_passes_total of
// ferry/<topic>.
func compactionPasses(t *testing.T, b *broker.Broker, topic string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	b.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	prefix := `iggy_broker_compaction_passes_total{stream="ferry",topic="` + topic + `"} `
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	return 0
}

func countMessages(t *testing.T, c *iggy.Client, topic string) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for next := uint64(0); ; {
		r, err := c.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)),
			Stream: iggy.NamedID("ferry"), Topic: iggy.NamedID(topic), Partition: iggy.Partition(0),
			Strategy: iggy.AtOffset(next), Count: 1000})
		require.NoError(t, err)
		if len(r.Messages) == 0 {
			return n
		}
		n += len(r.Messages)
		next = r.Messages[len(r.Messages)-1].Offset + 1
	}
}

// TestCompactionKeepsTheWinner: on Ferry's broker the state topic is
// created compacted. Epoch 1 saves many states, epoch 2 takes over and
// saves, and then a stale epoch-1 record lands after epoch 2's (a late
// write of the old holder). After the broker has compacted the sealed
// segments, most records are gone, and a store opened anew still loads
// epoch 2's last state, not the stale record that came after it.
func TestCompactionKeepsTheWinner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := brokertest.Start(t, brokertest.Config(func(c *broker.Config) { c.CompactionInterval = 50 * time.Millisecond }))
	c := dial(t, b)
	const topic = "compact"
	opts := []Option{WithTopicOptions(iggy.TopicSegmentSize(1<<20), iggy.TopicCompactTombstoneRetention(time.Hour))}
	pad := bytes.Repeat([]byte("x"), 16<<10)
	data := func(s string) []byte { return append([]byte(s+" "), pad...) }

	old := openTestStore(t, c, topic, opts...)
	require.NoError(t, old.SetEpoch("src", 1))
	var v state.Version
	var err error
	for i := range 100 { // ~1.6 MiB: more than one segment
		v, err = old.Save(ctx, "src", data(fmt.Sprintf("old-%d", i)), v)
		require.NoError(t, err)
	}
	nw := openTestStore(t, c, topic, opts...)
	require.NoError(t, nw.Claim(ctx, "src", 2))
	st, err := nw.Load(ctx, "src")
	require.NoError(t, err)
	for i := range 5 {
		st.Version, err = nw.Save(ctx, "src", data(fmt.Sprintf("new-%d", i)), st.Version)
		require.NoError(t, err)
	}
	want := st.Version
	// The stale holder's late record, appended as its Save would have.
	stale := appendEnvelope(nil, envelope{epoch: 1, seq: 1000, key: "src", data: data("stale")})
	_, err = c.SendMessages(ctx, iggy.NamedID("ferry"), iggy.NamedID(topic), iggy.ToPartition(0), []iggy.Message{{
		Payload: stale, Headers: []iggy.Entry{iggy.Header(iggy.KeyHeader, iggy.StringValue("src@1"))}}})
	require.NoError(t, err)
	// Another key's saves seal the segments holding all of the above.
	filler := openTestStore(t, c, topic, opts...)
	var fv state.Version
	for i := range 100 {
		fv, err = filler.Save(ctx, "filler", data(fmt.Sprintf("f-%d", i)), fv)
		require.NoError(t, err)
	}
	d, err := c.GetTopic(ctx, iggy.NamedID("ferry"), iggy.NamedID(topic))
	require.NoError(t, err)
	written := int(d.Partitions[0].CurrentOffset + 1) // every offset, compacted since or not
	passes := compactionPasses(t, b, topic)
	require.Eventually(t, func() bool { return compactionPasses(t, b, topic) >= passes+2 }, time.Minute, 10*time.Millisecond)
	left := countMessages(t, c, topic)
	require.Less(t, left, written/2, "compaction removed most records (%d of %d left)", left, written)

	re := openTestStore(t, c, topic)
	got, err := re.Load(ctx, "src")
	require.NoError(t, err)
	require.Equal(t, want, got.Version)
	require.Equal(t, data("new-4"), got.Data)
	got, err = re.Load(ctx, "filler")
	require.NoError(t, err)
	require.Equal(t, data("f-99"), got.Data)
	t.Logf("%d records written, %d after compaction", written, left)
}

// FuzzEnvelope: the decoder never panics, refuses what it cannot read
// with an error, and what it accepts encodes back to the same bytes.
func FuzzEnvelope(f *testing.F) {
	f.Add(appendEnvelope(nil, envelope{epoch: 3, seq: 9, key: "src", data: []byte("pos=1")}))
	f.Add(appendEnvelope(nil, envelope{deleted: true, epoch: 1, seq: 2, key: "a@1"}))
	f.Add(appendEnvelope(nil, envelope{key: "k"}))
	full := appendEnvelope(nil, envelope{epoch: 1, seq: 1, key: "k", data: []byte("abc")})
	f.Add(full[:len(full)-1])
	f.Add([]byte("FSTE\x02"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		e, err := decodeEnvelope(p)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.Equal(t, p, appendEnvelope(nil, e))
		require.NotEmpty(t, e.key)
		require.LessOrEqual(t, len(e.key), state.MaxKeyLen)
	})
}

// TestEnvelopeErrors: each kind of damage is named.
func TestEnvelopeErrors(t *testing.T) {
	t.Parallel()
	good := appendEnvelope(nil, envelope{epoch: 1, seq: 1, key: "k", data: []byte("abc")})
	flip := func(i int, b byte) []byte { p := bytes.Clone(good); p[i] = b; return p }
	for i, tc := range []struct {
		p    []byte
		want string
	}{
		{good[:10], "shorter than"},
		{flip(0, 'X'), "does not start with"},
		{flip(4, 9), "format version 9"},
		{flip(5, 4), "unknown flags"},
		{flip(len(good)-6, 'z'), "checksum"},
	} {
		_, err := decodeEnvelope(tc.p)
		require.ErrorContains(t, err, tc.want, "case %d", i)
	}
	e, err := decodeEnvelope(good)
	require.NoError(t, err)
	require.Equal(t, envelope{epoch: 1, seq: 1, key: "k", data: []byte("abc")}, e)
}

// BenchmarkSave: one Save of a 100-byte state after another against the
// embedded broker over loopback TCP (a catch-up poll and a send per
// Save), in memory and on disk (the default fsync interval). cpu-µs/op is
// the client's and the broker's CPU together.
func BenchmarkSave(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []brokertest.Option
	}{{"memory", []brokertest.Option{brokertest.InMemory()}}, {"disk", nil}} {
		b.Run(bc.name, func(b *testing.B) {
			br := brokertest.Start(b, bc.opts...)
			s := openTestStore(b, dial(b, br), "bench")
			ctx := context.Background()
			data := bytes.Repeat([]byte("s"), 100)
			var v state.Version
			var err error
			start := cputime.Process()
			for b.Loop() {
				if v, err = s.Save(ctx, "src", data, v); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cputime.Process()-start).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}
