package broker_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

func TestControl(t *testing.T) {
	t.Parallel()
	b, c := start(t, brokertest.InMemory())

	var pings, others atomic.Int32
	stop := b.Control(wire.CmdPing, func(r broker.Request) broker.Action {
		pings.Add(1)
		if r.Command != wire.CmdPing || r.ConnID == 0 {
			others.Add(1)
		}
		return broker.Action{}
	})
	for i := 0; i < 3; i++ {
		require.Empty(t, ok(t, do(t, c, wire.CmdPing, nil)))
	}
	require.Equal(t, int32(3), pings.Load(), "watched")
	require.Zero(t, others.Load())
	stop()
	ok(t, do(t, c, wire.CmdPing, nil))
	require.Equal(t, int32(3), pings.Load(), "cancelled")

	b.ControlOnce(wire.CmdCreateStream, func(broker.Request) broker.Action {
		return broker.Action{Status: wire.ErrTransientNotAccepted.Code}
	})
	denied(t, do(t, c, wire.CmdCreateStream, &wire.CreateStream{Name: "s"}), wire.ErrTransientNotAccepted.Code)
	createStream(t, c, "s") // once only

	b.ControlOnce(wire.CmdGetStreams, func(broker.Request) broker.Action {
		return broker.Action{Body: []byte("replaced")}
	})
	require.Equal(t, []byte("replaced"), ok(t, do(t, c, wire.CmdGetStreams, nil)))

	b.ControlOnce(wire.CmdPing, func(broker.Request) broker.Action { return broker.Action{Delay: 20 * time.Millisecond} })
	require.Empty(t, ok(t, do(t, c, wire.CmdPing, nil)), "a delayed request is still answered")

	b.ControlOnce(wire.CmdPing, func(broker.Request) broker.Action { return broker.Action{NoReply: true} })
	require.NoError(t, c.Write(c.Header(wire.CmdPing), nil))
	h := c.Header(wire.CmdPing)
	h.Request = 99
	rep, err := c.Exchange(h, nil)
	require.NoError(t, err)
	require.Equal(t, uint64(99), rep.Header.Request, "the first ping got no reply")

	b.ControlOnce(wire.CmdPing, func(broker.Request) broker.Action { return broker.Action{Drop: true} })
	d := login(t, b)
	_, err = d.Do(wire.CmdPing, nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, rawclient.ErrTimeout, "dropped")
	ok(t, do(t, c, wire.CmdPing, nil))
}

func TestCloseIsIdempotentAndEndsConnections(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	c := login(t, b)
	require.NoError(t, b.Close())
	require.NoError(t, b.Close())
	<-b.Done()
	_, err := c.Do(wire.CmdPing, nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, rawclient.ErrTimeout)
}

// TestCloseLeavesNoGoroutines is not parallel: it counts the process's
// goroutines around a broker's life.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	b, err := broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(),
		HeartbeatInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	var clients []*rawclient.Client
	for i := 0; i < 4; i++ {
		c := login(t, b)
		clients = append(clients, c)
	}
	sid, tid := setup(t, clients[0], 2)
	send(t, clients[0], sid, tid, wire.ToPartition(1), "a")
	gd := decodeAs[wire.GroupDetails](t, ok(t, do(t, clients[0], wire.CmdCreateConsumerGroup, &wire.CreateConsumerGroup{Stream: sid, Topic: tid, Name: "g"})))
	ok(t, do(t, clients[1], wire.CmdJoinConsumerGroup, &wire.GroupRef{Stream: sid, Topic: tid, Group: wire.NumericID(gd.ID)}))
	clients[2].Close()
	b.ControlOnce(wire.CmdPing, func(broker.Request) broker.Action { return broker.Action{Delay: time.Hour} })
	require.NoError(t, clients[3].Write(clients[3].Header(wire.CmdPing), nil)) // held in a delay
	require.NoError(t, b.Close())
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
