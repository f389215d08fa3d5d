package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/iggy/header"
)

func TestHashVectors(t *testing.T) {
	// Reference values of XXH32 and XXH3-64 with seed 0.
	require.Equal(t, uint32(0x02CC5D05), NamedConsumerID(""))
	require.Equal(t, uint32(0x550D7456), NamedConsumerID("a"))
	require.Equal(t, uint64(0x2D06800538D394C2), FrameChecksum(make([]byte, 8)))
	require.Equal(t, NamedConsumerID("order-key-1")%3, PartitionForKey([]byte("order-key-1"), 3))
}

func TestVersion(t *testing.T) {
	require.Equal(t, uint32(11264), ProtocolVersion)
	require.Equal(t, "0.11.0", FormatVersion(ProtocolVersion))
	require.True(t, VersionCompatible(PackVersion(0, 11, 7), ProtocolVersion))
	require.False(t, VersionCompatible(PackVersion(0, 10, 9), ProtocolVersion))
	require.False(t, VersionCompatible(PackVersion(0, 12, 0), ProtocolVersion))
}

func TestRequestHeaderRoundTrip(t *testing.T) {
	h := RequestHeader{
		Prefix: Prefix{Cluster: U128{1, 2}, View: 3, Release: 4, Replica: 5},
		Size:   300, Client: U128{0xdead, 0xbeef}, RequestChecksum: U128{7, 0},
		Timestamp: 9, Request: 10, Operation: OpNonReplicated, Session: 11, UserID: 12,
		Command: CmdPing,
	}
	b := make([]byte, HeaderSize)
	h.Put(b)
	require.Equal(t, byte(FrameRequest), b[60])
	got, err := DecodeRequestHeader(b)
	require.NoError(t, err)
	require.Equal(t, h, got)

	// A replicated operation carries no code on the wire; the decoder maps it back.
	h.Operation, h.Command = OpCreateTopic, 0
	h.Put(b)
	require.Zero(t, b[196])
	got, err = DecodeRequestHeader(b)
	require.NoError(t, err)
	require.Equal(t, CmdCreateTopic, got.Command)
}

func TestRequestHeaderValidate(t *testing.T) {
	ok := RequestHeader{Client: U128{1, 0}, Operation: OpCreateStream, Session: 1, Request: 1}
	require.NoError(t, ok.Validate())
	cases := []RequestHeader{
		{Operation: OpCreateStream, Session: 1, Request: 1},                     // client 0
		{Client: U128{1, 0}, Operation: 99, Session: 1, Request: 1},             // undefined op
		{Client: U128{1, 0}, Operation: OpRegister, Session: 1},                 // register with session
		{Client: U128{1, 0}, Operation: OpCreateStream, Session: 0, Request: 1}, // no session
		{Client: U128{1, 0}, Operation: OpSendMessages, Session: 1, Request: 0}, // no request id
	}
	for i, c := range cases {
		require.ErrorIs(t, c.Validate(), ErrInvalidHeader, "case %d", i)
	}
	nr := RequestHeader{Client: U128{1, 0}, Operation: OpNonReplicated}
	require.NoError(t, nr.Validate())
}

func TestReplyAndEvictionRoundTrip(t *testing.T) {
	r := ReplyHeader{Size: 260, Client: U128{5, 6}, Op: 7, Commit: 8, Timestamp: 9, Request: 10,
		Operation: OpCreateStream, Status: 1009}
	b := make([]byte, HeaderSize)
	r.Put(b)
	got, err := DecodeReplyHeader(b)
	require.NoError(t, err)
	require.Equal(t, r, got)

	e := Eviction{Client: U128{1, 1}, ServerProtocolMax: ProtocolVersion, ServerProtocolMin: ProtocolVersion, Reason: EvictIncompatibleProtocol}
	e.Put(b)
	require.Equal(t, uint32(HeaderSize), FrameSize(b))
	ge, err := DecodeEviction(b)
	require.NoError(t, err)
	require.Equal(t, e, ge)
	var err2 error = &EvictionError{Reason: EvictInvalidCredentials}
	require.ErrorIs(t, err2, ErrInvalidCredentials)
}

func TestReadFrame(t *testing.T) {
	h := RequestHeader{Size: HeaderSize + 3, Client: U128{1, 0}, Operation: OpNonReplicated, Command: CmdPing}
	frame := make([]byte, HeaderSize, HeaderSize+3)
	h.Put(frame)
	frame = append(frame, 1, 2, 3)
	got, err := ReadFrame(bytes.NewReader(frame), nil, 0)
	require.NoError(t, err)
	require.Equal(t, frame, got)

	_, err = ReadFrame(bytes.NewReader(frame[:HeaderSize+1]), nil, 0)
	require.Error(t, err)

	small := append([]byte(nil), frame[:HeaderSize]...)
	putU32(small[48:], 10)
	_, err = ReadFrame(bytes.NewReader(small), nil, 0)
	require.ErrorIs(t, err, ErrFrameTooSmall)

	putU32(small[48:], 1<<30)
	_, err = ReadFrame(bytes.NewReader(small), nil, 0)
	require.ErrorIs(t, err, ErrFrameTooLarge)
}

// stingyReader serves data and records the largest read it was asked for.
type stingyReader struct {
	data    []byte
	largest int
}

func (r *stingyReader) Read(p []byte) (int, error) {
	r.largest = max(r.largest, len(p))
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// A peer that declares a huge frame and sends little must not make
// ReadFrame allocate the declared size up front.
func TestReadFrameGrowsWithTheBytesThatArrive(t *testing.T) {
	t.Parallel()
	h := RequestHeader{Size: MaxFrameSize, Client: U128{1, 0}, Operation: OpNonReplicated, Command: CmdPing}
	b := make([]byte, HeaderSize)
	h.Put(b)
	r := &stingyReader{data: append(b, make([]byte, 1000)...)}
	_, err := ReadFrame(r, nil, 0)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.LessOrEqual(t, r.largest, 2*readChunk, "the buffer was sized by the declared 64 MiB, not by what arrived")

	// A whole large frame still reads, into a buffer of its size.
	body := bytes.Repeat([]byte{7}, 3*readChunk+5)
	h.Size = uint32(HeaderSize + len(body))
	h.Put(b)
	frame := append(append([]byte(nil), b...), body...)
	got, err := ReadFrame(bytes.NewReader(frame), make([]byte, 0, 300), 0)
	require.NoError(t, err)
	require.Equal(t, frame, got)
}

func TestErrorsIs(t *testing.T) {
	wrapped := fmt.Errorf("get topic: %w", ErrorFor(2011))
	require.ErrorIs(t, wrapped, ErrTopicNotFound)
	require.ErrorIs(t, wrapped, ErrTopicNameNotFound)
	require.NotErrorIs(t, wrapped, ErrStreamNotFound)
	require.ErrorIs(t, ErrorFor(1010), ErrStreamNotFound)
	require.ErrorIs(t, ErrorFor(5003), ErrConsumerGroupNotFound)
	unknown := ErrorFor(60001)
	require.Equal(t, Code(60001), unknown.Code)
	require.Nil(t, ErrorFor(0))
	var e *Error
	require.True(t, errors.As(wrapped, &e))
	require.Equal(t, Code(2011), e.Code)
}

func TestOperations(t *testing.T) {
	require.Equal(t, OpCreateStream, OperationFor(CmdCreateStream))
	require.Equal(t, OpNonReplicated, OperationFor(CmdPing))
	require.Equal(t, OpNonReplicated, OperationFor(60000))
	require.Equal(t, OpRegister, OperationFor(CmdLoginRegisterWithPAT))
	require.Equal(t, OpDeleteSegments, OperationFor(CmdDeleteSegments))
	require.True(t, OpDeleteSegments.Metadata())
	require.False(t, OpDeleteSegments.ResultFramed())
	require.True(t, OpTruncatePartition.ResultFramed())
	require.True(t, OpStoreConsumerOffset.ResultFramed())
	require.False(t, OpSendMessages.ResultFramed())
	require.False(t, OpSendMessages.Metadata())
	require.True(t, OpLogout.Metadata())
	for op := 0; op < 256; op++ {
		o := Operation(op)
		if c, ok := CommandFor(o); ok {
			if c != CmdLoginRegister {
				require.Equal(t, o, OperationFor(c), "operation %d", op)
			}
			require.True(t, o.Valid())
		}
	}
}

func TestResultSection(t *testing.T) {
	p, code, err := SplitResult(append(AppendResultOK(nil), 9, 9))
	require.NoError(t, err)
	require.Zero(t, code)
	require.Equal(t, []byte{9, 9}, p)
	p, code, err = SplitResult(AppendResultErr(nil, 1012))
	require.NoError(t, err)
	require.Equal(t, Code(1012), code)
	require.Empty(t, p)
	_, _, err = SplitResult([]byte{5, 0, 0, 0})
	require.ErrorIs(t, err, ErrMalformed)
	_, _, err = SplitResult([]byte{1})
	require.ErrorIs(t, err, ErrMalformed)
}

func TestRegisterBodies(t *testing.T) {
	r := Register{ProtocolVersion: ProtocolVersion, SDKName: "ferry", SDKVersion: "0.1.0", Username: "iggy", Password: "secret"}
	pw, pat, err := DecodeRegisterBody(Marshal(&r))
	require.NoError(t, err)
	require.Nil(t, pat)
	require.Equal(t, "iggy", pw.Username)
	require.Equal(t, "secret", pw.Password)

	p := RegisterPAT{ProtocolVersion: ProtocolVersion, SDKName: "ferry", SDKVersion: "0.1.0", Token: "tok"}
	pw, pat, err = DecodeRegisterBody(Marshal(&p))
	require.NoError(t, err)
	require.Nil(t, pw)
	require.Equal(t, "tok", pat.Token)

	_, _, err = DecodeRegisterBody([]byte{1, 2})
	require.Error(t, err)

	reply := RegisterReply{UserID: 0, Session: 42, ProtocolVersion: ProtocolVersion, ServerVersion: "0.9.0-edge.5"}
	var got RegisterReply
	require.NoError(t, Unmarshal(Marshal(&reply), &got))
	require.Equal(t, reply, got)
	reply.Session = 0
	require.Error(t, Unmarshal(Marshal(&reply), &got))
}

func roundTrip[T any, P interface {
	*T
	Encodable
	Decodable
}](t *testing.T, v P) {
	t.Helper()
	b := v.AppendTo(nil)
	var got T
	require.NoError(t, Unmarshal(b, P(&got)), "%T", v)
	require.Equal(t, b, P(&got).AppendTo(nil), "%T re-encodes differently", v)
}

func TestPayloadRoundTrips(t *testing.T) {
	opts := AppendTLV(nil, []Entry{TopicOption(OptSegmentSize, Uint64Value(1<<20))})
	s, tp, g := NumericID(1), NamedID("orders"), NamedID("workers")
	roundTrip(t, &StreamRef{s})
	roundTrip(t, &TopicRef{s, tp})
	roundTrip(t, &GroupRef{s, tp, g})
	roundTrip(t, &CreateStream{Name: "s"})
	roundTrip(t, &UpdateStream{Stream: s, Name: "s2"})
	roundTrip(t, &CreateTopic{Stream: s, PartitionsCount: 3, Name: "t", Options: opts})
	roundTrip(t, &UpdateTopic{Stream: s, Topic: tp, Name: "t", Options: opts})
	roundTrip(t, &PartitionsChange{s, tp, 2})
	roundTrip(t, &DeleteSegments{s, tp, 1, 2})
	roundTrip(t, &CreateConsumerGroup{s, tp, "g"})
	roundTrip(t, &PollMessages{Consumer{ConsumerGroup, g}, s, tp, Partition(2), Next(), 10, true})
	roundTrip(t, &ConsumerOffsetRef{Consumer{ConsumerSingle, NumericID(0)}, s, tp, OptPartition{}})
	roundTrip(t, &StoreConsumerOffset{ConsumerOffsetRef{Consumer{ConsumerSingle, NumericID(0)}, s, tp, Partition(1)}, 5, AckQuorum})
	roundTrip(t, &DeleteConsumerOffset{ConsumerOffsetRef{Consumer{ConsumerSingle, NumericID(0)}, s, tp, Partition(1)}, AckNone})
	roundTrip(t, &DescribeOptions{ScopeTopic})
	roundTrip(t, &GetClient{7})
	roundTrip(t, &CreatePAT{"ci", 0})
	roundTrip(t, &DeletePAT{"ci"})
	roundTrip(t, &GetSnapshot{1, []uint8{1}})

	explicit, derived := (&TopicOptions{Compression: 1, Explicit: []string{OptCompression}}).Blocks()
	th := TopicHeader{ID: 1, CreatedAt: 2, PartitionsCount: 2, MessageExpiry: Unlimited, Compression: 1,
		MaxTopicSize: Unlimited, Name: "orders", Explicit: explicit, Derived: derived}
	roundTrip(t, &th)
	roundTrip(t, &TopicDetails{th, []PartitionInfo{{ID: 0, SegmentsCount: 1}, {ID: 1, CurrentOffset: 5}}})
	roundTrip(t, &TopicList{th, th})
	sh := StreamHeader{ID: 1, Name: "s", TopicsCount: 1}
	roundTrip(t, &StreamDetails{sh, []TopicHeader{th}})
	roundTrip(t, &StreamList{sh, sh})
	gh := GroupHeader{ID: 0, PartitionsCount: 3, MembersCount: 1, Name: "g"}
	roundTrip(t, &GroupDetails{gh, []GroupMember{{0, []uint32{0, 1, 2}}}})
	roundTrip(t, &GroupList{gh})
	roundTrip(t, &SyncGroupReply{3, []uint32{0, 2}})
	roundTrip(t, &ConsumerOffsetInfo{1, 2, 3})
	roundTrip(t, &SendReply{{1, 2, 3, 4}})
	roundTrip(t, &ClusterMetadata{"single-node", []ClusterNode{{Name: "iggy-node", IP: "127.0.0.1", TCP: 8090}}})
	roundTrip(t, &ClientInfo{ClientID: 1, UserID: 0, Transport: 1, Address: "127.0.0.1:5", Groups: []ClientGroup{{1, 2, 3}}})
	roundTrip(t, &ClientList{{ClientID: 1, Address: "a"}})
	roundTrip(t, &CreatePATReply{"token"})
	roundTrip(t, &PATList{{"a", 0}, {"b", 5}})
	roundTrip(t, &DescribeOptionsReply{TopicOptionCatalog})
	roundTrip(t, &Stats{ProcessID: 1, Hostname: "h", Caches: []CacheStats{{1, 2, 3, 4, 5, 0.5}}})
}

func TestIdentifierRules(t *testing.T) {
	var got StreamRef
	require.Error(t, Unmarshal([]byte{1, 3, 0, 0, 0}, &got), "numeric length 3")
	require.Error(t, Unmarshal([]byte{2, 0}, &got), "empty name")
	require.Error(t, Unmarshal([]byte{3, 1, 'a'}, &got), "kind 3")
	require.Error(t, Unmarshal([]byte{2, 1, 0xff}, &got), "invalid utf-8")
	require.NoError(t, Unmarshal([]byte{2, 1, 'a'}, &got))
	require.Equal(t, "a", got.Stream.Name())
	require.Equal(t, NumericID(12), ParseID("12"))
	require.Equal(t, NamedID("x1"), ParseID("x1"))
	require.Error(t, NamedID("").Validate())
}

func TestPartitioningRules(t *testing.T) {
	d := NewDecoder([]byte{1, 1, 0})
	d.Partitioning("p")
	require.Error(t, d.Err(), "balanced with a length")
	d = NewDecoder([]byte{3, 0})
	d.Partitioning("p")
	require.Error(t, d.Err(), "empty key")
	d = NewDecoder(ByKey([]byte("k")).AppendTo(nil))
	require.Equal(t, []byte("k"), d.Partitioning("p").Key)
	require.NoError(t, d.Err())
}

func TestTLV(t *testing.T) {
	entries := []Entry{Header("a", StringValue("x")), Header("n", Uint64Value(7)), {Key: header.BinaryKey([]byte{1}), Value: BoolValue(true)}}
	b, err := EncodeTLV(entries)
	require.NoError(t, err)
	got, err := ParseTLV(b)
	require.NoError(t, err)
	require.Equal(t, entries, got)
	v, ok := Lookup(got, "n")
	require.True(t, ok)
	require.Equal(t, "7", v.String())

	_, err = EncodeTLV([]Entry{Header("a", Value{Kind: KindUint64, Data: []byte{1}})})
	require.ErrorIs(t, err, ErrInvalidHeaderValue)
	_, err = ParseTLV(b[:len(b)-1])
	require.ErrorIs(t, err, ErrMalformed)
	_, err = ParseTLV([]byte{0, 1, 0, 0, 0, 'a'})
	require.ErrorIs(t, err, ErrMalformed)

	require.NoError(t, CheckTLV(b))
	require.NoError(t, CheckTLV(nil))
	require.ErrorIs(t, CheckTLV(b[:len(b)-1]), ErrMalformed)
	require.ErrorIs(t, CheckTLV([]byte{0, 1, 0, 0, 0, 'a'}), ErrMalformed)
	require.Zero(t, testing.AllocsPerRun(10, func() { _ = CheckTLV(b) }))
}
