package dlq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/dlq"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/runtime"
)

// server is an embedded broker that deduplicates by id, as ferry run's,
// and a client of it.
func server(t *testing.T) (context.Context, *iggy.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	b, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Dedup: broker.Dedup{MaxEntries: 1000}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	cl, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return ctx, cl
}

// sinkLetter is a dead letter as the runtime writes a sink's: the
// original id, payload and headers, and the ferry.dlq.* ones.
func sinkLetter(payload, key string, offset uint64) iggy.Message {
	hs := []header.Header{header.New("trace", header.StringValue("t-"+payload))}
	if key != "" {
		hs = append(hs, header.New(iggy.KeyHeader, header.StringValue(key)))
	}
	hs = append(hs,
		header.New(runtime.HeaderDLQStream, header.StringValue("s")),
		header.New(runtime.HeaderDLQTopic, header.StringValue("t")),
		header.New(runtime.HeaderDLQPartition, header.Uint32Value(0)),
		header.New(runtime.HeaderDLQOffset, header.Uint64Value(offset)),
		header.New(runtime.HeaderDLQError, header.StringValue("refused "+payload)),
		header.New(runtime.HeaderDLQConnector, header.StringValue("k")),
		header.New(runtime.HeaderDLQTimestamp, header.StringValue("1700000000000000")))
	return iggy.Message{ID: uuid.New(), Payload: []byte(payload), Headers: hs}
}

func count(t *testing.T, ctx context.Context, cl *iggy.Client, stream, topic string) uint64 {
	t.Helper()
	tp, err := cl.GetTopic(ctx, iggy.NamedID(stream), iggy.NamedID(topic))
	require.NoError(t, err)
	return tp.MessagesCount
}

// all reads every message of a topic, over its partitions.
func all(t *testing.T, ctx context.Context, cl *iggy.Client, stream, topic string) []iggy.Message {
	t.Helper()
	tp, err := cl.GetTopic(ctx, iggy.NamedID(stream), iggy.NamedID(topic))
	require.NoError(t, err)
	var out []iggy.Message
	for _, p := range tp.Partitions {
		r, err := cl.PollMessages(ctx, iggy.PollRequest{Consumer: iggy.SingleConsumer(iggy.NumericID(99)),
			Stream: iggy.NamedID(stream), Topic: iggy.NamedID(topic), Partition: iggy.Partition(p.ID), Strategy: iggy.First(), Count: 1000})
		require.NoError(t, err)
		for _, m := range r.Messages {
			m.Payload = append([]byte(nil), m.Payload...)
			out = append(out, m)
		}
	}
	return out
}

// Letters of a sink (with and without keys, on a dead-letter topic of
// two partitions) and of a source are listed, described and replayed:
// a one-message replay leaves the replay offset alone; a bulk replay
// moves it, and replays repeated from the start are stored once by a
// deduplicating broker, keyless letters too, on a destination of several
// partitions.
func TestDeadLetterReplay(t *testing.T) {
	t.Parallel()
	ctx, cl := server(t)
	_, err := cl.CreateStream(ctx, "s")
	require.NoError(t, err)
	for name, parts := range map[string]uint32{"t": 3, "k_dead_letter": 2, "other": 1} {
		_, err = cl.CreateTopic(ctx, iggy.NamedID("s"), name, parts)
		require.NoError(t, err)
	}
	letters := map[uint32][]iggy.Message{
		0: {sinkLetter("a", "", 10), sinkLetter("b", "kb", 11), sinkLetter("c", "", 12)},
		1: {sinkLetter("d", "", 13)},
	}
	src := sinkLetter("from-source", "", 0)
	src.Headers = header.Set(src.Headers, runtime.HeaderDLQSourceIndex, header.Uint32Value(4))
	letters[1] = append(letters[1], src)
	for p, msgs := range letters {
		_, err := cl.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("k_dead_letter"), iggy.ToPartition(p), msgs)
		require.NoError(t, err)
	}

	topics, err := dlq.Topics(ctx, cl, "")
	require.NoError(t, err)
	require.Len(t, topics, 1)
	require.Equal(t, "k_dead_letter", topics[0].Topic)
	require.Equal(t, uint64(5), topics[0].Messages)
	require.Equal(t, uint64(0), topics[0].Replayed)
	require.Equal(t, []dlq.Partition{{Partition: 0, Messages: 3, NextOffset: 3}, {Partition: 1, Messages: 2, NextOffset: 2}}, topics[0].Partitions)
	none, err := dlq.Topics(ctx, cl, "nosuch")
	require.NoError(t, err)
	require.Empty(t, none)

	read, err := dlq.Read(ctx, cl, "s", "k_dead_letter", 1, 1)
	require.NoError(t, err)
	require.Len(t, read, 2, "one per partition from offset 1")
	require.Equal(t, "b", read[0].Payload)
	require.Equal(t, "refused b", read[0].Error)
	require.Equal(t, uint64(11), *read[0].OrigOffset)
	require.Equal(t, "2023-11-14T22:13:20Z", read[0].At)
	require.Equal(t, uint64(4), *read[1].SourceIndex)
	newest, err := dlq.ReadNewest(ctx, cl, topics[0], 2)
	require.NoError(t, err)
	var places []string
	for _, l := range newest {
		places = append(places, fmt.Sprintf("%d/%d %s", l.Partition, l.Offset, l.Payload))
	}
	require.Equal(t, []string{"0/1 b", "0/2 c", "1/0 d", "1/1 from-source"}, places)

	// One letter, in a dry run and for real: the offset stays.
	res, err := dlq.Replay(ctx, cl, dlq.ReplayOptions{Stream: "s", Topic: "k_dead_letter", One: &dlq.Position{Partition: 0, Offset: 2}, DryRun: true})
	require.NoError(t, err)
	wantID := uuid.UUID(dlq.ReplayID("s", "k_dead_letter", 0, 2, letters[0][2].ID)).String()
	require.Equal(t, dlq.ReplayResult{Replayed: 1, To: map[string]int{"s/t": 1}, DryRun: true,
		Messages: []dlq.Sent{{Partition: 0, Offset: 2, ID: wantID, To: "s/t"}}}, res)
	require.Zero(t, count(t, ctx, cl, "s", "t"), "a dry run sends nothing")
	res, err = dlq.Replay(ctx, cl, dlq.ReplayOptions{Stream: "s", Topic: "k_dead_letter", One: &dlq.Position{Partition: 0, Offset: 2}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Replayed)
	require.Equal(t, uint64(1), count(t, ctx, cl, "s", "t"))
	st, err := dlq.Stat(ctx, cl, "s", "k_dead_letter")
	require.NoError(t, err)
	require.Zero(t, st.Replayed, "a one-message replay does not move the replay offset")
	_, err = dlq.Replay(ctx, cl, dlq.ReplayOptions{Stream: "s", Topic: "k_dead_letter", One: &dlq.Position{Partition: 0, Offset: 3}})
	require.ErrorIs(t, err, dlq.ErrNoLetter)

	// All of them: the one replayed before is sent again under its id and
	// stored once.
	var seen []dlq.Sent
	res, err = dlq.Replay(ctx, cl, dlq.ReplayOptions{Stream: "s", Topic: "k_dead_letter", Sent: func(s dlq.Sent) { seen = append(seen, s) }})
	require.NoError(t, err)
	require.Equal(t, 5, res.Replayed)
	require.Equal(t, map[string]int{"s/t": 5}, res.To)
	require.Equal(t, res.Messages, seen)
	require.Equal(t, uint64(5), count(t, ctx, cl, "s", "t"))
	st, err = dlq.Stat(ctx, cl, "s", "k_dead_letter")
	require.NoError(t, err)
	require.Equal(t, uint64(5), st.Replayed)
	res, err = dlq.Replay(ctx, cl, dlq.ReplayOptions{Stream: "s", Topic: "k_dead_letter"})
	require.NoError(t, err)
	require.Zero(t, res.Replayed, "nothing left after the offset")
	for range 3 {
		zero := uint64(0)
		res, err = dlq.Replay(ctx, cl, dlq.ReplayOptions{Stream: "s", Topic: "k_dead_letter", From: &zero})
		require.NoError(t, err)
		require.Equal(t, 5, res.Replayed)
	}
	require.Equal(t, uint64(5), count(t, ctx, cl, "s", "t"), "replays repeated from the start are stored once")

	byPayload := map[string]iggy.Message{}
	for _, m := range all(t, ctx, cl, "s", "t") {
		byPayload[string(m.Payload)] = m
	}
	require.Len(t, byPayload, 5)
	for _, orig := range []iggy.Message{letters[0][0], letters[0][1], letters[0][2], letters[1][0]} {
		m := byPayload[string(orig.Payload)]
		v, ok := header.Get(m.Headers, dlq.HeaderReplayOf)
		require.True(t, ok, "%s: %s", orig.Payload, dlq.HeaderReplayOf)
		require.Equal(t, uuid.UUID(orig.ID).String(), string(v.Data))
		require.NotEqual(t, orig.ID, m.ID, "a sink's replay has an id of its own")
		tr, ok := header.Get(m.Headers, "trace")
		require.True(t, ok, "the letter's own headers go on")
		require.Equal(t, "t-"+string(orig.Payload), string(tr.Data))
		_, ok = header.Get(m.Headers, runtime.HeaderDLQError)
		require.False(t, ok, "the ferry.dlq.* headers do not")
	}
	require.Equal(t, src.ID, byPayload["from-source"].ID, "a source's letter keeps its id")
	_, ok := header.Get(byPayload["from-source"].Headers, dlq.HeaderReplayOf)
	require.False(t, ok)
	b := byPayload["b"]
	k, ok := b.Key()
	require.True(t, ok)
	require.Equal(t, "kb", string(k.Data))

	// Elsewhere, and a message that is not a Ferry dead letter.
	_, err = cl.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("k_dead_letter"), iggy.ToPartition(1),
		[]iggy.Message{{ID: uuid.New(), Payload: []byte("stray")}})
	require.NoError(t, err)
	two := uint64(2)
	_, err = dlq.Replay(ctx, cl, dlq.ReplayOptions{Stream: "s", Topic: "k_dead_letter", From: &two})
	require.ErrorIs(t, err, dlq.ErrNotALetter)
	res, err = dlq.Replay(ctx, cl, dlq.ReplayOptions{Stream: "s", Topic: "k_dead_letter", From: &two, ToStream: "s", ToTopic: "other"})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"s/other": 2}, res.To, "c from partition 0, the stray from 1")
	_, err = dlq.Replay(ctx, cl, dlq.ReplayOptions{Stream: "s", Topic: "nosuch"})
	require.True(t, dlq.IsNotFound(err), "%v", err)
}

// FuzzDescribe: Describe reads headers as the server sent them; none
// makes it panic, and a letter always has its place and id.
func FuzzDescribe(f *testing.F) {
	f.Add(uint8(header.KindUint32), []byte{1, 0, 0, 0}, uint8(header.KindString), []byte("17"), []byte("payload"))
	f.Add(uint8(header.KindUint64), []byte{1, 2, 3}, uint8(header.KindRaw), []byte{0xff}, []byte{0xc3, 0x28})
	f.Fuzz(func(t *testing.T, k1 uint8, v1 []byte, k2 uint8, v2 []byte, payload []byte) {
		m := iggy.Message{Offset: 7, Payload: payload, Headers: []header.Header{
			header.New(runtime.HeaderDLQOffset, header.Value{Kind: header.Kind(k1), Data: v1}),
			header.New(runtime.HeaderDLQPartition, header.Value{Kind: header.Kind(k1), Data: v1}),
			header.New(runtime.HeaderDLQTimestamp, header.Value{Kind: header.Kind(k2), Data: v2}),
			header.New(runtime.HeaderDLQError, header.Value{Kind: header.Kind(k2), Data: v2}),
		}}
		l := dlq.Describe(3, &m)
		require.Equal(t, uint32(3), l.Partition)
		require.Equal(t, uint64(7), l.Offset)
		require.Len(t, l.ID, 36)
		require.True(t, l.Payload != "" || l.PayloadHex != "" || len(payload) == 0)
	})
}
