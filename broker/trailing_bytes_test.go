package broker_test

// Request decoding as upstream (issue 12): the server decodes a request
// with decode_from (core/binary_protocol/src/codec.rs), which reads the
// fields it needs and ignores what follows, so each request the broker
// serves is answered the same with bytes appended. Fields that run to the
// end of the body (options blocks, the send batch) take the bytes and
// judge them, and what upstream's decoders refuse stays refused.

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// junk is what the official Node.js client appends to delete_topic: a u32
// partitions count.
var junk = binary.LittleEndian.AppendUint32(nil, 1)

// trailingFixture is the state every case starts from: stream s (id 0)
// with topic t (4 partitions, 3 batches in partition 0, group g joined by
// c, consumer 0's offset 1 stored) and topics t1, t2; streams s1, s2;
// groups g1, g2 on t; PATs pat1, pat2; users user1, user2 (password
// "secret").
type trailingFixture struct {
	b        *broker.Broker
	c        *rawclient.Client
	s, t     wire.Identifier
	clientID uint32
	token    string
}

func newTrailingFixture(t *testing.T) *trailingFixture {
	b := brokertest.Start(t)
	c := login(t, b)
	f := &trailingFixture{b: b, c: c, s: wire.NumericID(createStream(t, c, "s").ID)}
	f.t = wire.NumericID(createTopic(t, c, f.s, "t", 4).ID)
	createTopic(t, c, f.s, "t1", 1)
	createTopic(t, c, f.s, "t2", 1)
	createStream(t, c, "s1")
	createStream(t, c, "s2")
	for _, g := range []string{"g", "g1", "g2"} {
		ok(t, do(t, c, wire.CmdCreateConsumerGroup, &wire.CreateConsumerGroup{Stream: f.s, Topic: f.t, Name: g}))
	}
	ok(t, do(t, c, wire.CmdJoinConsumerGroup, f.group("g")))
	for i := range 3 {
		send(t, c, f.s, f.t, wire.ToPartition(0), numbered(fmt.Sprint("m", i, "-"), 0, 2)...)
	}
	ok(t, do(t, c, wire.CmdStoreConsumerOffset, f.storeOffset()))
	for _, name := range []string{"pat1", "pat2"} {
		tok := decodeAs[wire.CreatePATReply](t, ok(t, do(t, c, wire.CmdCreatePAT, &wire.CreatePAT{Name: name})))
		f.token = tok.Token
	}
	for _, name := range []string{"user1", "user2"} {
		ok(t, do(t, c, wire.CmdCreateUser, &wire.CreateUser{Username: name, Password: "secret", Status: wire.UserActive}))
	}
	me := decodeAs[wire.ClientInfo](t, ok(t, do(t, c, wire.CmdGetMe, nil)))
	f.clientID = me.ClientID
	return f
}

func (f *trailingFixture) topic(name string) *wire.TopicRef {
	return &wire.TopicRef{Stream: f.s, Topic: wire.NamedID(name)}
}

func (f *trailingFixture) group(name string) *wire.GroupRef {
	return &wire.GroupRef{Stream: f.s, Topic: f.t, Group: wire.NamedID(name)}
}

func (f *trailingFixture) offsetRef() wire.ConsumerOffsetRef {
	return wire.ConsumerOffsetRef{Consumer: single(0), Stream: f.s, Topic: f.t, Partition: wire.Partition(0)}
}

func (f *trailingFixture) storeOffset() *wire.StoreConsumerOffset {
	return &wire.StoreConsumerOffset{ConsumerOffsetRef: f.offsetRef(), Offset: 1, Ack: wire.AckQuorum}
}

type trailingCase struct {
	cmd wire.Command
	// body is the request; again, if set, the request sent with the
	// trailing bytes (a mutation needs a target of its own), else body.
	body, again func(f *trailingFixture) []byte
	// between runs after the plain request, to restore what it changed.
	between func(t *testing.T, f *trailingFixture)
	// same compares the two payloads; default: equal bytes.
	same func(t *testing.T, plain, trailing []byte)
	// exchange replaces the plain request-reply exchange (logins).
	exchange func(t *testing.T, f *trailingFixture, body []byte) *rawclient.Reply
}

func enc(v wire.Encodable) func(*trailingFixture) []byte {
	return func(*trailingFixture) []byte { return v.AppendTo(nil) }
}

func register(t *testing.T, f *trailingFixture, body []byte) *rawclient.Reply {
	rep, err := f.c.Register(body)
	require.NoError(t, err)
	require.Nil(t, rep.Eviction, "login evicted")
	return rep
}

func sameRegister(t *testing.T, plain, trailing []byte) {
	a, b := decodeAs[wire.RegisterReply](t, plain), decodeAs[wire.RegisterReply](t, trailing)
	a.Session, b.Session = 0, 0
	require.Equal(t, a, b)
}

func sameLength(t *testing.T, plain, trailing []byte) { require.Len(t, trailing, len(plain)) }

func trailingCases() []trailingCase {
	pw := &wire.Register{ProtocolVersion: wire.ProtocolVersion, SDKName: "t", SDKVersion: "1", Username: "iggy", Password: "iggy"}
	return []trailingCase{
		{cmd: wire.CmdPing},
		{cmd: wire.CmdGetStats, same: func(t *testing.T, plain, trailing []byte) {
			a, b := decodeAs[wire.Stats](t, plain), decodeAs[wire.Stats](t, trailing)
			require.Equal(t, []uint64{uint64(a.StreamsCount), uint64(a.TopicsCount), uint64(a.PartitionsCount), a.MessagesCount},
				[]uint64{uint64(b.StreamsCount), uint64(b.TopicsCount), uint64(b.PartitionsCount), b.MessagesCount})
		}},
		{cmd: wire.CmdGetSnapshot, body: enc(&wire.GetSnapshot{Compression: 1, Types: []uint8{4}}), same: func(t *testing.T, plain, trailing []byte) {
			names := func(b []byte) []string {
				zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
				require.NoError(t, err)
				out := []string{}
				for _, f := range zr.File {
					out = append(out, f.Name)
				}
				return out
			}
			require.Equal(t, names(plain), names(trailing))
		}},
		{cmd: wire.CmdGetClusterMetadata},
		{cmd: wire.CmdDescribeOptions, body: enc(&wire.DescribeOptions{Scope: wire.ScopeTopic})},
		{cmd: wire.CmdGetMe},
		{cmd: wire.CmdGetClient, body: func(f *trailingFixture) []byte { return wire.Marshal(&wire.GetClient{ClientID: f.clientID}) }},
		{cmd: wire.CmdGetClients},
		{cmd: wire.CmdGetUser, body: enc(&wire.UserRef{User: wire.NamedID("user1")})},
		{cmd: wire.CmdGetUsers},
		{cmd: wire.CmdCreateUser, body: enc(&wire.CreateUser{Username: "new1", Password: "secret", Status: wire.UserActive}),
			again: enc(&wire.CreateUser{Username: "new2", Password: "secret", Status: wire.UserActive}),
			same: func(t *testing.T, plain, trailing []byte) {
				a, b := decodeAs[wire.UserDetails](t, plain), decodeAs[wire.UserDetails](t, trailing)
				require.Equal(t, a.ID+1, b.ID)
				require.Equal(t, []string{"new1", "new2"}, []string{a.Username, b.Username})
				a.ID, a.Username, a.CreatedAt, b.ID, b.Username, b.CreatedAt = 0, "", 0, 0, "", 0
				require.Equal(t, a, b)
			}},
		{cmd: wire.CmdDeleteUser, body: enc(&wire.UserRef{User: wire.NamedID("user1")}), again: enc(&wire.UserRef{User: wire.NamedID("user2")})},
		{cmd: wire.CmdUpdateUser, body: enc(&wire.UpdateUser{User: wire.NamedID("user1"), Status: ptr(wire.UserActive)})},
		{cmd: wire.CmdUpdatePermissions, body: enc(&wire.UpdatePermissions{User: wire.NamedID("user1"), Permissions: &wire.Permissions{
			Global: wire.GlobalPermissions{ReadStreams: true}}})},
		{cmd: wire.CmdChangePassword, body: enc(&wire.ChangePassword{User: wire.NamedID("user1"), CurrentPassword: "secret", NewPass: "secret"})},
		{cmd: wire.CmdLogoutUser, between: func(t *testing.T, f *trailingFixture) {
			f.c.NewClientID()
			register(t, f, wire.Marshal(pw))
		}},
		{cmd: wire.CmdLoginRegister, body: enc(pw), exchange: register, same: sameRegister},
		{cmd: wire.CmdGetPATs},
		{cmd: wire.CmdCreatePAT, body: enc(&wire.CreatePAT{Name: "pat3"}), again: enc(&wire.CreatePAT{Name: "pat4"}), same: sameLength},
		{cmd: wire.CmdDeletePAT, body: enc(&wire.DeletePAT{Name: "pat1"}), again: enc(&wire.DeletePAT{Name: "pat2"})},
		{cmd: wire.CmdLoginRegisterWithPAT, body: func(f *trailingFixture) []byte {
			return wire.Marshal(&wire.RegisterPAT{ProtocolVersion: wire.ProtocolVersion, SDKName: "t", SDKVersion: "1", Token: f.token})
		}, exchange: register, same: sameRegister},
		{cmd: wire.CmdPollMessages, body: func(f *trailingFixture) []byte {
			return wire.Marshal(&wire.PollMessages{Consumer: single(0), Stream: f.s, Topic: f.t, Partition: wire.Partition(0), Strategy: wire.First(), Count: 10})
		}},
		{cmd: wire.CmdFlushUnsavedBuffer, body: func(f *trailingFixture) []byte {
			return append(binary.LittleEndian.AppendUint32(wire.Marshal(&wire.TopicRef{Stream: f.s, Topic: f.t}), 0), 1)
		}},
		{cmd: wire.CmdGetConsumerOffset, body: func(f *trailingFixture) []byte { r := f.offsetRef(); return wire.Marshal(&r) }},
		{cmd: wire.CmdStoreConsumerOffset, body: func(f *trailingFixture) []byte { return wire.Marshal(f.storeOffset()) }},
		{cmd: wire.CmdDeleteConsumerOffset, body: func(f *trailingFixture) []byte {
			return wire.Marshal(&wire.DeleteConsumerOffset{ConsumerOffsetRef: f.offsetRef(), Ack: wire.AckQuorum})
		}, between: func(t *testing.T, f *trailingFixture) {
			ok(t, do(t, f.c, wire.CmdStoreConsumerOffset, f.storeOffset()))
		}},
		{cmd: wire.CmdGetStream, body: func(f *trailingFixture) []byte { return wire.Marshal(&wire.StreamRef{Stream: f.s}) }},
		{cmd: wire.CmdGetStreams},
		{cmd: wire.CmdDeleteStream, body: enc(&wire.StreamRef{Stream: wire.NamedID("s1")}), again: enc(&wire.StreamRef{Stream: wire.NamedID("s2")})},
		{cmd: wire.CmdPurgeStream, body: func(f *trailingFixture) []byte { return wire.Marshal(&wire.StreamRef{Stream: f.s}) }},
		{cmd: wire.CmdGetTopic, body: func(f *trailingFixture) []byte { return wire.Marshal(f.topic("t")) }},
		{cmd: wire.CmdGetTopics, body: func(f *trailingFixture) []byte { return wire.Marshal(&wire.StreamRef{Stream: f.s}) }},
		{cmd: wire.CmdDeleteTopic, body: func(f *trailingFixture) []byte { return wire.Marshal(f.topic("t1")) },
			again: func(f *trailingFixture) []byte { return wire.Marshal(f.topic("t2")) }},
		{cmd: wire.CmdPurgeTopic, body: func(f *trailingFixture) []byte { return wire.Marshal(f.topic("t")) }},
		{cmd: wire.CmdCreatePartitions, body: func(f *trailingFixture) []byte {
			return wire.Marshal(&wire.PartitionsChange{Stream: f.s, Topic: f.t, Count: 1})
		}},
		{cmd: wire.CmdDeletePartitions, body: func(f *trailingFixture) []byte {
			return wire.Marshal(&wire.PartitionsChange{Stream: f.s, Topic: f.t, Count: 1})
		}},
		{cmd: wire.CmdDeleteSegments, body: func(f *trailingFixture) []byte {
			return wire.Marshal(&wire.DeleteSegments{Stream: f.s, Topic: f.t, Partition: 0, Count: 1})
		}},
		{cmd: wire.CmdGetConsumerGroup, body: func(f *trailingFixture) []byte { return wire.Marshal(f.group("g")) }},
		{cmd: wire.CmdGetConsumerGroups, body: func(f *trailingFixture) []byte { return wire.Marshal(&wire.TopicRef{Stream: f.s, Topic: f.t}) }},
		{cmd: wire.CmdCreateConsumerGroup, body: func(f *trailingFixture) []byte {
			return wire.Marshal(&wire.CreateConsumerGroup{Stream: f.s, Topic: f.t, Name: "g3"})
		}, again: func(f *trailingFixture) []byte {
			return wire.Marshal(&wire.CreateConsumerGroup{Stream: f.s, Topic: f.t, Name: "g4"})
		}, same: func(t *testing.T, plain, trailing []byte) {
			a, b := decodeAs[wire.GroupDetails](t, plain), decodeAs[wire.GroupDetails](t, trailing)
			require.Equal(t, a.ID+1, b.ID)
			require.Equal(t, []string{"g3", "g4"}, []string{a.Name, b.Name})
			a.ID, a.Name, b.ID, b.Name = 0, "", 0, ""
			require.Equal(t, a, b)
		}},
		{cmd: wire.CmdDeleteConsumerGroup, body: func(f *trailingFixture) []byte { return wire.Marshal(f.group("g1")) },
			again: func(f *trailingFixture) []byte { return wire.Marshal(f.group("g2")) }},
		{cmd: wire.CmdJoinConsumerGroup, body: func(f *trailingFixture) []byte { return wire.Marshal(f.group("g1")) }},
		{cmd: wire.CmdLeaveConsumerGroup, body: func(f *trailingFixture) []byte { return wire.Marshal(f.group("g")) },
			between: func(t *testing.T, f *trailingFixture) { ok(t, do(t, f.c, wire.CmdJoinConsumerGroup, f.group("g"))) }},
		{cmd: wire.CmdSyncConsumerGroup, body: func(f *trailingFixture) []byte { return wire.Marshal(f.group("g")) }},
	}
}

// TestRequestsIgnoreTrailingBytes: every command the broker serves, sent
// with a u32 appended, gets the answer it gets without it (status, result
// and payload), as upstream's decode_from gives.
func TestRequestsIgnoreTrailingBytes(t *testing.T) {
	t.Parallel()
	seen := map[wire.Command]bool{}
	for _, tc := range trailingCases() {
		require.False(t, seen[tc.cmd], "two cases for %s", tc.cmd)
		seen[tc.cmd] = true
		t.Run(tc.cmd.String(), func(t *testing.T) {
			t.Parallel()
			f := newTrailingFixture(t)
			body := func(fn func(*trailingFixture) []byte) []byte {
				if fn == nil {
					return nil
				}
				return fn(f)
			}
			again := tc.again
			if again == nil {
				again = tc.body
			}
			exchange := tc.exchange
			if exchange == nil {
				exchange = func(t *testing.T, f *trailingFixture, b []byte) *rawclient.Reply { return do(t, f.c, tc.cmd, b) }
			}
			plain := exchange(t, f, body(tc.body))
			if tc.between != nil {
				tc.between(t, f)
			}
			trailing := exchange(t, f, append(body(again), junk...))
			require.Equal(t, plain.Status(), trailing.Status(), "status")
			if plain.Status() != 0 {
				require.Empty(t, trailing.Body)
				return
			}
			a, b := plain.Body, trailing.Body
			if plain.Header.Operation.ResultFramed() {
				var ca, cb wire.Code
				var err error
				a, ca, err = plain.Result()
				require.NoError(t, err)
				b, cb, err = trailing.Result()
				require.NoError(t, err)
				require.Zero(t, ca, "the plain request is committed")
				require.Equal(t, ca, cb, "result code")
			}
			if tc.same != nil {
				tc.same(t, a, b)
				return
			}
			require.Equal(t, a, b, "payload")
		})
	}
	// Every command the broker serves has a case, here or, for bodies
	// whose last field runs to the end, in TestTrailingBytesUpstreamRejects.
	for _, cmd := range servedCommands() {
		require.True(t, seen[cmd] || bodyToEnd[cmd], "no trailing-bytes case for %s", cmd)
	}
}

// bodyToEnd are the commands whose last field runs to the end of the body.
var bodyToEnd = map[wire.Command]bool{
	wire.CmdCreateStream: true, wire.CmdUpdateStream: true, wire.CmdCreateTopic: true,
	wire.CmdUpdateTopic: true, wire.CmdSendMessages: true,
}

// servedCommands lists every command code the broker answers: those it
// has a handler for plus the session commands it routes itself.
func servedCommands() []wire.Command {
	out := []wire.Command{}
	for c := wire.Command(0); c < 1000; c++ {
		if c.Known() && c != wire.CmdLoginUser && c != wire.CmdLoginWithPAT {
			out = append(out, c)
		}
	}
	return out
}

// TestDeleteTopicAsTheNodeClientSendsIt: the report, end to end:
// [stream id][topic id][u32 partitions count] deletes the topic.
func TestDeleteTopicAsTheNodeClientSendsIt(t *testing.T) {
	t.Parallel()
	_, c := start(t)
	s, tp := setup(t, c, 3)
	body := binary.LittleEndian.AppendUint32(wire.Marshal(&wire.TopicRef{Stream: s, Topic: tp}), 3)
	ok(t, do(t, c, wire.CmdDeleteTopic, body))
	require.Empty(t, ok(t, do(t, c, wire.CmdGetTopic, &wire.TopicRef{Stream: s, Topic: tp})), "topic gone")
}

// TestTrailingBytesUpstreamRejects: where a field runs to the end of the
// body the trailing bytes are part of it and fail its checks (an options
// block: status 3; a send batch: status 3, where upstream drops the send
// without a reply), and a field that runs past the body or an identifier
// of kind 3 fails as upstream fails it.
func TestTrailingBytesUpstreamRejects(t *testing.T) {
	t.Parallel()
	f := newTrailingFixture(t)
	c := f.c
	for cmd, body := range map[wire.Command]func(name string) []byte{
		wire.CmdCreateStream: func(n string) []byte { return wire.Marshal(&wire.CreateStream{Name: "cs" + n}) },
		wire.CmdUpdateStream: func(n string) []byte {
			return wire.Marshal(&wire.UpdateStream{Stream: wire.NamedID("s1"), Name: "us" + n})
		},
		wire.CmdCreateTopic: func(n string) []byte {
			return wire.Marshal(&wire.CreateTopic{Stream: f.s, PartitionsCount: 1, Name: "ct" + n})
		},
		wire.CmdUpdateTopic: func(n string) []byte {
			return wire.Marshal(&wire.UpdateTopic{Stream: f.s, Topic: wire.NamedID("t1"), Name: "ut" + n})
		},
		wire.CmdSendMessages: func(string) []byte { return sendBody(t, f.s, f.t, wire.ToPartition(0), "x") },
	} {
		require.True(t, bodyToEnd[cmd])
		ok(t, do(t, c, cmd, body("1"))) // accepted as it is
		denied(t, do(t, c, cmd, append(body("2"), junk...)), wire.ErrInvalidCommand.Code)
	}

	pastBody := []byte{2, 10, 's'}        // a name 10 bytes long, 1 byte there
	badKind := []byte{3, 1, 's', 1, 4, 0} // identifier kind 3
	// Bodies that do not start with an identifier or a consumer, cut short.
	notIDLed := map[wire.Command][]byte{
		wire.CmdDescribeOptions: {}, wire.CmdGetClient: {1, 2}, wire.CmdGetSnapshot: {1, 5, 1},
		wire.CmdCreatePAT: {1, 'a', 0}, wire.CmdDeletePAT: {5, 'a'}, wire.CmdCreateStream: {5, 'a'},
	}
	for _, cmd := range servedCommands() {
		if cmd == wire.CmdLoginRegister || cmd == wire.CmdLoginRegisterWithPAT {
			continue // below: logins travel as Register
		}
		bodies := map[string][]byte{"past the body": pastBody, "kind 3": badKind}
		if b, ok := notIDLed[cmd]; ok {
			bodies = map[string][]byte{"past the body": b}
		}
		for what, body := range bodies {
			// Not do: a denied delete_segments echoes its own operation.
			rep, err := c.Exchange(c.Header(cmd), body)
			require.NoError(t, err, "%s %s", cmd, what)
			require.Nil(t, rep.Eviction, "%s %s", cmd, what)
			switch cmd {
			case wire.CmdPing, wire.CmdGetStats, wire.CmdGetClusterMetadata, wire.CmdGetMe, wire.CmdGetClients,
				wire.CmdGetStreams, wire.CmdGetPATs, wire.CmdLogoutUser, wire.CmdGetUsers:
				// No body to decode: served as without one.
				require.Zero(t, rep.Status(), "%s %s", cmd, what)
				if cmd == wire.CmdLogoutUser {
					c.NewClientID()
					_, err := c.Login("iggy", "iggy")
					require.NoError(t, err)
				}
			case wire.CmdFlushUnsavedBuffer:
				// Flush answers 5 before decoding.
				require.Equal(t, wire.ErrFeatureUnavailable.Code, rep.Status(), "%s %s", cmd, what)
			case wire.CmdPollMessages:
				// Upstream answers an undecodable poll with an empty poll.
				require.Zero(t, rep.Status(), "%s %s", cmd, what)
				pr := decodeAs[wire.PollReply](t, rep.Body)
				require.Zero(t, pr.PartitionID)
				require.Empty(t, pr.Messages)
			case wire.CmdGetConsumerOffset, wire.CmdSyncConsumerGroup:
				// An empty body: no offset / not a member.
				require.Zero(t, rep.Status(), "%s %s", cmd, what)
				require.Empty(t, rep.Body, "%s %s", cmd, what)
			default:
				require.Equal(t, wire.ErrInvalidCommand.Code, rep.Status(), "%s %s", cmd, what)
				require.Empty(t, rep.Body)
			}
		}
	}

	// A login whose username runs past the body: Eviction(MalformedLogin).
	pw := wire.Marshal(&wire.Register{ProtocolVersion: wire.ProtocolVersion, SDKName: "t", SDKVersion: "1", Username: "iggy", Password: "iggy"})
	lc := dial(t, f.b)
	rep, err := lc.Register(pw[:len(pw)-8])
	require.NoError(t, err)
	require.NotNil(t, rep.Eviction)
	require.Equal(t, wire.EvictMalformedLogin, rep.Eviction.Reason)
}
