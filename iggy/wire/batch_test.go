package wire

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func testMessages(n, size int) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i].ID[0] = byte(i + 1)
		msgs[i].OriginTimestamp = 1_700_000_000_000_000 + uint64(i)
		msgs[i].Payload = []byte(fmt.Sprintf("message %d %s", i, make([]byte, size)))
		if i%2 == 1 {
			msgs[i].Headers = AppendTLV(nil, []Entry{Header("k", StringValue("v"))})
		}
	}
	return msgs
}

func TestBatchRoundTrip(t *testing.T) {
	msgs := testMessages(5, 3)
	b, err := AppendBatch(nil, msgs)
	require.NoError(t, err)

	var c BatchChecker
	h, err := c.Validate(b)
	require.NoError(t, err)
	require.Equal(t, uint32(5), h.Count)
	require.Equal(t, msgs[0].OriginTimestamp, h.OriginTimestamp)
	require.Zero(t, h.BaseOffset)

	c.Stamp(b, 2, 100, 555)
	sum, err := RecordChecksum(b)
	require.NoError(t, err)
	h, _ = DecodeBatchHeader(b)
	require.Equal(t, sum, h.Checksum)
	require.Equal(t, uint64(2), h.PartitionID)

	got, err := AppendRecordMessages(nil, b)
	require.NoError(t, err)
	require.Len(t, got, 5)
	for i, m := range got {
		require.Equal(t, uint64(100+i), m.Offset)
		require.Equal(t, uint64(555), m.Timestamp)
		require.Equal(t, msgs[i].OriginTimestamp, m.OriginTimestamp)
		require.Equal(t, msgs[i].Payload, m.Payload)
		require.Equal(t, msgs[i].Headers, m.Headers)
		require.Equal(t, msgs[i].ID, m.ID)
		require.Equal(t, msgs[i].Checksum, m.Checksum)
	}
}

func TestBatchValidationRejects(t *testing.T) {
	good, err := AppendBatch(nil, testMessages(3, 1))
	require.NoError(t, err)
	var c BatchChecker
	mutate := func(f func(b []byte) []byte) error {
		b := f(append([]byte(nil), good...))
		_, err := c.Validate(b)
		return err
	}
	require.ErrorIs(t, mutate(func(b []byte) []byte { b[BatchHeaderSize+60]++; return b }), ErrInvalidMessageChecksum)
	require.ErrorIs(t, mutate(func(b []byte) []byte { b[24]++; return b }), ErrInvalidBatchChecksum)
	require.ErrorIs(t, mutate(func(b []byte) []byte { b[100] = 1; return b }), ErrInvalidReservedField)
	require.ErrorIs(t, mutate(func(b []byte) []byte { return b[:len(b)-1] }), ErrMalformed)
	require.ErrorIs(t, mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[48:], 0); return b }), ErrInvalidMessagesCount)
	require.ErrorIs(t, mutate(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[48:], 2); return b }), ErrMalformed)
	require.ErrorIs(t, mutate(func(b []byte) []byte { return b[:100] }), ErrMalformed)
}

// zeroDeltas rewrites every frame's offset_delta to 0 and fixes the
// checksums, as a careless producer would send it.
func zeroDeltas(t *testing.T, b []byte) []byte {
	t.Helper()
	b = append([]byte(nil), b...)
	rest := b[BatchHeaderSize:]
	for len(rest) > 0 {
		_, f, r, err := NextFrame(rest)
		require.NoError(t, err)
		binary.LittleEndian.PutUint32(f[24:], 0)
		binary.LittleEndian.PutUint64(f[0:], FrameChecksum(f))
		rest = r
	}
	sum, err := RecordChecksum(b)
	require.NoError(t, err)
	binary.LittleEndian.PutUint64(b[40:], sum)
	return b
}

func TestOffsetDeltas(t *testing.T) {
	t.Parallel()
	good, err := AppendBatch(nil, testMessages(3, 1))
	require.NoError(t, err)
	bad := zeroDeltas(t, good)
	var c BatchChecker
	_, err = c.Validate(bad)
	require.NoError(t, err, "Validate checks checksums and layout only")
	_, err = c.ValidateSend(bad)
	require.ErrorIs(t, err, ErrMalformed)
	require.ErrorContains(t, err, "offset_delta")
	_, err = c.ValidateSend(good)
	require.NoError(t, err)

	_, err = AppendRecordMessages(nil, bad)
	require.ErrorIs(t, err, ErrMalformed, "deltas that do not increase would give messages one offset")
	msgs, err := AppendRecordMessages(nil, good)
	require.NoError(t, err)
	require.Len(t, msgs, 3)
}

func TestBatchTimestampDeltaLimit(t *testing.T) {
	msgs := testMessages(2, 0)
	msgs[1].OriginTimestamp = msgs[0].OriginTimestamp + 1<<33
	_, err := AppendBatch(nil, msgs)
	require.ErrorIs(t, err, ErrInvalidMessageTimestampDelta)
	_, err = AppendBatch(nil, nil)
	require.ErrorIs(t, err, ErrInvalidMessagesCount)
}

func TestSlicedRecord(t *testing.T) {
	b, err := AppendBatch(nil, testMessages(6, 2))
	require.NoError(t, err)
	var c BatchChecker
	_, err = c.Validate(b)
	require.NoError(t, err)
	c.Stamp(b, 0, 40, 7)

	s, err := AppendSlicedRecord(nil, b, 2, 3)
	require.NoError(t, err)
	h, _ := DecodeBatchHeader(s)
	require.Equal(t, uint32(3), h.Count)
	require.Equal(t, uint64(40), h.BaseOffset, "a slice keeps its base offset")
	sum, err := RecordChecksum(s)
	require.NoError(t, err)
	require.Equal(t, sum, h.Checksum)
	msgs, err := AppendRecordMessages(nil, s)
	require.NoError(t, err)
	require.Equal(t, []uint64{42, 43, 44}, []uint64{msgs[0].Offset, msgs[1].Offset, msgs[2].Offset})

	whole, err := AppendSlicedRecord(nil, b, 0, 6)
	require.NoError(t, err)
	require.Equal(t, b, whole)
	_, err = AppendSlicedRecord(nil, b, 5, 2)
	require.Error(t, err)
}

func TestSendMessagesAndPollReply(t *testing.T) {
	msgs := testMessages(4, 0)
	body, err := AppendSendMessages(nil, NumericID(1), NamedID("t"), ToPartition(2), msgs)
	require.NoError(t, err)
	var req SendMessages
	require.NoError(t, Unmarshal(body, &req))
	require.Equal(t, uint32(4), req.Count)
	require.Equal(t, uint32(2), req.Partitioning.PartitionID)
	require.Equal(t, body, req.AppendTo(nil))

	bad := append([]byte(nil), body...)
	binary.LittleEndian.PutUint32(bad, 99)
	var badReq SendMessages
	require.Error(t, Unmarshal(bad, &badReq), "metadata length mismatch")

	var c BatchChecker
	_, err = c.Validate(req.Batch)
	require.NoError(t, err)
	c.Stamp(req.Batch, 2, 0, 1)
	reply := AppendPollReplyHeader(nil, 2, 3, 4)
	reply = append(reply, req.Batch...)
	var pr PollReply
	require.NoError(t, Unmarshal(reply, &pr))
	require.Len(t, pr.Messages, 4)
	require.Equal(t, uint64(3), pr.CurrentOffset)

	wrongCount := AppendPollReplyHeader(nil, 2, 3, 5)
	require.Error(t, Unmarshal(append(wrongCount, req.Batch...), &pr))
	var empty PollReply
	require.NoError(t, Unmarshal(AppendPollReplyHeader(nil, PollResync, 0, 0), &empty))
	require.Equal(t, PollResync, empty.PartitionID)
}

func BenchmarkAppendBatch(b *testing.B) {
	for _, size := range []int{100, 1000} {
		msgs := testMessages(1000, size)
		b.Run(fmt.Sprintf("1000x%dB", size), func(b *testing.B) {
			buf := make([]byte, 0, 1<<21)
			b.SetBytes(int64(1000 * size))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = AppendBatch(buf[:0], msgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidateBatch(b *testing.B) {
	batch, _ := AppendBatch(nil, testMessages(1000, 100))
	var c BatchChecker
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Validate(batch); err != nil {
			b.Fatal(err)
		}
	}
}
