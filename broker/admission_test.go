package broker_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/broker/internal/rawclient"
	"github.com/ferryhq/ferry/iggy/wire"
	"github.com/stretchr/testify/require"
)

// With room for three connections that have not logged in, a fourth
// closes the oldest; the others, and logged-in ones, are untouched. With
// every slot logged in, a new connection is closed at once.
func TestConnectionCaps(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory(), brokertest.Config(func(c *broker.Config) {
		c.MaxConns, c.MaxUnauthConns = 5, 3
	}))
	in1, in2 := login(t, b), login(t, b)
	var waiting []*rawclient.Client
	for range 3 {
		c := dial(t, b)
		require.Zero(t, do(t, c, wire.CmdPing, nil).Status()) // admitted, in this order
		waiting = append(waiting, c)
	}
	newest := dial(t, b)
	require.Zero(t, do(t, newest, wire.CmdPing, nil).Status())
	requireClosed(t, waiting[0], "the oldest connection that has not logged in")
	for _, c := range append(waiting[1:], newest, in1, in2) {
		require.Zero(t, do(t, c, wire.CmdPing, nil).Status())
	}

	// Log the waiting ones in: five logged in, the total cap.
	for _, c := range append(waiting[1:], newest) {
		rep, err := c.Login("iggy", "iggy")
		require.NoError(t, err)
		require.Nil(t, rep.Eviction)
	}
	requireClosed(t, dial(t, b), "a connection over the cap when every connection is logged in")
	require.Zero(t, do(t, in1, wire.CmdPing, nil).Status())
}

// requireClosed requires that the broker closes c: a read ends in an
// error that is not the client's own timeout (the wait is generous, not a
// measurement).
func requireClosed(t *testing.T, c *rawclient.Client, what string) {
	t.Helper()
	_ = c.Write(c.Header(wire.CmdPing), nil)
	for {
		rep, err := c.ReadWithin(30 * time.Second)
		if err == nil && rep != nil {
			continue // the ping's reply if it was answered before the close
		}
		require.Error(t, err)
		require.False(t, errors.Is(err, rawclient.ErrTimeout), "%s is kept open", what)
		return
	}
}

// Pings (or any request) before login do not move the login deadline:
// a connection that pings every 50 ms and never logs in is closed anyway.
func TestPingsDoNotExtendLoginDeadline(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory(), brokertest.Config(func(c *broker.Config) {
		c.LoginTimeout = 300 * time.Millisecond
	}))
	c := dial(t, b)
	pings := 0
	end := time.Now().Add(30 * time.Second) // generous: a bound on the loop, not a measurement
	for time.Now().Before(end) {
		rep, err := c.Exchange(c.Header(wire.CmdPing), nil)
		if err != nil {
			require.False(t, errors.Is(err, rawclient.ErrTimeout), "the broker stopped answering without closing")
			require.NotZero(t, pings, "the first ping was not answered")
			return // closed by the broker, as it should
		}
		require.Zero(t, rep.Status())
		pings++
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("a connection that pinged %d times without logging in was kept open for 30s (login timeout 300ms)", pings)
}
