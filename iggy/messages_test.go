package iggy_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
)

func offsetsOf(msgs []iggy.Message) []uint64 {
	out := make([]uint64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Offset
	}
	return out
}

func TestPollStrategies(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)
	consumer := iggy.SingleConsumer(iggy.NumericID(7))

	first, err := c.SendMessages(ctx, s, tp, iggy.ToPartition(0), payloads("a", 5))
	require.NoError(t, err)
	require.Zero(t, first.BaseOffset)
	// The second batch must get a later append time than the first.
	all, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: consumer, Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100,
	})
	require.NoError(t, err)
	for {
		time.Sleep(time.Millisecond)
		if time.Now().After(all.Messages[4].Timestamp) {
			break
		}
	}
	second, err := c.SendMessages(ctx, s, tp, iggy.ToPartition(0), payloads("b", 5))
	require.NoError(t, err)
	require.EqualValues(t, 5, second.BaseOffset)
	all, err = c.PollMessages(ctx, iggy.PollRequest{
		Consumer: consumer, Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100,
	})
	require.NoError(t, err)
	require.Len(t, all.Messages, 10)
	require.EqualValues(t, 9, all.CurrentOffset)
	require.True(t, all.Messages[5].Timestamp.After(all.Messages[4].Timestamp))

	require.NoError(t, c.StoreConsumerOffset(ctx, consumer, s, tp, iggy.Partition(0), 6))
	cases := []struct {
		name     string
		strategy iggy.PollingStrategy
		count    uint32
		want     []uint64
	}{
		{"first", iggy.First(), 3, []uint64{0, 1, 2}},
		{"offset", iggy.AtOffset(3), 4, []uint64{3, 4, 5, 6}},
		{"offset past the end", iggy.AtOffset(10), 4, []uint64{}},
		{"last", iggy.Last(), 3, []uint64{7, 8, 9}},
		{"next", iggy.Next(), 10, []uint64{7, 8, 9}},
		{"timestamp", iggy.AtTimestamp(uint64(all.Messages[5].Timestamp.UnixMicro())), 100, []uint64{5, 6, 7, 8, 9}},
		{"timestamp zero", iggy.AtTimestamp(0), 2, []uint64{0, 1}},
	}
	for i, tc := range cases {
		r, err := c.PollMessages(ctx, iggy.PollRequest{
			Consumer: consumer, Stream: s, Topic: tp,
			Partition: iggy.Partition(0), Strategy: tc.strategy, Count: tc.count,
		})
		require.NoError(t, err, "case %d %s", i, tc.name)
		require.Equal(t, tc.want, offsetsOf(r.Messages), "case %d %s", i, tc.name)
		require.Zero(t, r.PartitionID, "case %d %s", i, tc.name)
	}
	r, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: consumer, Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.AtOffset(2), Count: 1,
	})
	require.NoError(t, err)
	require.Equal(t, "a-2", string(r.Messages[0].Payload))

	// Auto-commit stores the last offset returned.
	other := iggy.SingleConsumer(iggy.NamedID("auto"))
	r, err = c.PollMessages(ctx, iggy.PollRequest{
		Consumer: other, Stream: s, Topic: tp,
		Strategy: iggy.First(), Count: 4, AutoCommit: true,
	})
	require.NoError(t, err)
	require.Len(t, r.Messages, 4)
	o, err := c.GetConsumerOffset(ctx, other, s, tp, iggy.AnyPartition())
	require.NoError(t, err)
	require.EqualValues(t, 3, o.StoredOffset)

	_, err = c.PollMessages(ctx, iggy.PollRequest{
		Consumer: consumer, Stream: s, Topic: tp,
		Partition: iggy.Partition(5), Strategy: iggy.First(), Count: 1,
	})
	require.ErrorIs(t, err, iggy.ErrPartitionNotFound)
	_, err = c.PollMessages(ctx, iggy.PollRequest{
		Consumer: consumer, Stream: s, Topic: iggy.NumericID(9),
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 1,
	})
	require.ErrorIs(t, err, iggy.ErrTopicNotFound)
	_, err = c.PollMessages(ctx, iggy.PollRequest{
		Consumer: consumer, Stream: iggy.NamedID("nope"), Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 1,
	})
	require.ErrorIs(t, err, iggy.ErrStreamNotFound)
	_, err = c.PollMessages(ctx, iggy.PollRequest{
		Consumer: consumer, Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.PollingStrategy{Kind: 9}, Count: 1,
	})
	require.ErrorContains(t, err, "polling strategy kind 9")
}

func TestPartitioningKinds(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 3)

	var got []uint32
	for range 4 {
		conf, err := c.SendMessages(ctx, s, tp, iggy.Balanced(), payloads("b", 2))
		require.NoError(t, err)
		got = append(got, conf.Partition)
	}
	require.Equal(t, []uint32{0, 1, 2, 0}, got, "balanced is round robin on the client")

	conf, err := c.SendMessages(ctx, s, tp, iggy.ToPartition(2), payloads("p", 1))
	require.NoError(t, err)
	require.EqualValues(t, 2, conf.Partition)

	key := []byte("order-key-1")
	want := wire.PartitionForKey(key, 3)
	for range 2 {
		conf, err := c.SendMessages(ctx, s, tp, iggy.ByKey(key), payloads("k", 1))
		require.NoError(t, err)
		require.Equal(t, want, conf.Partition)
	}
	r, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: s, Topic: tp,
		Partition: iggy.Partition(want), Strategy: iggy.First(), Count: 100,
	})
	require.NoError(t, err)
	var keyed int
	for _, m := range r.Messages {
		if strings.HasPrefix(string(m.Payload), "k-") {
			keyed++
		}
	}
	require.Equal(t, 2, keyed)

	_, err = c.SendMessages(ctx, s, tp, iggy.ByKey(nil), payloads("k", 1))
	require.ErrorContains(t, err, "partitioning")
	_, err = c.SendMessages(ctx, s, tp, iggy.ToPartition(3), payloads("x", 1))
	require.ErrorIs(t, err, iggy.ErrResourceNotFound)
	_, err = c.SendMessages(ctx, s, iggy.NamedID("nope"), iggy.Balanced(), payloads("x", 1))
	require.ErrorIs(t, err, iggy.ErrTopicNotFound)
}

// TestBalancedFollowsPartitionChanges is the upstream scenario: the
// cached count is dropped after create/delete partitions, the cursor is
// kept, so the confirmed partitions are 0, 1, 0.
func TestBalancedFollowsPartitionChanges(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)
	send := func() uint32 {
		conf, err := c.SendMessages(ctx, s, tp, iggy.Balanced(), payloads("m", 1))
		require.NoError(t, err)
		return conf.Partition
	}
	var got []uint32
	got = append(got, send())
	require.NoError(t, c.CreatePartitions(ctx, s, tp, 2))
	got = append(got, send())
	require.NoError(t, c.DeletePartitions(ctx, s, tp, 2))
	got = append(got, send())
	require.Equal(t, []uint32{0, 1, 0}, got)
}

func TestZeroIDsAndTimestampsAreFilled(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)

	msgs := payloads("m", 50)
	fixed := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	msgs[3].ID = fixed
	before := uint64(time.Now().UnixMicro())
	msgs[4].OriginTimestamp = time.UnixMicro(int64(before - 1000))
	_, err := c.SendMessages(ctx, s, tp, iggy.ToPartition(0), msgs)
	require.NoError(t, err)
	after := uint64(time.Now().UnixMicro())

	r, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 100,
	})
	require.NoError(t, err)
	require.Len(t, r.Messages, 50)
	seen := map[[16]byte]bool{}
	for i, m := range r.Messages {
		require.Equal(t, msgs[i].ID, m.ID, "the caller's slice shows the id sent")
		require.False(t, seen[m.ID], "ids are unique")
		seen[m.ID] = true
		if i == 3 {
			require.Equal(t, fixed, m.ID)
			continue
		}
		u, err := uuid.FromBytes(m.ID[:])
		require.NoError(t, err)
		require.EqualValues(t, 7, u.Version(), "message %d", i)
		require.Equal(t, uuid.RFC4122, u.Variant(), "message %d", i)
		sec, nsec := u.Time().UnixTime()
		ms := uint64(sec*1000 + nsec/1e6)
		require.True(t, ms >= before/1000 && ms <= after/1000+1, "message %d: uuid time %d outside [%d, %d]", i, ms, before/1000, after/1000)
		if i == 4 {
			require.EqualValues(t, before-1000, m.OriginTimestamp.UnixMicro())
		} else {
			origin := uint64(m.OriginTimestamp.UnixMicro())
			require.True(t, origin >= before && origin <= after, "message %d origin %d", i, origin)
			require.Equal(t, msgs[i].OriginTimestamp, m.OriginTimestamp, "the caller's slice shows the origin timestamp sent")
		}
	}
}

func TestHeadersRoundTrip(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)

	entries := []iggy.Entry{
		iggy.Header("content-type", iggy.StringValue("application/json")),
		iggy.Header("attempt", iggy.Uint32Value(3)),
		iggy.Header("deleted", iggy.BoolValue(true)),
		iggy.Header("offset", iggy.Int64Value(-9)),
		iggy.Header("blob", iggy.RawValue([]byte{0, 1, 2})),
	}
	m := iggy.Message{Payload: []byte("payload"), Headers: entries}
	plain := iggy.Message{Payload: []byte("plain")}
	sent := []iggy.Message{m, plain}
	_, err := c.SendMessages(ctx, s, tp, iggy.ToPartition(0), sent)
	require.NoError(t, err)

	r, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10,
	})
	require.NoError(t, err)
	require.Len(t, r.Messages, 2)
	require.Equal(t, "payload", string(r.Messages[0].Payload))
	require.Equal(t, entries, r.Messages[0].Headers)
	require.NoError(t, r.Messages[0].HeadersErr)
	require.Empty(t, r.Messages[1].Headers)
	require.Equal(t, sent[0].Checksum, r.Messages[0].Checksum, "the send sets the checksum")
}

func TestMessageKey(t *testing.T) {
	t.Parallel()
	m := iggy.Message{Headers: []iggy.Entry{iggy.Header(iggy.KeyHeader, iggy.StringValue("k"))}}
	k, ok := m.Key()
	require.True(t, ok)
	require.Equal(t, iggy.StringValue("k"), k)
	m.Headers[0].Value = iggy.RawValue([]byte{1})
	k, ok = m.Key()
	require.True(t, ok)
	require.Equal(t, iggy.RawValue([]byte{1}), k)
	m.Headers[0].Value = iggy.BoolValue(true)
	_, ok = m.Key()
	require.False(t, ok, "a key is a string or raw bytes")
	_, ok = (&iggy.Message{}).Key()
	require.False(t, ok)
}

func TestSendValidation(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 1)

	big := make([]iggy.Entry, 0, 500)
	for i := range 500 {
		big = append(big, iggy.Header(fmt.Sprintf("key-%03d", i), iggy.StringValue(strings.Repeat("v", 200))))
	}
	cases := []struct {
		msgs []iggy.Message
		want error
		text string
	}{
		{nil, iggy.ErrInvalidMessagesCount, "no messages"},
		{[]iggy.Message{{Payload: []byte("ok")}, {}}, iggy.ErrEmptyMessagePayload, "message 1: payload is empty"},
		{[]iggy.Message{{Payload: make([]byte, iggy.MaxPayloadSize+1)}}, iggy.ErrTooBigMessagePayload, "limit 64000000"},
		{[]iggy.Message{{Payload: []byte("x"), Headers: []iggy.Entry{iggy.Header("n", iggy.Value{Kind: wire.KindUint32, Data: []byte{1}})}}},
			wire.ErrInvalidHeaderValue, "message 0: user headers: header 0 value"},
		{[]iggy.Message{{Payload: []byte("x"), Headers: []iggy.Entry{iggy.Header("", iggy.StringValue("x"))}}},
			wire.ErrInvalidKeyValueLength, "message 0: user headers: header 0 key"},
		{[]iggy.Message{{Payload: []byte("x"), Headers: big}}, iggy.ErrTooBigUserHeaders, "user headers are"},
	}
	for i, tc := range cases {
		_, err := c.SendMessages(ctx, s, tp, iggy.ToPartition(0), tc.msgs)
		require.ErrorIs(t, err, tc.want, "case %d", i)
		require.ErrorContains(t, err, tc.text, "case %d", i)
	}
	// Nothing was sent, and the connection is fine.
	r, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10,
	})
	require.NoError(t, err)
	require.Empty(t, r.Messages)

	// A send that exceeds the frame limit is refused locally.
	huge := []iggy.Message{{Payload: bytes.Repeat([]byte{1}, 40<<20)}, {Payload: bytes.Repeat([]byte{2}, 30<<20)}}
	_, err = c.SendMessages(ctx, s, tp, iggy.ToPartition(0), huge)
	require.ErrorContains(t, err, "frame limit")
	require.NoError(t, c.Ping(ctx))
}

// Messages whose origin timestamps span more than MaxTimestampSpread are
// sent as several batches, in order, each keeping its timestamp.
func TestSendMessagesSpanningHours(t *testing.T) {
	b := startBroker(t)
	c := dial(t, b.Addr())
	s, tp := newTopic(t, c, 1)
	t0 := time.UnixMicro(1_700_000_000_000_000)
	stamps := []time.Time{t0, t0.Add(time.Minute), t0.Add(2 * time.Hour), t0.Add(time.Hour), t0.Add(5 * time.Hour), t0.Add(5*time.Hour + time.Second)}
	msgs := make([]iggy.Message, len(stamps))
	for i, ts := range stamps {
		msgs[i] = iggy.Message{Payload: fmt.Appendf(nil, "m%d", i), OriginTimestamp: ts}
	}
	conf, err := c.SendMessages(testCtx(t), s, tp, iggy.ToPartition(0), msgs)
	require.NoError(t, err)
	require.Equal(t, uint32(0), conf.Partition)
	r, err := c.PollMessages(testCtx(t), iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: s, Topic: tp,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10})
	require.NoError(t, err)
	require.Len(t, r.Messages, len(stamps))
	for i, m := range r.Messages {
		require.Equal(t, uint64(i), m.Offset)
		require.Equal(t, fmt.Sprintf("m%d", i), string(m.Payload))
		require.True(t, stamps[i].Equal(m.OriginTimestamp), "message %d: origin %s, want %s", i, m.OriginTimestamp, stamps[i])
	}
}
