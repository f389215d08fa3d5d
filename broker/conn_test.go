package broker_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// A group member whose client stops reading blocks the broker's writer on
// a full socket. The janitor's eviction must still end the connection, so
// the member leaves and the group rebalances.
func TestStuckReaderIsEvicted(t *testing.T) {
	t.Parallel()
	b, c := start(t, brokertest.InMemory(), brokertest.Config(func(cfg *broker.Config) {
		cfg.HeartbeatInterval = 100 * time.Millisecond
	}))
	sid, tid := setup(t, c, 1)
	big := strings.Repeat("x", 1<<20)
	for i := 0; i < 8; i++ {
		send(t, c, sid, tid, wire.ToPartition(0), big, big)
	}
	gd := decodeAs[wire.GroupDetails](t, ok(t, do(t, c, wire.CmdCreateConsumerGroup,
		&wire.CreateConsumerGroup{Stream: sid, Topic: tid, Name: "g"})))
	gref := &wire.GroupRef{Stream: sid, Topic: tid, Group: wire.NumericID(gd.ID)}

	stuck := login(t, b)
	require.NoError(t, stuck.Conn().(*net.TCPConn).SetReadBuffer(4096))
	ok(t, do(t, stuck, wire.CmdJoinConsumerGroup, gref))
	members := func() int {
		return len(decodeAs[wire.GroupDetails](t, ok(t, do(t, c, wire.CmdGetConsumerGroup, gref))).Members)
	}
	require.Equal(t, 1, members())
	// Ask for ~16 MiB four times and never read the replies.
	for i := 0; i < 4; i++ {
		req := &wire.PollMessages{Consumer: groupConsumer(gd.ID), Stream: sid, Topic: tid,
			Partition: wire.Partition(0), Strategy: wire.AtOffset(0), Count: 1000}
		require.NoError(t, stuck.Write(stuck.Header(wire.CmdPollMessages), bodyOf(req)))
	}
	// Stale after 120 ms; the wait is generous, not a measurement.
	require.Eventually(t, func() bool { return members() == 0 }, 30*time.Second, 20*time.Millisecond,
		"a member that stopped reading is never evicted")
}

// Before login a frame may be at most 64 KiB: a client may not make the
// broker wait for (and buffer) a 1 MiB body without credentials.
func TestFrameLimitBeforeLogin(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	c := dial(t, b)
	h := wire.RequestHeader{Client: c.ClientID, Operation: wire.OpRegister, Size: 1 << 20}
	frame := make([]byte, wire.HeaderSize)
	h.Put(frame)
	require.NoError(t, c.WriteRaw(append(frame, make([]byte, 1000)...)))
	_, err := c.ReadWithin(10 * time.Second)
	require.Error(t, err)
	require.False(t, errors.Is(err, rawclient.ErrTimeout), "the broker waits for the body of a 1 MiB frame before login")

	// After login the same size is fine.
	c2 := login(t, b)
	rep := do(t, c2, wire.CmdPing, make([]byte, 1<<20))
	require.Zero(t, rep.Status())
}

// A connection that never logs in is closed after LoginTimeout; a
// logged-in one may stay idle.
func TestLoginTimeout(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory(), brokertest.Config(func(cfg *broker.Config) {
		cfg.LoginTimeout = 200 * time.Millisecond
	}))
	idle := dial(t, b)
	loggedIn := login(t, b)
	_, err := idle.ReadWithin(10 * time.Second)
	require.Error(t, err)
	require.False(t, errors.Is(err, rawclient.ErrTimeout), "an idle connection that never logged in is kept open")

	time.Sleep(600 * time.Millisecond) // three login timeouts of silence
	require.Zero(t, do(t, loggedIn, wire.CmdPing, nil).Status())
}
