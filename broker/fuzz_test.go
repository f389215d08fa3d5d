package broker

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// fuzzBroker is one live in-memory broker with a logged-in connection,
// shared by the iterations of a fuzz target.
type fuzzBroker struct {
	b     *Broker
	c     *rawclient.Client
	iters atomic.Int64
}

func newFuzzBroker(f *testing.F) *fuzzBroker {
	b, err := Start(context.Background(), Config{Addr: "127.0.0.1:0", RetentionInterval: time.Hour})
	require.NoError(f, err)
	f.Cleanup(func() { require.NoError(f, b.Close()) })
	fb := &fuzzBroker{b: b}
	fb.reset(f)
	return fb
}

// reconnect opens a fresh logged-in connection.
func (fb *fuzzBroker) reconnect(t testing.TB) {
	if fb.c != nil {
		fb.c.Close()
	}
	c, err := rawclient.Dial(context.Background(), fb.b.Addr())
	require.NoError(t, err)
	_, err = c.Login("iggy", "iggy")
	require.NoError(t, err)
	require.NotZero(t, c.Session)
	fb.c = c
}

// reset empties the model (so fuzzing cannot grow it without bound) and
// creates stream 0 / topic 0 with 2 partitions and group 0.
func (fb *fuzzBroker) reset(t testing.TB) {
	b := fb.b
	b.mu.Lock()
	for id, s := range b.streams {
		delete(b.streams, id)
		for _, tp := range s.topics {
			b.destroyTopic(tp)
		}
	}
	for id, u := range b.users {
		if id != rootUserID {
			delete(b.users, id)
		}
		u.pats = map[string]*pat{}
	}
	b.mu.Unlock()
	fb.reconnect(t)
	mustOK(t, fb.c, wire.CmdCreateStream, wire.Marshal(&wire.CreateStream{Name: "s"}))
	mustOK(t, fb.c, wire.CmdCreateTopic, wire.Marshal(&wire.CreateTopic{Stream: wire.NumericID(0), PartitionsCount: 2, Name: "t"}))
	mustOK(t, fb.c, wire.CmdCreateConsumerGroup, wire.Marshal(&wire.CreateConsumerGroup{Stream: wire.NumericID(0), Topic: wire.NumericID(0), Name: "g"}))
}

const fuzzPingID = 0xF0F0F0F0

// exchange sends one request built from the fuzz input, then a ping, and
// reads until the ping's reply: the fuzzed request may be answered, dropped
// silently, or end the connection, but the broker must stay responsive.
func (fb *fuzzBroker) exchange(t *testing.T, op wire.Operation, cmd wire.Command, body []byte) {
	c := fb.c
	h := wire.RequestHeader{Client: c.ClientID, Operation: op, Command: cmd, Session: c.Session, Request: c.Counter}
	if op.Metadata() {
		c.Counter++
	}
	err := c.Write(h, body)
	if err == nil {
		err = c.Write(wire.RequestHeader{Client: c.ClientID, Operation: wire.OpNonReplicated, Command: wire.CmdPing, Request: fuzzPingID}, nil)
	}
	for err == nil {
		var rep *rawclient.Reply
		rep, err = c.Read()
		if errors.Is(err, rawclient.ErrTimeout) {
			t.Fatalf("broker did not answer a ping after op %d cmd %d body %x", op, cmd, body)
		}
		if err == nil && rep.Eviction != nil {
			err = errors.New("evicted")
		}
		if err == nil && rep.Header.Request == fuzzPingID && rep.Header.Operation == wire.OpNonReplicated {
			break
		}
	}
	fb.check(t, body)
	if err != nil || op == wire.OpLogout || op == wire.OpRegister {
		fb.reconnect(t) // the connection ended or its session changed
	}
}

// rawExchange writes b on a fresh logged-in connection, closes its write
// side and reads until the broker closes it: every complete frame in b is
// handled and answered (or dropped), then the partial rest ends the
// connection.
func (fb *fuzzBroker) rawExchange(t *testing.T, b []byte) {
	c, err := rawclient.Dial(context.Background(), fb.b.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Login("iggy", "iggy")
	require.NoError(t, err)
	require.NoError(t, c.WriteRaw(b))
	require.NoError(t, c.Conn().(*net.TCPConn).CloseWrite())
	for {
		_, err := c.Read()
		if errors.Is(err, rawclient.ErrTimeout) {
			t.Fatalf("broker neither answered nor closed after %x", b)
		}
		if err != nil {
			break
		}
	}
	fb.check(t, b)
}

// check fails on a recovered handler panic and keeps the model small.
func (fb *fuzzBroker) check(t *testing.T, input []byte) {
	if p := fb.b.panics.Load(); p != 0 {
		t.Fatalf("%d handler panics; input %x", p, input)
	}
	if fb.iters.Add(1)%300 == 0 {
		fb.reset(t)
	}
}

func fuzzSeeds(f *testing.F) {
	s, tp, g := wire.NumericID(0), wire.NumericID(0), wire.NumericID(0)
	send, _ := wire.AppendSendMessages(nil, s, tp, wire.ToPartition(1), []wire.Message{{Payload: []byte("hello")}, {Payload: []byte("x")}})
	opts := wire.AppendTLV(nil, []wire.Entry{wire.TopicOption(wire.OptSegmentSize, wire.Uint64Value(1<<20))})
	consumer := wire.Consumer{Kind: wire.ConsumerGroup, ID: g}
	ref := wire.ConsumerOffsetRef{Consumer: consumer, Stream: s, Topic: tp, Partition: wire.Partition(1)}
	seeds := []struct {
		cmd  wire.Command
		body []byte
	}{
		{wire.CmdPing, nil},
		{wire.CmdGetStats, nil},
		{wire.CmdGetSnapshot, []byte{2, 2, 3, 4}},
		{wire.CmdDescribeOptions, []byte{1}},
		{wire.CmdGetClient, []byte{1, 0, 0, 0}},
		{wire.CmdCreateStream, wire.Marshal(&wire.CreateStream{Name: "n"})},
		{wire.CmdUpdateStream, wire.Marshal(&wire.UpdateStream{Stream: s, Name: "m"})},
		{wire.CmdCreateTopic, wire.Marshal(&wire.CreateTopic{Stream: s, PartitionsCount: 3, Name: "u", Options: opts})},
		{wire.CmdUpdateTopic, wire.Marshal(&wire.UpdateTopic{Stream: s, Topic: tp, Name: "v", Options: opts})},
		{wire.CmdGetTopic, wire.Marshal(&wire.TopicRef{Stream: s, Topic: tp})},
		{wire.CmdCreatePartitions, wire.Marshal(&wire.PartitionsChange{Stream: s, Topic: tp, Count: 2})},
		{wire.CmdDeletePartitions, wire.Marshal(&wire.PartitionsChange{Stream: s, Topic: tp, Count: 1})},
		{wire.CmdDeleteSegments, wire.Marshal(&wire.DeleteSegments{Stream: s, Topic: tp, Partition: 1, Count: 1})},
		{wire.CmdSendMessages, send},
		{wire.CmdPollMessages, wire.Marshal(&wire.PollMessages{Consumer: consumer, Stream: s, Topic: tp, Partition: wire.Partition(1), Strategy: wire.Next(), Count: 5, AutoCommit: true})},
		{wire.CmdJoinConsumerGroup, wire.Marshal(&wire.GroupRef{Stream: s, Topic: tp, Group: g})},
		{wire.CmdSyncConsumerGroup, wire.Marshal(&wire.GroupRef{Stream: s, Topic: tp, Group: g})},
		{wire.CmdGetConsumerGroup, wire.Marshal(&wire.GroupRef{Stream: s, Topic: tp, Group: g})},
		{wire.CmdStoreConsumerOffset, wire.Marshal(&wire.StoreConsumerOffset{ConsumerOffsetRef: ref, Offset: 0, Ack: 1})},
		{wire.CmdGetConsumerOffset, wire.Marshal(&ref)},
		{wire.CmdDeleteConsumerOffset, wire.Marshal(&wire.DeleteConsumerOffset{ConsumerOffsetRef: ref, Ack: 0})},
		{wire.CmdCreatePAT, wire.Marshal(&wire.CreatePAT{Name: "pat", Expiry: 5})},
		{wire.CmdPurgeTopic, wire.Marshal(&wire.TopicRef{Stream: s, Topic: tp})},
		{wire.CmdDeleteStream, wire.Marshal(&wire.StreamRef{Stream: s})},
	}
	for _, sd := range seeds {
		f.Add(uint8(wire.OperationFor(sd.cmd)), uint32(sd.cmd), sd.body)
	}
	f.Add(uint8(wire.OpRegister), uint32(0), wire.Marshal(&wire.Register{ProtocolVersion: wire.ProtocolVersion, Username: "iggy", Password: "iggy"}))
	f.Add(uint8(wire.OpLogout), uint32(0), []byte{})
	f.Add(uint8(wire.OpTruncatePartition), uint32(0), []byte{1})
	f.Add(uint8(wire.OpNonReplicated), uint32(60000), []byte{})
	f.Add(uint8(wire.OpNonReplicated), uint32(wire.CmdLoginUser), []byte{})
}

// FuzzServe sends one request of any operation, command code and body on
// a logged-in connection to a live broker.
func FuzzServe(f *testing.F) {
	fuzzSeeds(f)
	fb := newFuzzBroker(f)
	f.Fuzz(func(t *testing.T, op uint8, cmd uint32, body []byte) {
		fb.exchange(t, wire.Operation(op), wire.Command(cmd), body)
	})
}

// FuzzRawFrames writes arbitrary bytes on a logged-in connection.
func FuzzRawFrames(f *testing.F) {
	h := wire.RequestHeader{Size: wire.HeaderSize + 1, Client: wire.U128{Lo: 1}, Operation: wire.OpNonReplicated, Command: wire.CmdPing}
	frame := make([]byte, wire.HeaderSize)
	h.Put(frame)
	f.Add(append(frame, 0))
	f.Add(frame[:64])
	h = wire.RequestHeader{Size: wire.HeaderSize, Client: wire.U128{Lo: 1}, Operation: wire.OpCreateStream, Session: 1, Request: 1}
	h.Put(frame)
	f.Add(append([]byte(nil), frame...))
	fb := newFuzzBroker(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		fb.rawExchange(t, b)
	})
}

func FuzzOffsetsJournal(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte(journalMagic))
	rec := appendJournalRecord([]byte(journalMagic), opSet, offsetKey{wire.ConsumerGroup, 3}, 42)
	rec = appendJournalRecord(rec, opDelete, offsetKey{wire.ConsumerSingle, 9}, 0)
	f.Add(rec)
	f.Add(rec[:len(rec)-3])
	f.Fuzz(func(t *testing.T, data []byte) {
		m, valid, records, err := decodeJournal(data)
		if err != nil {
			return
		}
		require.LessOrEqual(t, valid, len(data))
		require.LessOrEqual(t, len(m), records)
		// Re-encoding the live offsets replays to the same map.
		re := []byte(journalMagic)
		for k, v := range m {
			re = appendJournalRecord(re, opSet, k, v)
		}
		m2, valid2, _, err := decodeJournal(re)
		require.NoError(t, err)
		require.Equal(t, len(re), valid2)
		require.Equal(t, m, m2)
	})
}

func FuzzMetadata(f *testing.F) {
	hash, err := hashPassword("secret")
	require.NoError(f, err)
	b := &Broker{streams: map[uint32]*stream{}, nextUID: 3, nextUserID: 2, users: map[uint32]*user{
		0: {id: 0, name: "iggy", status: wire.UserActive, password: hash, perms: nil, pats: map[string]*pat{"tok": {name: "tok"}}},
		1: {id: 1, name: "app", status: wire.UserInactive, password: hash, perms: &wire.Permissions{
			Streams: map[uint32]*wire.StreamPermissions{0: {ReadStream: true, Topics: map[uint32]*wire.TopicPermissions{1: {PollMessages: true}}}},
		}, pats: map[string]*pat{}},
	}}
	s := &stream{id: 0, name: "s", topics: map[uint32]*topic{}}
	tp := &topic{stream: s, id: 1, uid: 2, name: "t", opts: wire.DefaultTopicOptions(), groups: map[uint32]*group{}, nextGroup: 1}
	tp.groups[0] = newGroup(tp, 0, "g")
	s.topics[1] = tp
	b.streams[0] = s
	good, err := json.Marshal(b.snapshotMeta())
	_, derr := decodeMeta(good)
	require.NoError(f, derr, "the seed is a valid metadata file")
	require.NoError(f, err)
	f.Add(good)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"next_uid":1,"streams":[{"id":0,"name":"a","topics":[{"id":0,"uid":0,"name":"t","options":{"SegmentSize":1048576},"partitions_created_at":[1,2]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeMeta(data)
		if err != nil {
			return
		}
		again, err := json.Marshal(m)
		require.NoError(t, err)
		_, err = decodeMeta(again)
		require.NoError(t, err)
	})
}
