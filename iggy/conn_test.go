package iggy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/ferryhq/ferry/internal/tlstest"
)

// silentListener accepts connections and never answers: a real TCP peer
// that lets a test see deadlines honoured.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

func TestContextDeadlineAgainstSilentPeer(t *testing.T) {
	t.Parallel()
	addr := silentListener(t)
	ctx := testCtx(t)

	// Login never gets a reply: Dial ends with ctx.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := iggy.Dial(short, "iggy://iggy:iggy@"+addr)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, iggy.ErrConnection)

	// Without credentials Dial only connects; a ping then times out.
	c, err := iggy.Dial(ctx, addr, iggy.WithoutReconnect())
	require.NoError(t, err)
	defer c.Close()
	short, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err = c.Ping(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, iggy.ErrConnection)
	// The connection was dropped: a late reply could not be matched.
	err = c.Ping(ctx)
	require.ErrorIs(t, err, iggy.ErrConnection)
	require.ErrorContains(t, err, "reconnecting is off")
}

func TestRequestTimeoutWithoutDeadline(t *testing.T) {
	t.Parallel()
	addr := silentListener(t)
	c, err := iggy.Dial(testCtx(t), addr, iggy.WithRequestTimeout(150*time.Millisecond), iggy.WithoutReconnect())
	require.NoError(t, err)
	defer c.Close()
	err = c.Ping(context.Background())
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne *iggy.NetError
	require.ErrorAs(t, err, &ne)
	require.Equal(t, "ping", ne.Op)
}

func TestCancelMidRequestDropsTheConnection(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	_, err := c.CreateStream(ctx, "before")
	require.NoError(t, err)

	entered := make(chan struct{}, 1)
	stop := b.ControlOnce(wire.CmdGetStreams, func(broker.Request) broker.Action {
		entered <- struct{}{}
		return broker.Action{Delay: time.Second}
	})
	defer stop()
	callCtx, cancel := context.WithCancel(ctx)
	go func() {
		<-entered
		cancel()
	}()
	_, err = c.ListStreams(callCtx)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, iggy.ErrConnection)

	// The client reconnects; the delayed reply never reaches the next call.
	l, err := c.ListStreams(ctx)
	require.NoError(t, err)
	require.Len(t, l, 1)
	_, err = c.CreateStream(ctx, "after")
	require.NoError(t, err)
}

func TestContextDeadlineAgainstBroker(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	stop := b.Control(wire.CmdGetStats, func(broker.Request) broker.Action { return broker.Action{NoReply: true} })
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := c.Stats(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	stop()
	_, err = c.Stats(ctx)
	require.NoError(t, err, "the client reconnected")

	// A context that has already ended sends nothing and keeps the connection.
	done, cancel2 := context.WithCancel(ctx)
	cancel2()
	require.ErrorIs(t, c.Ping(done), context.Canceled)
	me, err := c.Me(ctx)
	require.NoError(t, err)
	require.NotNil(t, me)
}

func TestTransientRepliesAreReplayed(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	ctx := testCtx(t)
	var mu sync.Mutex
	var ids []uint64
	stop := b.Control(wire.CmdCreateStream, func(r broker.Request) broker.Action {
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, r.Header.Request)
		switch len(ids) {
		case 1:
			return broker.Action{Body: wire.AppendResultErr(nil, wire.ErrTransientNotCommitted.Code)}
		case 2:
			return broker.Action{Body: wire.AppendResultErr(nil, wire.ErrTransientNotAccepted.Code)}
		}
		return broker.Action{}
	})
	defer stop()
	s, err := c.CreateStream(ctx, "replayed")
	require.NoError(t, err)
	require.Equal(t, "replayed", s.Name)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, ids, 3)
	require.Equal(t, ids[0], ids[1], "a replay reuses the request id")
	require.Equal(t, ids[0], ids[2])
}

// TestRequestIDs checks §2.5: metadata ops take the counter and advance
// it; partition ops and non-replicated reads carry it unchanged.
func TestRequestIDs(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	var mu sync.Mutex
	var seen []string
	record := func(r broker.Request) broker.Action {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s:%d", r.Command, r.Header.Request))
		mu.Unlock()
		return broker.Action{}
	}
	for _, cmd := range []wire.Command{wire.CmdLoginRegister, wire.CmdGetClusterMetadata, wire.CmdPing,
		wire.CmdCreateStream, wire.CmdCreateTopic, wire.CmdSendMessages, wire.CmdPollMessages} {
		defer b.Control(cmd, record)()
	}
	c := dial(t, b.Addr(), iggy.WithHeartbeat(0))
	ctx := testCtx(t)
	require.NoError(t, c.Ping(ctx))
	_, err := c.CreateStream(ctx, "s")
	require.NoError(t, err)
	require.NoError(t, c.Ping(ctx))
	_, err = c.CreateTopic(ctx, iggy.NamedID("s"), "t", 1)
	require.NoError(t, err)
	_, err = c.SendMessages(ctx, iggy.NamedID("s"), iggy.NamedID("t"), iggy.ToPartition(0), payloads("m", 1))
	require.NoError(t, err)
	_, err = c.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID("s"), Topic: iggy.NamedID("t"),
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 1,
	})
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{
		"login_register:0", "get_cluster_metadata:1", "ping:1", "create_stream:1", "ping:2",
		"create_topic:2", "send_messages:3", "poll_messages:3",
	}, seen)
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	var pings atomic.Int32
	defer b.Control(wire.CmdPing, func(broker.Request) broker.Action { pings.Add(1); return broker.Action{} })()
	dial(t, b.Addr(), iggy.WithHeartbeat(20*time.Millisecond))
	require.Eventually(t, func() bool { return pings.Load() >= 3 }, 10*time.Second, 5*time.Millisecond)
}

func TestReconnectRejoinsGroups(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	var logs bytes.Buffer
	var logMu sync.Mutex
	c := dial(t, b.Addr(), iggy.WithReconnect(10*time.Millisecond, 100*time.Millisecond),
		iggy.WithLogger(slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 2)
	g, err := c.CreateConsumerGroup(ctx, s, tp, "g")
	require.NoError(t, err)
	gid := iggy.NumericID(g.ID)
	require.NoError(t, c.JoinConsumerGroup(ctx, s, tp, gid))

	// The broker drops the connection on the next ping.
	b.ControlOnce(wire.CmdPing, func(broker.Request) broker.Action { return broker.Action{Drop: true} })
	err = c.Ping(ctx)
	require.ErrorIs(t, err, iggy.ErrConnection)

	// The next call waits for the reconnect; the membership is back.
	a, err := c.SyncConsumerGroup(ctx, s, tp, gid)
	require.NoError(t, err)
	require.ElementsMatch(t, []uint32{0, 1}, a.Partitions)
	got, err := c.GetConsumerGroup(ctx, s, tp, gid)
	require.NoError(t, err)
	require.Len(t, got.Members, 1, "the old session's membership is gone, the new one joined")
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	require.Contains(t, out, "reconnected")
}

func TestReconnectAfterBrokerRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := startBrokerWith(t, broker.Config{DataDir: dir})
	addr := b.Addr()
	c := dial(t, addr, iggy.WithReconnect(10*time.Millisecond, 200*time.Millisecond))
	ctx := testCtx(t)
	s, tp := newTopic(t, c, 3)
	g, err := c.CreateConsumerGroup(ctx, s, tp, "g")
	require.NoError(t, err)
	gid := iggy.NumericID(g.ID)
	require.NoError(t, c.JoinConsumerGroup(ctx, s, tp, gid))
	_, err = c.SendMessages(ctx, s, tp, iggy.ToPartition(1), payloads("before", 3))
	require.NoError(t, err)

	require.NoError(t, b.Close())
	b2 := startBrokerWith(t, broker.Config{DataDir: dir, Addr: addr})
	require.Equal(t, addr, b2.Addr())

	// The first call after the restart may see the broken connection.
	var a *iggy.GroupAssignment
	for range 2 {
		a, err = c.SyncConsumerGroup(ctx, s, tp, gid)
		if err == nil || !errors.Is(err, iggy.ErrConnection) {
			break
		}
	}
	require.NoError(t, err)
	require.ElementsMatch(t, []uint32{0, 1, 2}, a.Partitions, "re-joined the group after the restart")
	r, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: s, Topic: tp,
		Partition: iggy.Partition(1), Strategy: iggy.First(), Count: 10,
	})
	require.NoError(t, err)
	require.Len(t, r.Messages, 3)
	require.Equal(t, "before-0", string(r.Messages[0].Payload))
}

func TestWaitForReconnectEndsWithContext(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr(), iggy.WithReconnect(20*time.Millisecond, 50*time.Millisecond))
	ctx := testCtx(t)
	require.NoError(t, c.Ping(ctx))
	require.NoError(t, b.Close())
	_ = c.Ping(ctx) // sees the close
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err := c.Ping(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, iggy.ErrConnection)
	require.ErrorContains(t, err, "waiting to reconnect")
}

func TestWrongPasswordIsNotRetried(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	var logins atomic.Int32
	defer b.Control(wire.CmdLoginRegister, func(broker.Request) broker.Action { logins.Add(1); return broker.Action{} })()
	_, err := iggy.Dial(testCtx(t), "iggy://iggy:wrong@"+b.Addr())
	require.ErrorIs(t, err, iggy.ErrInvalidCredentials)
	var ev *wire.EvictionError
	require.ErrorAs(t, err, &ev)
	require.Equal(t, wire.EvictInvalidCredentials, ev.Reason)
	require.EqualValues(t, 1, logins.Load())
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestCredentialsNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "Sup3rSecretPw"
	b := startBrokerWith(t, broker.Config{RootUsername: "admin", RootPassword: secret})
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{&logs, &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := testCtx(t)

	c := dial(t, b.Addr(), iggy.WithCredentials("admin", secret), iggy.WithLogger(logger),
		iggy.WithReconnect(10*time.Millisecond, 50*time.Millisecond))
	token, err := c.CreatePAT(ctx, "tok", 0)
	require.NoError(t, err)
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, c)
		require.NotContains(t, out, secret, format)
		require.Equal(t, "iggy.Client("+b.Addr()+")", out, format)
	}

	// Drive a reconnect and a few failures so the client logs.
	b.ControlOnce(wire.CmdPing, func(broker.Request) broker.Action { return broker.Action{Drop: true} })
	err1 := c.Ping(ctx)
	require.NoError(t, c.Ping(ctx))

	var errs []error
	errs = append(errs, err1)
	_, err = iggy.Dial(ctx, "iggy://admin:"+secret+"x@"+b.Addr(), iggy.WithLogger(logger))
	errs = append(errs, err)
	_, err = iggy.Dial(ctx, "iggy://admin:"+secret+"@127.0.0.1:1", iggy.WithLogger(logger))
	errs = append(errs, err)
	_, err = iggy.Dial(ctx, "iggy://admin:"+secret+"@"+b.Addr()+"?nope=1")
	errs = append(errs, err)
	_, err = iggy.Dial(ctx, "iggy://"+token+"x@"+b.Addr(), iggy.WithLogger(logger))
	errs = append(errs, err)
	for i, e := range errs {
		require.Error(t, e, "case %d", i)
		require.NotContains(t, e.Error(), secret, "case %d", i)
		require.NotContains(t, e.Error(), token, "case %d", i)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	require.Contains(t, out, "connection lost", "the test made the client log")
	require.Contains(t, out, "reconnected")
	require.NotContains(t, out, secret)
	require.NotContains(t, out, token)
}

func TestTLS(t *testing.T) {
	t.Parallel()
	tc := tlstest.SelfSigned(t)
	certPEM, serverCert := tc.CertPEM, tc.TLS
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, certPEM, 0o600))
	b := startBrokerWith(t, broker.Config{TLS: &tls.Config{Certificates: []tls.Certificate{serverCert}}})
	ctx := testCtx(t)

	for i, target := range []string{
		"iggy+tls://iggy:iggy@" + b.Addr() + "?tls_ca_file=" + caFile + "&tls_domain=localhost",
		"iggy://iggy:iggy@" + b.Addr() + "?tls=true&tls_ca_file=" + caFile + "&tls_domain=localhost",
	} {
		c, err := iggy.Dial(ctx, target)
		require.NoError(t, err, "case %d", i)
		name := uniqueName("tls")
		_, err = c.CreateStream(ctx, name)
		require.NoError(t, err)
		_, err = c.CreateTopic(ctx, iggy.NamedID(name), "t", 1)
		require.NoError(t, err)
		_, err = c.SendMessages(ctx, iggy.NamedID(name), iggy.NamedID("t"), iggy.ToPartition(0), payloads("m", 3))
		require.NoError(t, err)
		r, err := c.PollMessages(ctx, iggy.PollRequest{
			Consumer: iggy.SingleConsumer(iggy.NumericID(1)), Stream: iggy.NamedID(name), Topic: iggy.NamedID("t"),
			Partition: iggy.Partition(0), Strategy: iggy.AtOffset(0), Count: 3,
		})
		require.NoError(t, err)
		require.Len(t, r.Messages, 3)
		require.NoError(t, c.Close())
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	c, err := iggy.Dial(ctx, b.Addr(), iggy.WithTLSConfig(&tls.Config{RootCAs: pool, ServerName: "localhost"}),
		iggy.WithCredentials("iggy", "iggy"))
	require.NoError(t, err)
	require.NoError(t, c.Ping(ctx))
	require.NoError(t, c.Close())

	// An untrusted certificate fails the handshake.
	_, err = iggy.Dial(ctx, "iggy+tls://iggy:iggy@"+b.Addr())
	require.ErrorIs(t, err, iggy.ErrConnection)
	require.ErrorContains(t, err, "tls handshake")
}

// selfSigned returns a self-signed certificate for localhost and 127.0.0.1.
func TestClosedClient(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dial(t, b.Addr())
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "idempotent")
	require.ErrorIs(t, c.Ping(testCtx(t)), iggy.ErrClosed)
}

// TestReconnectStopsOnRejectedLogin: once the token is gone, a reconnect
// is refused and not tried again; calls report why.
func TestReconnectStopsOnRejectedLogin(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	admin := dial(t, b.Addr())
	ctx := testCtx(t)
	token, err := admin.CreatePAT(ctx, "short-lived", 0)
	require.NoError(t, err)
	c, err := iggy.Dial(ctx, b.Addr(), iggy.WithToken(token), iggy.WithReconnect(5*time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, admin.DeletePAT(ctx, "short-lived"))

	var logins atomic.Int32
	defer b.Control(wire.CmdLoginRegister, func(broker.Request) broker.Action { logins.Add(1); return broker.Action{} })()
	b.ControlOnce(wire.CmdPing, func(broker.Request) broker.Action { return broker.Action{Drop: true} })
	require.ErrorIs(t, c.Ping(ctx), iggy.ErrConnection)
	err = c.Ping(ctx)
	require.ErrorIs(t, err, iggy.ErrInvalidPAT)
	require.ErrorContains(t, err, "reconnecting gave up")
	require.ErrorIs(t, c.Ping(ctx), iggy.ErrInvalidPAT)
	require.EqualValues(t, 1, logins.Load(), "one attempt, no retries")
}
