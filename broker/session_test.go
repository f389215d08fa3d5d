package broker_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/internal/tlstest"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"
)

// evicted requires an eviction with reason and then a closed connection.
func evicted(t *testing.T, c *rawclient.Client, rep *rawclient.Reply, err error, reason wire.EvictionReason) *wire.Eviction {
	t.Helper()
	require.NoError(t, err)
	require.NotNil(t, rep.Eviction, "want eviction %s, got a reply with status %d", reason, rep.Status())
	require.Equal(t, reason, rep.Eviction.Reason)
	_, err = c.Read()
	require.Error(t, err, "the connection must be closed after an eviction")
	require.NotErrorIs(t, err, rawclient.ErrTimeout)
	return rep.Eviction
}

func TestLoginFailures(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	register := func(v uint32, user, pass string) []byte {
		return wire.Marshal(&wire.Register{ProtocolVersion: v, SDKName: "x", SDKVersion: "1", Username: user, Password: pass})
	}
	cases := []struct {
		name   string
		body   []byte
		reason wire.EvictionReason
	}{
		{"wrong password", register(wire.ProtocolVersion, "iggy", "nope"), wire.EvictInvalidCredentials},
		{"unknown user", register(wire.ProtocolVersion, "someone", "iggy"), wire.EvictInvalidCredentials},
		{"short username", register(wire.ProtocolVersion, "ig", "iggy"), wire.EvictInvalidCredentials},
		{"short password", register(wire.ProtocolVersion, "iggy", "ig"), wire.EvictInvalidCredentials},
		{"old protocol", register(wire.PackVersion(0, 10, 3), "iggy", "iggy"), wire.EvictIncompatibleProtocol},
		{"newer protocol", register(wire.PackVersion(0, 12, 0), "iggy", "iggy"), wire.EvictIncompatibleProtocol},
		{"no version", []byte{1, 2}, wire.EvictMalformedLogin},
		{"garbled", binary.LittleEndian.AppendUint32(nil, wire.ProtocolVersion), wire.EvictMalformedLogin},
		{"bad token", wire.Marshal(&wire.RegisterPAT{ProtocolVersion: wire.ProtocolVersion, SDKName: "x", SDKVersion: "1", Token: "nope"}), wire.EvictInvalidToken},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := dial(t, b)
			rep, err := c.Register(tc.body)
			e := evicted(t, c, rep, err, tc.reason)
			require.Equal(t, c.ClientID, e.Client, "case %d", i)
			if tc.reason == wire.EvictIncompatibleProtocol {
				require.Equal(t, uint32(11264), e.ServerProtocolMax)
				require.Equal(t, uint32(11264), e.ServerProtocolMin)
			}
		})
	}
	c := dial(t, b)
	_, err := c.Register(register(wire.PackVersion(0, 11, 7), "iggy", "iggy"))
	require.NoError(t, err)
	require.NotZero(t, c.Session, "any 0.11.x is admitted")
}

func TestRegisterReply(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	c := dial(t, b)
	rep, err := c.Login("iggy", "iggy")
	require.NoError(t, err)
	require.Equal(t, wire.OpRegister, rep.Header.Operation)
	require.Equal(t, uint64(0), rep.Header.Request)
	payload, code, err := rep.Result()
	require.NoError(t, err)
	require.Zero(t, code)
	rr := decodeAs[wire.RegisterReply](t, payload)
	require.Equal(t, wire.RegisterReply{UserID: 0, Session: c.Session, ProtocolVersion: 11264, ServerVersion: broker.ServerVersion}, rr)

	again, err := c.Login("iggy", "iggy")
	require.NoError(t, err)
	payload, _, _ = again.Result()
	require.Equal(t, rr.Session, decodeAs[wire.RegisterReply](t, payload).Session, "a bound transport keeps its session")

	other := login(t, b)
	require.Greater(t, other.Session, c.Session, "sessions are monotonic")
}

func TestPersonalAccessTokens(t *testing.T) {
	t.Parallel()
	b, c := start(t)
	create := func(name string, expiry uint64) *rawclient.Reply {
		return do(t, c, wire.CmdCreatePAT, &wire.CreatePAT{Name: name, Expiry: expiry})
	}
	token := decodeAs[wire.CreatePATReply](t, ok(t, create("ci-token", 0))).Token
	require.GreaterOrEqual(t, len(token), 32)
	committed(t, create("ci-token", 0), wire.ErrPATAlreadyExists.Code)
	short := decodeAs[wire.CreatePATReply](t, ok(t, create("short", 1))).Token // 1 µs
	list := decodeAs[wire.PATList](t, ok(t, do(t, c, wire.CmdGetPATs, nil)))
	require.Len(t, list, 2)
	require.Equal(t, "ci-token", list[0].Name)
	require.Zero(t, list[0].Expiry)
	require.NotZero(t, list[1].Expiry)

	p := dial(t, b)
	_, err := p.LoginPAT(token)
	require.NoError(t, err)
	require.NotZero(t, p.Session)
	ok(t, do(t, p, wire.CmdGetStreams, nil))

	time.Sleep(time.Millisecond) // let the 1 µs token expire
	e := dial(t, b)
	rep, err := e.LoginPAT(short)
	evicted(t, e, rep, err, wire.EvictInvalidToken)

	ok(t, do(t, c, wire.CmdDeletePAT, &wire.DeletePAT{Name: "ci-token"}))
	committed(t, do(t, c, wire.CmdDeletePAT, &wire.DeletePAT{Name: "ci-token"}), wire.ErrResourceNotFound.Code)
	d := dial(t, b)
	rep, err = d.LoginPAT(token)
	evicted(t, d, rep, err, wire.EvictInvalidToken)
}

func TestPreAuthRules(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	c := dial(t, b)
	require.Empty(t, ok(t, do(t, c, wire.CmdPing, nil)))
	for _, code := range []wire.Command{wire.CmdGetStreams, wire.CmdGetStats, 60000, wire.CmdCreateStream, wire.CmdLogoutUser} {
		h := c.Header(wire.CmdPing)
		h.Command = code // raw NonReplicated code
		rep, err := c.Exchange(h, nil)
		require.NoError(t, err)
		require.Nil(t, rep.Eviction)
		denied(t, rep, wire.ErrUnauthenticated.Code)
	}
	// Logout on an unbound transport is a plain ok.
	h := c.Header(wire.CmdLogoutUser)
	h.Session = 7
	rep, err := c.Exchange(h, nil)
	require.NoError(t, err)
	require.Nil(t, rep.Eviction)
	require.Zero(t, rep.Status())

	// A replicated op with a session on an unbound transport: NoSession.
	h = c.Header(wire.CmdCreateStream)
	h.Session = 7
	rep, err = c.Exchange(h, bodyOf(&wire.CreateStream{Name: "x"}))
	evicted(t, c, rep, err, wire.EvictNoSession)

	// Legacy login codes are MalformedLogin, bound or not.
	for _, code := range []wire.Command{wire.CmdLoginUser, wire.CmdLoginWithPAT} {
		c := dial(t, b)
		rep, err := c.Do(code, nil)
		evicted(t, c, rep, err, wire.EvictMalformedLogin)
		c = login(t, b)
		rep, err = c.Do(code, nil)
		evicted(t, c, rep, err, wire.EvictMalformedLogin)
	}
}

func TestNonReplicatedCodes(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	nonRep := func(code wire.Command) *rawclient.Reply {
		h := c.Header(wire.CmdPing)
		h.Command = code
		rep, err := c.Exchange(h, nil)
		require.NoError(t, err)
		require.Nil(t, rep.Eviction)
		require.Equal(t, wire.OpNonReplicated, rep.Header.Operation)
		return rep
	}
	cases := []struct {
		code wire.Command
		want wire.Code
	}{
		{60000, wire.ErrInvalidCommand.Code},
		{wire.CmdCreateStream, wire.ErrFeatureUnavailable.Code},
		{wire.CmdSendMessages, wire.ErrFeatureUnavailable.Code},
		{wire.CmdLogoutUser, 0},
		{wire.CmdLoginRegister, 0},
		{wire.CmdLoginRegisterWithPAT, 0},
		{wire.CmdFlushUnsavedBuffer, wire.ErrFeatureUnavailable.Code},
		{wire.CmdCreateUser, wire.ErrFeatureUnavailable.Code},
	}
	for i, tc := range cases {
		rep := nonRep(tc.code)
		require.Equal(t, tc.want, rep.Status(), "case %d: code %d", i, tc.code)
		require.Empty(t, rep.Body, "case %d", i)
	}
	ok(t, do(t, c, wire.CmdGetStreams, nil)) // still logged in after 39/40/45 as NonReplicated
	denied(t, do(t, c, wire.CmdCreateUser, []byte{1, 2, 3}), wire.ErrInvalidCommand.Code)
	// The denied user op did not consume its request id: this one reuses
	// the next and must commit.
	createStream(t, c, "after-denial")
}

func TestRequestChecksum(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	body := bodyOf(&wire.CreateStream{Name: "summed"})
	h := c.Header(wire.CmdCreateStream)
	h.RequestChecksum = wire.U128{Lo: xxh3.Hash(body) + 1}
	rep, err := c.Exchange(h, body)
	require.NoError(t, err)
	denied(t, rep, wire.ErrInvalidFormat.Code)
	h.RequestChecksum = wire.U128{Lo: xxh3.Hash(body)}
	rep, err = c.Exchange(h, body)
	require.NoError(t, err)
	ok(t, rep)
}

func TestInvalidHeaderIsDroppedSilently(t *testing.T) {
	t.Parallel()
	_, c := start(t, brokertest.InMemory())
	bad := []wire.RequestHeader{
		{Client: c.ClientID, Operation: wire.OpCreateStream, Session: c.Session, Request: 0},                     // request 0
		{Client: c.ClientID, Operation: wire.OpCreateStream, Session: 0, Request: 9},                             // session 0
		{Client: wire.U128{}, Operation: wire.OpNonReplicated, Command: wire.CmdPing},                            // client 0
		{Client: c.ClientID, Operation: 77, Session: c.Session, Request: 9},                                      // undefined op
		{Client: c.ClientID, Operation: wire.OpRegister, Session: 3, Request: 0},                                 // register with a session
		{Client: c.ClientID, Operation: wire.OpCreateStream, Session: c.Session, Request: 0, Command: 202},       // again
		{Client: c.ClientID, Operation: wire.OpSendMessages, Session: c.Session, Request: 0, Command: 101},       // partition op, request 0
		{Client: c.ClientID, Operation: wire.OpStoreConsumerOffset, Session: 0, Request: 4, Command: 121},        // partition op, session 0
		{Client: c.ClientID, Operation: wire.OpTruncatePartition, Session: c.Session, Request: 0, Command: 0},    // internal op, request 0
		{Client: c.ClientID, Operation: wire.OpJoinConsumerGroup, Session: c.Session, Request: 0, Command: 604},  // join, request 0
		{Client: c.ClientID, Operation: wire.OpLeaveConsumerGroup, Session: c.Session, Request: 0, Command: 605}, // leave, request 0
	}
	for _, h := range bad {
		require.NoError(t, c.Write(h, []byte{1}))
	}
	h := c.Header(wire.CmdPing)
	h.Request = 4242
	rep, err := c.Exchange(h, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(4242), rep.Header.Request, "nothing was answered before the ping")
	require.Zero(t, rep.Status())
}

func TestMalformedFramesCloseOnlyThatConnection(t *testing.T) {
	t.Parallel()
	b, other := start(t, brokertest.InMemory())
	frame := func(size uint32, kind byte) []byte {
		f := make([]byte, wire.HeaderSize)
		binary.LittleEndian.PutUint32(f[48:], size)
		f[60] = kind
		return f
	}
	cases := []struct {
		name  string
		bytes []byte
	}{
		{"size below the header", frame(100, 5)},
		{"size above 64 MiB", frame(wire.MaxFrameSize+1, 5)},
		{"command above 29", frame(wire.HeaderSize, 30)},
	}
	for i, tc := range cases {
		c := login(t, b)
		require.NoError(t, c.WriteRaw(tc.bytes), tc.name)
		_, err := c.Read()
		require.Error(t, err, "case %d %s: connection must close", i, tc.name)
		require.NotErrorIs(t, err, rawclient.ErrTimeout, "case %d %s", i, tc.name)
	}
	// A valid frame that is not a request is ignored; the connection stays.
	c := login(t, b)
	require.NoError(t, c.WriteRaw(frame(wire.HeaderSize, byte(wire.FrameReply))))
	require.Empty(t, ok(t, do(t, c, wire.CmdPing, nil)))
	// A client that disconnects mid-frame loses only that frame.
	sid, tid := setup(t, other, 1)
	half := sendBody(t, sid, tid, wire.ToPartition(0), "lost")
	h := c.Header(wire.CmdSendMessages)
	h.Size = uint32(wire.HeaderSize + len(half))
	hb := make([]byte, wire.HeaderSize)
	h.Put(hb)
	require.NoError(t, c.WriteRaw(append(hb, half[:len(half)/2]...)))
	c.Close()
	require.Equal(t, uint64(0), send(t, other, sid, tid, wire.ToPartition(0), "kept").BaseOffset)
}

func TestTLS(t *testing.T) {
	t.Parallel()
	tc := tlstest.SelfSigned(t)
	cert, pool := tc.TLS, tc.Pool
	b := brokertest.Start(t, brokertest.Config(func(c *broker.Config) {
		c.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}))
	c, err := rawclient.DialTLS(context.Background(), b.Addr(), &tls.Config{RootCAs: pool, ServerName: "localhost"})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Login("iggy", "iggy")
	require.NoError(t, err)
	sid, tid := setup(t, c, 1)
	send(t, c, sid, tid, wire.ToPartition(0), "a", "b", "c")
	r := poll(t, c, wire.PollMessages{Consumer: single(1), Stream: sid, Topic: tid, Partition: wire.Partition(0), Strategy: wire.AtOffset(0), Count: 3})
	require.Equal(t, []string{"a", "b", "c"}, payloads(r))

	plain, err := rawclient.Dial(context.Background(), b.Addr())
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.Login("iggy", "iggy")
	require.Error(t, err, "plain TCP must not get through a TLS listener")
}

func TestClientsAndStats(t *testing.T) {
	t.Parallel()
	b, c := start(t, brokertest.InMemory())
	anon := dial(t, b)
	require.Empty(t, ok(t, do(t, anon, wire.CmdPing, nil)))
	me := decodeAs[wire.ClientInfo](t, ok(t, do(t, c, wire.CmdGetMe, nil)))
	require.Equal(t, uint32(0), me.UserID)
	require.Equal(t, uint8(1), me.Transport)
	require.Equal(t, c.Conn().LocalAddr().String(), me.Address)
	list := decodeAs[wire.ClientList](t, ok(t, do(t, c, wire.CmdGetClients, nil)))
	require.Len(t, list, 2)
	var anonInfo wire.ClientInfo
	for _, ci := range list {
		if ci.ClientID != me.ClientID {
			anonInfo = ci
		}
	}
	require.Equal(t, uint32(0xFFFFFFFF), anonInfo.UserID, "not logged in")
	one := decodeAs[wire.ClientInfo](t, ok(t, do(t, c, wire.CmdGetClient, &wire.GetClient{ClientID: anonInfo.ClientID})))
	require.Equal(t, anonInfo.Address, one.Address)
	require.Empty(t, ok(t, do(t, c, wire.CmdGetClient, &wire.GetClient{ClientID: 99999})))

	sid, tid := setup(t, c, 2)
	send(t, c, sid, tid, wire.ToPartition(1), "x", "y")
	st := decodeAs[wire.Stats](t, ok(t, do(t, c, wire.CmdGetStats, nil)))
	require.NotZero(t, st.ProcessID)
	require.NotZero(t, st.MemoryUsage)
	require.NotEmpty(t, st.Hostname)
	require.NotEmpty(t, st.OSName)
	require.Equal(t, broker.ServerVersion, st.ServerVersion)
	require.Equal(t, uint32(1), st.StreamsCount)
	require.Equal(t, uint32(1), st.TopicsCount)
	require.Equal(t, uint32(2), st.PartitionsCount)
	require.Equal(t, uint64(2), st.MessagesCount)
	require.Equal(t, uint32(2), st.ClientsCount)
}
