package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// startInternal starts a broker for the package's internal tests.
func startInternal(t testing.TB, cfg Config) (*Broker, *rawclient.Client) {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	b, err := Start(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	c, err := rawclient.Dial(context.Background(), b.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Login("iggy", "iggy")
	require.NoError(t, err)
	require.NotZero(t, c.Session)
	return b, c
}

func mustOK(t testing.TB, c *rawclient.Client, cmd wire.Command, body []byte) []byte {
	t.Helper()
	rep, err := c.Do(cmd, body)
	require.NoError(t, err)
	require.Nil(t, rep.Eviction)
	require.Zero(t, rep.Status(), "%s", cmd)
	if rep.Header.Operation.ResultFramed() {
		payload, code, err := rep.Result()
		require.NoError(t, err)
		require.Zero(t, code)
		return payload
	}
	return rep.Body
}

// fill sends n batches of 64 KiB payloads to partition 0 of stream 0 topic id.
func fill(t *testing.T, c *rawclient.Client, topic uint32, n int) {
	payload := strings.Repeat("x", 64<<10)
	for i := 0; i < n; i++ {
		body, err := wire.AppendSendMessages(nil, wire.NumericID(0), wire.NumericID(topic), wire.ToPartition(0),
			[]wire.Message{{Payload: []byte(payload)}, {Payload: []byte(payload)}, {Payload: []byte(payload)}, {Payload: []byte(payload)}})
		require.NoError(t, err)
		mustOK(t, c, wire.CmdSendMessages, body)
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	for _, memory := range []bool{false, true} {
		cfg := Config{RetentionInterval: time.Hour}
		if !memory {
			cfg.DataDir = t.TempDir()
		}
		b, c := startInternal(t, cfg)
		mustOK(t, c, wire.CmdCreateStream, wire.Marshal(&wire.CreateStream{Name: "s"}))
		mk := func(name string, opts ...wire.Entry) uint32 {
			d := decodeTopic(t, mustOK(t, c, wire.CmdCreateTopic, wire.Marshal(&wire.CreateTopic{
				Stream: wire.NumericID(0), PartitionsCount: 1, Name: name, Options: wire.AppendTLV(nil, opts)})))
			return d.ID
		}
		seg := wire.TopicOption(wire.OptSegmentSize, wire.Uint64Value(1<<20))
		sized := mk("sized", seg, wire.TopicOption(wire.OptMaxTopicSize, wire.Uint64Value(2<<20)))
		expiring := mk("expiring", seg, wire.TopicOption(wire.OptMessageExpiry, wire.Uint64Value(1_000_000)))
		fill(t, c, sized, 20)    // 5 MiB: 5+ segments
		fill(t, c, expiring, 12) // 3 MiB
		part := func(tid uint32) *partition {
			b.mu.RLock()
			defer b.mu.RUnlock()
			return b.streams[0].topics[tid].parts[0]
		}
		beforeSized := len(part(sized).log.Segments())
		require.Greater(t, beforeSized, 3)
		b.sweep(time.Now())
		var total uint64
		segs := part(sized).log.Segments()
		for _, s := range segs {
			total += s.SizeBytes
		}
		require.LessOrEqual(t, total, uint64(2<<20), "memory=%v: max_topic_size enforced", memory)
		require.True(t, segs[len(segs)-1].Active)
		require.Greater(t, part(sized).log.FirstOffset(), uint64(0))
		require.Equal(t, uint64(80), part(sized).log.NextOffset(), "offsets are kept")
		require.Equal(t, uint64(0), part(expiring).log.FirstOffset(), "nothing expired yet")
		expBefore := len(part(expiring).log.Segments())
		require.Greater(t, expBefore, 1)

		b.sweep(time.Now().Add(2 * time.Second))
		segs = part(expiring).log.Segments()
		require.Len(t, segs, 1, "memory=%v: only the active segment is left", memory)
		require.True(t, segs[0].Active)

		// The poll of a dropped range starts at the first offset left.
		r := decodePoll(t, mustOK(t, c, wire.CmdPollMessages, wire.Marshal(&wire.PollMessages{
			Consumer: wire.Consumer{Kind: wire.ConsumerSingle, ID: wire.NumericID(1)}, Stream: wire.NumericID(0),
			Topic: wire.NumericID(sized), Partition: wire.Partition(0), Strategy: wire.AtOffset(0), Count: 1})))
		require.Len(t, r.Messages, 1)
		require.Equal(t, part(sized).log.FirstOffset(), r.Messages[0].Offset)
	}
}

func decodeTopic(t testing.TB, b []byte) wire.TopicDetails {
	var d wire.TopicDetails
	require.NoError(t, wire.Unmarshal(b, &d))
	return d
}

func decodePoll(t testing.TB, b []byte) wire.PollReply {
	var r wire.PollReply
	require.NoError(t, wire.Unmarshal(b, &r))
	return r
}
