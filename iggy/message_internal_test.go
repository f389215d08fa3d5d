package iggy

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy/header"
	"github.com/ferryhq/ferry/iggy/wire"
)

// A poll converts frames to Messages: µs timestamps to times, encoded
// headers to header values, and a headers block that does not decode to
// HeadersErr on that message alone.
func TestPollReplyConversion(t *testing.T) {
	t.Parallel()
	good := []header.Header{header.New("a", header.StringValue("x")), {Key: header.BinaryKey([]byte{1}), Value: header.Uint64Value(7)}}
	frames := []wire.Message{
		{ID: [16]byte{1}, Payload: []byte("p0"), OriginTimestamp: 1_000_000, Headers: wire.AppendTLV(nil, good)},
		{ID: [16]byte{2}, Payload: []byte("p1"), OriginTimestamp: 1_000_001, Headers: []byte{2, 1, 0}},
		{ID: [16]byte{3}, Payload: []byte("p2"), OriginTimestamp: 1_000_002},
	}
	body := wire.AppendPollReplyHeader(nil, 4, 2, uint32(len(frames)))
	body, err := wire.AppendBatch(body, frames)
	require.NoError(t, err)

	var r PollReply
	require.NoError(t, decodePollReply(body, &r))
	require.EqualValues(t, 4, r.PartitionID)
	require.EqualValues(t, 2, r.CurrentOffset)
	require.Len(t, r.Messages, 3)
	m := r.Messages[0]
	require.Equal(t, [16]byte{1}, m.ID)
	require.Equal(t, "p0", string(m.Payload))
	require.Equal(t, good, m.Headers)
	require.NoError(t, m.HeadersErr)
	require.Equal(t, time.UnixMicro(1_000_000), m.OriginTimestamp)
	require.Equal(t, frames[0].Checksum, m.Checksum)

	require.Nil(t, r.Messages[1].Headers)
	require.ErrorIs(t, r.Messages[1].HeadersErr, wire.ErrMalformed)
	require.ErrorContains(t, r.Messages[1].HeadersErr, "user headers: ")
	require.Equal(t, "p1", string(r.Messages[1].Payload), "the rest of the message is kept")
	require.Nil(t, r.Messages[2].Headers)
	require.NoError(t, r.Messages[2].HeadersErr)
}

// A send encodes what a poll decodes.
func TestSendFrames(t *testing.T) {
	t.Parallel()
	at := time.UnixMicro(1_700_000_000_000_000)
	msgs := []Message{
		{Payload: []byte("a"), Headers: []header.Header{header.New("k", header.BoolValue(true))}, OriginTimestamp: at},
		{Payload: []byte("b"), OriginTimestamp: time.UnixMicro(0)},
	}
	require.NoError(t, prepareMessages(msgs))
	require.Equal(t, at, msgs[0].OriginTimestamp)
	require.NotEqual(t, time.UnixMicro(0), msgs[1].OriginTimestamp, "the epoch, Iggy's 0, means now")
	w := make([]wire.Message, len(msgs))
	toWire(w, msgs)
	require.EqualValues(t, at.UnixMicro(), w[0].OriginTimestamp)
	require.Equal(t, wire.AppendTLV(nil, msgs[0].Headers), w[0].Headers)
	require.Nil(t, w[1].Headers)
	require.Equal(t, wire.MessageHeaderSize+1+len(w[0].Headers), msgs[0].FrameSize())
}
