package broker_test

import (
	"encoding/binary"
	"sort"
	"sync"
	"testing"

	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

func TestPollStrategies(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid, tid := setup(t, c, 1)
	for i := 0; i < 3; i++ {
		send(t, c, sid, tid, wire.ToPartition(0), numbered("m", 4*i, 4)...)
	}
	base := wire.PollMessages{Consumer: single(5), Stream: sid, Topic: tid, Partition: wire.Partition(0)}
	all := poll(t, c, withStrategy(base, wire.First(), 100))
	require.Equal(t, numbered("m", 0, 12), payloads(all))
	ts := all.Messages[4].Timestamp // base_timestamp of the second batch
	require.GreaterOrEqual(t, ts, all.Messages[3].Timestamp)

	cases := []struct {
		name     string
		strategy wire.PollingStrategy
		count    uint32
		want     []uint64
	}{
		{"offset mid-batch", wire.AtOffset(5), 3, []uint64{5, 6, 7}},
		{"offset across batches", wire.AtOffset(2), 7, []uint64{2, 3, 4, 5, 6, 7, 8}},
		{"offset at the end", wire.AtOffset(11), 5, []uint64{11}},
		{"offset past the end", wire.AtOffset(12), 5, []uint64{}},
		{"first", wire.First(), 2, []uint64{0, 1}},
		{"last", wire.Last(), 3, []uint64{9, 10, 11}},
		{"last more than stored", wire.Last(), 20, seq(0, 12)},
		{"next without a stored offset", wire.Next(), 2, []uint64{0, 1}},
		{"timestamp", wire.AtTimestamp(ts), 100, seq(firstAtOrAfter(all, ts), 12)},
		{"timestamp in the future", wire.AtTimestamp(ts + 3_600_000_000), 10, []uint64{}},
		{"count 0", wire.AtOffset(0), 0, []uint64{}},
	}
	for i, tc := range cases {
		r := poll(t, c, withStrategy(base, tc.strategy, tc.count))
		require.Equal(t, tc.want, offsetsOf(r), "case %d: %s", i, tc.name)
		require.Equal(t, uint32(0), r.PartitionID, "case %d", i)
		require.Equal(t, uint64(11), r.CurrentOffset, "case %d", i)
		for _, m := range r.Messages {
			require.Equal(t, "m"+itoa(m.Offset), string(m.Payload), "case %d", i)
		}
	}

	// A slice keeps the stored record's base offset; the first frame's
	// delta is > 0.
	rep := do(t, c, wire.CmdPollMessages, withStrategy(base, wire.AtOffset(5), 2))
	rec := ok(t, rep)[16:]
	h, err := wire.DecodeBatchHeader(rec)
	require.NoError(t, err)
	require.Equal(t, uint64(4), h.BaseOffset)
	require.Equal(t, uint32(2), h.Count)
	require.Equal(t, uint32(1), binary.LittleEndian.Uint32(rec[wire.BatchHeaderSize+24:]))
	sum, err := wire.RecordChecksum(rec)
	require.NoError(t, err)
	require.Equal(t, sum, h.Checksum, "sliced records carry a recomputed checksum")

	// next resumes after the stored offset; auto-commit never moves back.
	ref := wire.ConsumerOffsetRef{Consumer: single(5), Stream: sid, Topic: tid, Partition: wire.Partition(0)}
	ok(t, do(t, c, wire.CmdStoreConsumerOffset, &wire.StoreConsumerOffset{ConsumerOffsetRef: ref, Offset: 6, Ack: 1}))
	next := withStrategy(base, wire.Next(), 2)
	next.AutoCommit = true
	require.Equal(t, []uint64{7, 8}, offsetsOf(poll(t, c, next)))
	require.Equal(t, []uint64{9, 10}, offsetsOf(poll(t, c, next)))
	back := withStrategy(base, wire.AtOffset(0), 1)
	back.AutoCommit = true
	poll(t, c, back)
	info := decodeAs[wire.ConsumerOffsetInfo](t, ok(t, do(t, c, wire.CmdGetConsumerOffset, &ref)))
	require.Equal(t, uint64(10), info.StoredOffset, "auto-commit is monotonic")
}

func withStrategy(p wire.PollMessages, s wire.PollingStrategy, count uint32) wire.PollMessages {
	p.Strategy, p.Count = s, count
	return p
}

func seq(from, to uint64) []uint64 {
	out := []uint64{}
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func firstAtOrAfter(r wire.PollReply, ts uint64) uint64 {
	for _, m := range r.Messages {
		if m.Timestamp >= ts {
			return m.Offset
		}
	}
	return 0
}

func itoa(n uint64) string { return numbered("", int(n), 1)[0] }

func TestPollResolution(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	sid, tid := setup(t, c, 2)
	send(t, c, sid, tid, wire.ToPartition(0), "zero")
	send(t, c, sid, tid, wire.ToPartition(1), "one")
	p := wire.PollMessages{Consumer: single(1), Stream: sid, Topic: tid, Strategy: wire.First(), Count: 10}
	r := poll(t, c, p) // no partition: partition 0
	require.Equal(t, uint32(0), r.PartitionID)
	require.Equal(t, []string{"zero"}, payloads(r))

	missing := p
	missing.Stream = wire.NumericID(9)
	denied(t, do(t, c, wire.CmdPollMessages, &missing), 1009)
	missing = p
	missing.Topic = wire.NamedID("nope")
	denied(t, do(t, c, wire.CmdPollMessages, &missing), 2010)
	missing = p
	missing.Partition = wire.Partition(2)
	denied(t, do(t, c, wire.CmdPollMessages, &missing), 3007)

	empty := wire.AppendPollReplyHeader(nil, 0, 0, 0)
	require.Equal(t, empty, ok(t, do(t, c, wire.CmdPollMessages, []byte{1, 2, 3})), "undecodable: empty poll of partition 0")
	g := p
	g.Consumer = groupConsumer(77)
	g.Partition = wire.Partition(1)
	require.Equal(t, empty, ok(t, do(t, c, wire.CmdPollMessages, &g)), "unknown group: empty poll of partition 0")

	// An empty partition polls empty with current offset 0.
	sid2 := wire.NumericID(createStream(t, c, "s2").ID)
	tid2 := wire.NumericID(createTopic(t, c, sid2, "t2", 1).ID)
	r = poll(t, c, wire.PollMessages{Consumer: single(1), Stream: sid2, Topic: tid2, Strategy: wire.Last(), Count: 5})
	require.Empty(t, r.Messages)
	require.Zero(t, r.CurrentOffset)
}

func TestSendPartitioningAndErrors(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	sid, tid := setup(t, c, 3)
	var got []uint32
	for i := 0; i < 4; i++ {
		got = append(got, send(t, c, sid, tid, wire.Balanced(), "b").Partition)
	}
	require.Equal(t, []uint32{0, 1, 2, 0}, got, "balanced is a per-topic round robin")
	named := send(t, c, wire.NamedID("s"), wire.NamedID("t"), wire.ToPartition(2), "by name")
	require.Equal(t, wire.SendConfirmation{Stream: 0, Topic: 0, Partition: 2, BaseOffset: 1}, named)

	body := func() []byte { return sendBody(t, sid, tid, wire.ToPartition(0), "x", "y") }
	corrupt := func(f func(batch []byte)) []byte {
		b := body()
		f(b[len(b)-(wire.BatchHeaderSize+2*(wire.MessageHeaderSize+1)):])
		return b
	}
	cases := []struct {
		name string
		body []byte
		code wire.Code
	}{
		{"missing stream", sendBody(t, wire.NumericID(9), tid, wire.ToPartition(0), "x"), 20},
		{"missing topic", sendBody(t, sid, wire.NumericID(9), wire.ToPartition(0), "x"), 20},
		{"missing partition", sendBody(t, sid, tid, wire.ToPartition(3), "x"), 20},
		{"frame checksum", corrupt(func(b []byte) { b[wire.BatchHeaderSize+wire.MessageHeaderSize] ^= 1 }), 4027},
		{"batch checksum", corrupt(func(b []byte) { b[40] ^= 1 }), 4039},
		{"reserved bytes", corrupt(func(b []byte) { b[100] = 1 }), 4101},
		{"frames do not tile", append(body(), 0), 3},
		{"garbage", []byte{1, 2, 3}, 3},
	}
	for i, tc := range cases {
		t.Logf("case %d: %s", i, tc.name)
		denied(t, do(t, c, wire.CmdSendMessages, tc.body), tc.code)
	}
	require.Equal(t, uint64(2), send(t, c, sid, tid, wire.ToPartition(0), "after").BaseOffset, "refused batches store nothing")
}

func TestConsumerOffsetStatuses(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	sid, tid := setup(t, c, 2)
	ref := func(p wire.OptPartition) wire.ConsumerOffsetRef {
		return wire.ConsumerOffsetRef{Consumer: single(1), Stream: sid, Topic: tid, Partition: p}
	}
	store := func(r wire.ConsumerOffsetRef, off uint64) *wire.StoreConsumerOffset {
		return &wire.StoreConsumerOffset{ConsumerOffsetRef: r, Offset: off, Ack: 1}
	}
	denied(t, do(t, c, wire.CmdStoreConsumerOffset, store(ref(wire.Partition(0)), 0)), 4100) // empty partition
	send(t, c, sid, tid, wire.ToPartition(0), "a", "b")
	denied(t, do(t, c, wire.CmdStoreConsumerOffset, store(ref(wire.Partition(0)), 2)), 4100) // past current
	denied(t, do(t, c, wire.CmdStoreConsumerOffset, store(ref(wire.OptPartition{}), 0)), 20)
	denied(t, do(t, c, wire.CmdStoreConsumerOffset, store(ref(wire.Partition(5)), 0)), 20)
	bad := ref(wire.Partition(0))
	bad.Stream = wire.NumericID(9)
	denied(t, do(t, c, wire.CmdStoreConsumerOffset, store(bad, 0)), 20)
	denied(t, do(t, c, wire.CmdDeleteConsumerOffset, &wire.DeleteConsumerOffset{ConsumerOffsetRef: ref(wire.Partition(0)), Ack: 1}), 3021)
	r5 := ref(wire.Partition(5))
	denied(t, do(t, c, wire.CmdGetConsumerOffset, &r5), 3007)
	require.Empty(t, ok(t, do(t, c, wire.CmdGetConsumerOffset, &bad)))
	r0 := ref(wire.Partition(0))
	require.Empty(t, ok(t, do(t, c, wire.CmdGetConsumerOffset, &r0)))

	// A named consumer is keyed by XXH32 of its name.
	alice := wire.ConsumerOffsetRef{Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NamedID("alice")}, Stream: sid, Topic: tid, Partition: wire.Partition(0)}
	ok(t, do(t, c, wire.CmdStoreConsumerOffset, store(alice, 1)))
	byID := alice
	byID.Consumer = single(wire.NamedConsumerID("alice"))
	require.Equal(t, uint64(1), decodeAs[wire.ConsumerOffsetInfo](t, ok(t, do(t, c, wire.CmdGetConsumerOffset, &byID))).StoredOffset)
	ok(t, do(t, c, wire.CmdDeleteConsumerOffset, &wire.DeleteConsumerOffset{ConsumerOffsetRef: byID, Ack: 0}))
	require.Empty(t, ok(t, do(t, c, wire.CmdGetConsumerOffset, &alice)))
}

func TestConcurrentSends(t *testing.T) {
	t.Parallel()
	b, c := start(t)
	sid, tid := setup(t, c, 2)
	const writers, batches = 6, 20
	var mu sync.Mutex
	bases := map[uint32][]uint64{}
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := login(t, b)
			for i := 0; i < batches; i++ {
				part := uint32(w % 2)
				rep, err := wc.Do(wire.CmdSendMessages, sendBody(t, sid, tid, wire.ToPartition(part), "a", "b", "c"))
				if err != nil || rep.Status() != 0 {
					t.Errorf("writer %d: send failed: %v %+v", w, err, rep)
					return
				}
				var conf wire.SendReply
				if err := wire.Unmarshal(rep.Body, &conf); err != nil || len(conf) != 1 {
					t.Errorf("writer %d: bad confirmation: %v", w, err)
					return
				}
				mu.Lock()
				bases[part] = append(bases[part], conf[0].BaseOffset)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for part, got := range bases {
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		for i, off := range got {
			require.Equal(t, uint64(3*i), off, "partition %d: base offsets are distinct and contiguous", part)
		}
		r := poll(t, c, wire.PollMessages{Consumer: single(0), Stream: sid, Topic: tid, Partition: wire.Partition(part), Strategy: wire.First(), Count: 10000})
		require.Len(t, r.Messages, 3*batches*writers/2)
		for i, m := range r.Messages {
			require.Equal(t, uint64(i), m.Offset)
			if i > 0 {
				require.GreaterOrEqual(t, m.Timestamp, r.Messages[i-1].Timestamp, "timestamps never go backwards")
			}
		}
	}
}

func TestPollManyMessagesAcrossChunks(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	sid, tid := setup(t, c, 1)
	for i := 0; i < 5; i++ {
		send(t, c, sid, tid, wire.ToPartition(0), numbered("n", 300*i, 300)...)
	}
	r := poll(t, c, wire.PollMessages{Consumer: single(1), Stream: sid, Topic: tid, Partition: wire.Partition(0),
		Strategy: wire.AtOffset(10), Count: 1200, AutoCommit: true})
	require.Equal(t, seq(10, 1210), offsetsOf(r))
	require.Equal(t, numbered("n", 10, 1200), payloads(r))
	ref := wire.ConsumerOffsetRef{Consumer: single(1), Stream: sid, Topic: tid, Partition: wire.Partition(0)}
	require.Equal(t, uint64(1209), decodeAs[wire.ConsumerOffsetInfo](t, ok(t, do(t, c, wire.CmdGetConsumerOffset, &ref))).StoredOffset)
}

// A checksum-valid batch whose offset_delta values are not the frames'
// indexes is refused: stored, it would make polls label every message with
// the same offset (a Ferry deviation; upstream stores it).
func TestSendRefusesWrongOffsetDeltas(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	sid, tid := setup(t, c, 1)
	body := sendBody(t, sid, tid, wire.ToPartition(0), "a", "b", "c")
	batch := body[len(body)-(wire.BatchHeaderSize+3*(wire.MessageHeaderSize+1)):]
	rest := batch[wire.BatchHeaderSize:]
	for len(rest) > 0 {
		_, f, r, err := wire.NextFrame(rest)
		require.NoError(t, err)
		binary.LittleEndian.PutUint32(f[24:], 0)
		binary.LittleEndian.PutUint64(f[0:], wire.FrameChecksum(f))
		rest = r
	}
	sum, err := wire.RecordChecksum(batch)
	require.NoError(t, err)
	binary.LittleEndian.PutUint64(batch[40:], sum)

	denied(t, do(t, c, wire.CmdSendMessages, body), wire.ErrInvalidCommand.Code)
	r := poll(t, c, wire.PollMessages{Consumer: single(1), Stream: sid, Topic: tid, Partition: wire.Partition(0), Strategy: wire.First(), Count: 10})
	require.Empty(t, r.Messages, "the refused batch was stored")

	send(t, c, sid, tid, wire.ToPartition(0), "a", "b", "c")
	r = poll(t, c, wire.PollMessages{Consumer: single(1), Stream: sid, Topic: tid, Partition: wire.Partition(0), Strategy: wire.First(), Count: 10})
	require.Equal(t, []uint64{0, 1, 2}, offsetsOf(r))
}
