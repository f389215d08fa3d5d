package live_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/broker/brokertest"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/live"
)

func TestConnectIDHasNoSecret(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	ctx := testCtx(t)
	h, err := live.Connect(ctx, "iggy://iggy:iggy@"+b.Addr())
	require.NoError(t, err)
	require.Equal(t, b.Addr(), h.ID())
	require.Equal(t, "live.Handle("+b.Addr()+")", fmt.Sprint(h))
	require.NotSame(t, h.ConsumerClient(), h.ProducerClient(), "two connections")
	require.NoError(t, h.Close())
	require.NoError(t, h.Close(), "Close is idempotent")

	_, err = live.Connect(ctx, "iggy://iggy:wrong@"+b.Addr())
	require.ErrorIs(t, err, iggy.ErrInvalidCredentials)
	require.NotContains(t, err.Error(), "wrong")
	_, err = live.Connect(ctx, "kafka://x")
	require.ErrorIs(t, err, iggy.ErrInvalidConnectionString)
}

func TestFromClient(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.InMemory())
	ctx := testCtx(t)
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
	require.NoError(t, err)
	defer c.Close()
	for i, tc := range []struct{ id, want string }{
		{"", b.Addr()},
		{"prod-iggy", "prod-iggy"},
		{"iggy://user:secret@host:8090", "iggy://host:8090"},
		{"iggy+tls://tok@host:8090?pat=secret&tls=true", "iggy+tls://host:8090"},
		{"user:secret@host:8090", "host:8090"},
		{"iggy://us%zz:secret@host?pat=secret", "iggy://host"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			require.Equal(t, tc.want, live.FromClient(c, tc.id).ID())
		})
	}
	h := live.FromClient(c, "")
	require.Same(t, c, h.ConsumerClient())
	require.Same(t, c, h.ProducerClient())
	require.NoError(t, h.Close())
	_, err = c.ListStreams(ctx)
	require.NoError(t, err, "the caller's client stays open")
}

// TestCloseEndsGoroutines is not parallel: the goroutine count is its own.
func TestCloseEndsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	ctx := testCtx(t)
	b, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0"})
	require.NoError(t, err)
	h, err := live.Connect(ctx, "iggy://iggy:iggy@"+b.Addr(), iggy.WithHeartbeat(10*time.Millisecond))
	require.NoError(t, err)
	admin := h.ProducerClient()
	_, err = admin.CreateStream(ctx, "s")
	require.NoError(t, err)
	_, err = admin.CreateTopic(ctx, iggy.NamedID("s"), "t", 2)
	require.NoError(t, err)
	stream, topic := iggy.NamedID("s"), iggy.NamedID("t")

	tg, err := h.Target(ctx, stream, topic, live.WithStateFile(filepath.Join(t.TempDir(), "state")))
	require.NoError(t, err)
	require.NoError(t, tg.Declare("a", []byte("1")))
	_, err = tg.Apply(ctx)
	require.NoError(t, err)
	s, err := h.Stream(ctx, stream, topic, "g")
	require.NoError(t, err)
	m, err := s.Next(ctx)
	require.NoError(t, err)
	m.Done()
	mp, err := h.Map(ctx, stream, topic, live.StringKey)
	require.NoError(t, err)
	_, err = mp.Next(ctx)
	require.NoError(t, err)
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, _ = mp.Next(short) // leaves a poll in the background, or sleeps
	_, _ = s.Next(short)
	cancel()

	require.NoError(t, s.Close(ctx))
	require.NoError(t, mp.Close(ctx))
	require.NoError(t, tg.Close(ctx))
	require.NoError(t, h.Close())
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

func TestFileStore(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dir := t.TempDir()
	s := live.FileStore(filepath.Join(dir, "state.json"))
	b, err := s.Load(ctx)
	require.NoError(t, err)
	require.Nil(t, b, "nothing saved yet")
	require.NoError(t, s.Save(ctx, []byte("one")))
	require.NoError(t, s.Save(ctx, []byte("two")))
	b, err = s.Load(ctx)
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary files left")

	bad := live.FileStore(filepath.Join(dir, "missing-dir", "state.json"))
	require.ErrorContains(t, bad.Save(ctx, []byte("x")), "live: writing target state")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s.Save(cancelled, []byte("x")), context.Canceled)
	_, err = s.Load(cancelled)
	require.ErrorIs(t, err, context.Canceled)
}
