package iggy_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy"
)

// TestCloseEndsGoroutines runs before the parallel tests (it is not
// parallel), so the goroutine count is this test's alone.
func TestCloseEndsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := testCtx(t)
	b, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0"})
	require.NoError(t, err)
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr(), iggy.WithHeartbeat(10*time.Millisecond))
	require.NoError(t, err)
	_, err = c.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = c.CreateTopic(ctx, iggy.NamedID("s"), "t", 2)
	require.NoError(t, err)

	p, err := iggy.NewProducer(c, iggy.NamedID("s"), iggy.NamedID("t"))
	require.NoError(t, err)
	require.NoError(t, p.Send(ctx, payloads("m", 10)...).Wait(ctx))
	g, err := iggy.NewGroupConsumer(c, iggy.NamedID("s"), iggy.NamedID("t"), iggy.NamedID("g"), iggy.WithCreateGroup())
	require.NoError(t, err)
	_, err = g.Poll(ctx)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _ = g.Poll(short) // may leave a request in the background
	cancel()

	require.NoError(t, g.Close(ctx))
	require.NoError(t, p.Close(ctx))
	require.NoError(t, c.Close())
	require.NoError(t, b.Close())
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
